"""pytest-bineval: test LLM outputs with binary yes/no checklists (the BinEval method).

Python API (works without pytest)::

    checklist = generate_checklist("Summarize the news article in 2-3 sentences.", dimensions=["consistency"])
    result = evaluate(summary, checklist, source=article)
    result.scores, result.overall, result.rescaled(1, 5), result.verdicts, result.usage

The public API is what this module exports (``__all__``) and :mod:`pytest_bineval.testing`; every other module is
internal and may move. This module only re-exports (PEP 562, on first use): ``import pytest_bineval`` imports
neither pydantic models, litellm nor a model, so loading the pytest plugin stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:
    from .api import aevaluate, agenerate_checklist, evaluate, generate_checklist
    from .assertions import assert_passes, assert_passes_async
    from .checks import Check, CheckResult, run_check
    from .checks.extract import extract_checks
    from .checks.tools import ToolCheckResult
    from .conversation import Conversation, Message, ToolCall
    from .dimensions import BUILTIN_DIMENSIONS, DimensionsArg, parse_dimensions
    from .engine import Engine, run_sync
    from .errors import (
        ArgumentTypeError,
        BinevalAssertionError,
        BinevalCacheWarning,
        BinevalEncodingWarning,
        BinevalError,
        BinevalInsecureKeyWarning,
        BinevalJudgeError,
        BinevalWarning,
        BudgetReachedError,
        CallError,
        CheckError,
        ChecklistGenerationError,
        CheckTimeout,
        ConversationError,
        DataFileError,
        GeneratedCheckWarning,
        InputTooLargeError,
        MissingExtraError,
        MissingSourceWarning,
        NoTaskError,
        PinError,
        UsageError,
    )
    from .fixture import Bineval
    from .kinds import Threshold
    from .llm.providers import DEFAULT_MODEL, ensure_provider, register_provider
    from .models import (
        Checklist,
        ConfirmCost,
        Evaluation,
        Merge,
        Question,
        QworldTree,
        TreeNode,
        Usage,
        Verdict,
        points_score,
    )
    from .options import Options
    from .outputs.html import render_html, write_html
    from .prompting import prompt_version
    from .qworld import QworldConfig
    from .report.comparison import (
        BaselineDiff,
        EvaluationDiff,
        QuestionChange,
        RegressionReport,
        ScoreChange,
        diff_runs,
    )
    from .report.document import (
        ChecklistGeneration,
        OptimizeOutcome,
        PinAction,
        ReportDocument,
        ReportSettings,
        Totals,
        diff_reports,
    )
    from .report.ledger import RunLedger
    from .report.record import (
        Asked,
        DimensionResult,
        EvaluationRecord,
        JudgedBy,
        Location,
        RecordRequest,
        SourceDocument,
        UnscoredTest,
        UnstableQuestion,
    )
    from .report.source_change import SourceChange, diff_sources
    from .settings import Settings

# name -> the module that defines it
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("aevaluate", "agenerate_checklist", "evaluate", "generate_checklist"), ".api"),
    **dict.fromkeys(("assert_passes", "assert_passes_async"), ".assertions"),
    **dict.fromkeys(("Check", "CheckResult", "run_check"), ".checks"),
    "extract_checks": ".checks.extract",
    "ToolCheckResult": ".checks.tools",
    **dict.fromkeys(("Conversation", "Message", "ToolCall"), ".conversation"),
    **dict.fromkeys(("BUILTIN_DIMENSIONS", "DimensionsArg", "parse_dimensions"), ".dimensions"),
    **dict.fromkeys(("Engine", "run_sync"), ".engine"),
    **dict.fromkeys(("ArgumentTypeError", "BinevalAssertionError", "BinevalCacheWarning", "BinevalEncodingWarning",
                     "BinevalError", "BinevalInsecureKeyWarning", "BinevalJudgeError", "BinevalWarning",
                     "BudgetReachedError", "CallError", "CheckError", "ChecklistGenerationError", "CheckTimeout",
                     "ConversationError", "DataFileError",
                     "GeneratedCheckWarning", "InputTooLargeError", "MissingExtraError", "MissingSourceWarning",
                     "NoTaskError", "PinError", "UsageError"), ".errors"),
    "Bineval": ".fixture",
    "Threshold": ".kinds",
    **dict.fromkeys(("DEFAULT_MODEL", "ensure_provider", "register_provider"), ".llm.providers"),
    **dict.fromkeys(("Checklist", "ConfirmCost", "Evaluation", "Merge", "Question", "QworldTree", "TreeNode", "Usage",
                     "Verdict", "points_score"), ".models"),
    "Options": ".options",
    **dict.fromkeys(("render_html", "write_html"), ".outputs.html"),
    "prompt_version": ".prompting",
    "QworldConfig": ".qworld",
    **dict.fromkeys(("BaselineDiff", "EvaluationDiff", "QuestionChange", "RegressionReport", "ScoreChange",
                     "diff_runs"), ".report.comparison"),
    **dict.fromkeys(("ChecklistGeneration", "OptimizeOutcome", "PinAction", "ReportDocument", "ReportSettings",
                     "Totals", "diff_reports"), ".report.document"),
    "RunLedger": ".report.ledger",
    **dict.fromkeys(("Asked", "DimensionResult", "EvaluationRecord", "JudgedBy", "Location", "RecordRequest",
                     "SourceDocument", "UnscoredTest", "UnstableQuestion"), ".report.record"),
    **dict.fromkeys(("SourceChange", "diff_sources"), ".report.source_change"),
    "Settings": ".settings",
}

__all__ = [
    "BUILTIN_DIMENSIONS",
    "DEFAULT_MODEL",
    "ArgumentTypeError",
    "Asked",
    "BaselineDiff",
    "Bineval",
    "BinevalAssertionError",
    "BinevalCacheWarning",
    "BinevalEncodingWarning",
    "BinevalError",
    "BinevalInsecureKeyWarning",
    "BinevalJudgeError",
    "BinevalWarning",
    "BudgetReachedError",
    "CallError",
    "Check",
    "CheckError",
    "CheckResult",
    "CheckTimeout",
    "Checklist",
    "ChecklistGeneration",
    "ChecklistGenerationError",
    "ConfirmCost",
    "Conversation",
    "ConversationError",
    "DataFileError",
    "DimensionResult",
    "DimensionsArg",
    "Engine",
    "Evaluation",
    "EvaluationDiff",
    "EvaluationRecord",
    "GeneratedCheckWarning",
    "InputTooLargeError",
    "JudgedBy",
    "Location",
    "Merge",
    "Message",
    "MissingExtraError",
    "MissingSourceWarning",
    "NoTaskError",
    "OptimizeOutcome",
    "Options",
    "PinAction",
    "PinError",
    "Question",
    "QuestionChange",
    "QworldConfig",
    "QworldTree",
    "RecordRequest",
    "RegressionReport",
    "ReportDocument",
    "ReportSettings",
    "RunLedger",
    "ScoreChange",
    "Settings",
    "SourceChange",
    "SourceDocument",
    "Threshold",
    "ToolCall",
    "ToolCheckResult",
    "Totals",
    "TreeNode",
    "UnscoredTest",
    "UnstableQuestion",
    "Usage",
    "UsageError",
    "Verdict",
    "__version__",
    "aevaluate",
    "agenerate_checklist",
    "assert_passes",
    "assert_passes_async",
    "diff_reports",
    "diff_runs",
    "diff_sources",
    "ensure_provider",
    "evaluate",
    "extract_checks",
    "generate_checklist",
    "parse_dimensions",
    "points_score",
    "prompt_version",
    "register_provider",
    "render_html",
    "run_check",
    "run_sync",
    "write_html",
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
