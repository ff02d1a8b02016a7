"""Self-update loops on prompts: ``--bineval-optimize`` rewrites generator prompts with lessons from failing
questions (:mod:`.prompt`), ``bineval align`` rewrites an evaluator prompt with lessons from its
disagreements with a reference judge (:mod:`.align`); both run the same lesson loop (:mod:`.lessons`)."""

from __future__ import annotations

from .align import AlignItem, AlignResult, EvaluatorAligner, agreement, load_items, run_align
from .lessons import LessonLoop, append_lesson, apply_edit, dedup_lessons, history_path
from .prompt import Failure, PromptOptimizer, failures_by_prompt, optimize_prompts, run_score

__all__ = [
    "AlignItem",
    "AlignResult",
    "EvaluatorAligner",
    "Failure",
    "LessonLoop",
    "PromptOptimizer",
    "agreement",
    "append_lesson",
    "apply_edit",
    "dedup_lessons",
    "failures_by_prompt",
    "history_path",
    "load_items",
    "optimize_prompts",
    "run_align",
    "run_score",
]
