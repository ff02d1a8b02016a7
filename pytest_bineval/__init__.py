"""pytest-bineval: test LLM outputs with binary yes/no checklists (the BinEval method).

Python API (works without pytest)::

    checklist = generate_checklist("Summarize the news article in 2-3 sentences.", dimensions=["consistency"])
    result = evaluate(summary, checklist, source=article)
    result.scores, result.overall, result.rescaled(1, 5), result.verdicts, result.usage

This module only re-exports (PEP 562, on first use): ``import pytest_bineval`` imports neither pydantic models,
litellm nor a model, so loading the pytest plugin stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:
    from .api import aevaluate, agenerate_checklist, evaluate, generate_checklist
    from .assertions import assert_passes, assert_passes_async
    from .conversation import Conversation, ConversationError
    from .dimensions import BUILTIN_DIMENSIONS, DimensionsArg, parse_dimensions
    from .engine import Engine, run_sync
    from .errors import (
        ArgumentTypeError,
        BinevalAssertionError,
        BinevalError,
        BinevalJudgeError,
        BudgetReachedError,
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
    from .report.document import ReportDocument
    from .report.record import EvaluationRecord
    from .settings import Settings

# name -> the module that defines it
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("aevaluate", "agenerate_checklist", "evaluate", "generate_checklist"), ".api"),
    **dict.fromkeys(("assert_passes", "assert_passes_async"), ".assertions"),
    **dict.fromkeys(("Conversation", "ConversationError"), ".conversation"),
    **dict.fromkeys(("BUILTIN_DIMENSIONS", "DimensionsArg", "parse_dimensions"), ".dimensions"),
    **dict.fromkeys(("Engine", "run_sync"), ".engine"),
    **dict.fromkeys(("ArgumentTypeError", "BinevalAssertionError", "BinevalError", "BinevalJudgeError",
                     "BudgetReachedError", "CallError", "ChecklistGenerationError", "DataFileError",
                     "InputTooLargeError", "MissingExtraError", "NoTaskError", "PinError", "UsageError"), ".errors"),
    **dict.fromkeys(("DEFAULT_MODEL", "ensure_provider", "register_provider"), ".llm.providers"),
    **dict.fromkeys(("Checklist", "Evaluation", "Question", "QworldTree", "Usage", "Verdict", "points_score"),
                    ".models"),
    "prompt_version": ".prompting",
    "QworldConfig": ".qworld",
    "EvaluationRecord": ".report.record",
    "ReportDocument": ".report.document",
    "Settings": ".settings",
}

__all__ = [
    "BUILTIN_DIMENSIONS",
    "DEFAULT_MODEL",
    "ArgumentTypeError",
    "BinevalAssertionError",
    "BinevalError",
    "BinevalJudgeError",
    "BudgetReachedError",
    "CallError",
    "Checklist",
    "ChecklistGenerationError",
    "Conversation",
    "ConversationError",
    "DataFileError",
    "DimensionsArg",
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
    "run_sync",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # the next lookup does not come here
    return value


def __dir__() -> list[str]:
    return __all__
