"""Exceptions raised by pytest-bineval."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .models import Verdict


class BinevalError(Exception):
    """Base class of every error this package raises on purpose."""


class MissingExtraError(BinevalError, ImportError):
    """An optional dependency (the embedded model's extra) is not installed."""


class ChecklistGenerationError(BinevalError):
    """The checklist model could not produce usable questions."""


class InputTooLargeError(BinevalError, ValueError):
    """The output and source do not fit in the judge model's context window."""


class CacheError(BinevalError):
    """The cache directory cannot be used at all (reported as a warning, never raised to tests)."""


class BinevalJudgeError(BinevalError):
    """The judge failed on at least one question: the test errors, it never passes silently."""

    def __init__(self, message: str, verdicts: list[Verdict] | None = None) -> None:
        super().__init__(message)
        self.verdicts = verdicts or []


class BinevalAssertionError(AssertionError):
    """An output scored below its threshold; the message lists every failing question."""

    def __init__(self, message: str, evaluation: object | None = None) -> None:
        super().__init__(message)
        self.evaluation = evaluation
