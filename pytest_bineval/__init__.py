"""pytest-bineval: test LLM outputs with binary yes/no checklists (the BinEval method).

Python API (works without pytest)::

    checklist = generate_checklist("Summarize the news article in 2-3 sentences.", dimensions=["consistency"])
    result = evaluate(summary, checklist, source=article)
    result.scores, result.overall, result.rescaled(1, 5), result.verdicts, result.usage

Heavy dependencies (litellm, llama.cpp) are imported only when a model is called.
"""

from __future__ import annotations

from typing import Any

from ._version import __version__
from .assertions import assert_passes, assert_passes_async
from .dimensions import BUILTIN_DIMENSIONS, DimensionsArg, parse_dimensions
from .engine import Engine, run_sync
from .errors import (
    ArgumentTypeError,
    BinevalAssertionError,
    BinevalError,
    BinevalJudgeError,
    CallError,
    ChecklistGenerationError,
    DataFileError,
    InputTooLargeError,
    MissingExtraError,
    NoTaskError,
    PinError,
    UsageError,
)
from .llm.providers import DEFAULT_MODEL, ensure_provider, register_provider
from .models import Checklist, Evaluation, Question, QworldTree, Usage, Verdict, points_score
from .prompting import prompt_version
from .qworld import QworldConfig
from .record import EvaluationRecord, ReportDocument
from .settings import Settings

__all__ = [
    "BUILTIN_DIMENSIONS",
    "DEFAULT_MODEL",
    "ArgumentTypeError",
    "BinevalAssertionError",
    "BinevalError",
    "BinevalJudgeError",
    "CallError",
    "Checklist",
    "ChecklistGenerationError",
    "DataFileError",
    "Engine",
    "Evaluation",
    "EvaluationRecord",
    "InputTooLargeError",
    "MissingExtraError",
    "NoTaskError",
    "PinError",
    "Question",
    "QworldConfig",
    "QworldTree",
    "ReportDocument",
    "Settings",
    "Usage",
    "UsageError",
    "Verdict",
    "__version__",
    "aevaluate",
    "agenerate_checklist",
    "assert_passes",
    "assert_passes_async",
    "ensure_provider",
    "evaluate",
    "generate_checklist",
    "parse_dimensions",
    "points_score",
    "prompt_version",
    "register_provider",
]


def _engine(model: str | None, settings: Settings | None, options: dict[str, Any]) -> Engine:
    base = settings or Settings()
    return Engine(base.with_overrides(model=model, **options))


async def agenerate_checklist(task: str | None, dimensions: DimensionsArg = None, *, model: str | None = None,
                              strategy: str = "bineval", question: str | None = None,
                              qworld: QworldConfig | None = None, settings: Settings | None = None,
                              **options: Any) -> Checklist:
    """Turn a task prompt into a checklist of yes/no questions grouped by dimension.

    ``dimensions``: built-in names (coherence, consistency, fluency, relevance; all four when None)
    and/or ``{"name": "definition"}`` for your own. ``options`` are :class:`Settings` fields.

    ``strategy="qworld"`` (or ``"qworld-lite"``, one call) writes question-specific criteria with importance
    points for ``question`` instead (``task`` may then be None; ``dimensions`` default to one, ``quality``);
    ``qworld``: the tree's :class:`QworldConfig` (default: from the settings' ``qworld_*`` fields).
    """
    engine = _engine(model, settings, options)
    try:
        return await engine.achecklist(task, dimensions, strategy=strategy, question=question, qworld=qworld)
    finally:
        engine.close()


def generate_checklist(task: str | None, dimensions: DimensionsArg = None, *, model: str | None = None,
                       strategy: str = "bineval", question: str | None = None, qworld: QworldConfig | None = None,
                       settings: Settings | None = None, **options: Any) -> Checklist:
    """Sync twin of :func:`agenerate_checklist`."""
    return run_sync(agenerate_checklist(task, dimensions, model=model, strategy=strategy, question=question,
                                        qworld=qworld, settings=settings, **options))


async def aevaluate(output: str, checklist: Checklist, source: str | None = None, *,
                    dimensions: list[str] | str | None = None, model: str | None = None,
                    settings: Settings | None = None, **options: Any) -> Evaluation:
    """Answer every question of ``checklist`` (or of its ``dimensions``) about ``output``.

    Judge failures are error verdicts (``result.errors``), never yes or no; scores count answered
    questions only. An empty output is judged like any other; a non-str output is a TypeError; an
    output and source too large for the judge's context raise :class:`InputTooLargeError`.
    """
    from .judge import check_output

    check_output(output, source)
    selected = checklist.select([dimensions] if isinstance(dimensions, str) else dimensions)
    engine = _engine(model, settings, options)
    try:
        return await engine.aevaluate(output, selected, source)
    finally:
        engine.close()


def evaluate(output: str, checklist: Checklist, source: str | None = None, *,
             dimensions: list[str] | str | None = None, model: str | None = None,
             settings: Settings | None = None, **options: Any) -> Evaluation:
    """Sync twin of :func:`aevaluate`."""
    from .judge import check_output

    check_output(output, source)
    return run_sync(aevaluate(output, checklist, source, dimensions=dimensions, model=model,
                              settings=settings, **options))
