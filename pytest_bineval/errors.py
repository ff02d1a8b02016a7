"""Exceptions raised by pytest-bineval: every one derives from :class:`BinevalError`.

The plugin reports a :class:`BinevalError` raised by a test as an *error* of the test (it could not be
scored), except :class:`BinevalAssertionError`, which is the verdict "below threshold" (a failure).
"""

from __future__ import annotations

from typing import Any


class BinevalError(Exception):
    """Base class of every error this package raises on purpose."""


class UsageError(BinevalError, ValueError):
    """A call or configuration that cannot work as given (unknown dimension, bad threshold, no task, ...)."""


class ArgumentTypeError(BinevalError, TypeError):
    """An argument of the wrong type (e.g. an output under test that is not a ``str``)."""


class NoTaskError(UsageError):
    """No task text anywhere for a test's checklist (argument, marker or ``bineval_task`` fixture)."""


class DataFileError(BinevalError, ValueError):
    """A data file (``bineval align`` / ``bineval bench`` records) that cannot be read as given; the message
    names the file, the line and the key."""


class MissingExtraError(BinevalError, ImportError):
    """An optional dependency (the embedded model's extra) is not installed."""


def install_hint(extra: str, *more: str) -> str:
    """How to install the optional extra ``extra`` as pytest-bineval is installed today (no release on PyPI: an
    editable install from a clone), then ``more`` (``pip install --no-deps ...`` of a package fetched apart)."""
    line = " && ".join([f'pip install -e ".[{extra}]"', *(f"pip install --no-deps {m}" for m in more)])
    return f"{line} (in a clone of pytest-bineval; docs/getting-started.md)"


class ChecklistGenerationError(BinevalError):
    """The checklist model could not produce usable questions."""


class InputTooLargeError(BinevalError, ValueError):
    """The output and source do not fit in the judge model's context window; ``usage``: what was spent
    finding out (the requests made)."""

    def __init__(self, message: str, usage: Any = None) -> None:  # usage: models.Usage
        super().__init__(message)
        self.usage = usage


class BudgetReachedError(BinevalError):
    """The run's budget (``--bineval-budget``) is spent: the evaluation (or checklist) was not made (see
    :mod:`pytest_bineval.budget`)."""


class PinError(BinevalError):
    """A pinned checklist file is unreadable or malformed, or (``--bineval-strict``) missing or stale."""


class CallError(BinevalError):
    """No usable model reply after the bounded retries; ``cause`` says why, ``usage`` what was spent."""

    def __init__(self, cause: str, usage: Any = None) -> None:  # usage: models.Usage (errors is a leaf module)
        super().__init__(cause)
        self.cause = cause
        self.usage = usage


class BinevalJudgeError(BinevalError):
    """The judge failed on at least one question: the test errors, it never passes silently."""

    def __init__(self, message: str, verdicts: list[Any] | None = None) -> None:  # verdicts: models.Verdict
        super().__init__(message)
        self.verdicts = verdicts or []


class BinevalAssertionError(BinevalError, AssertionError):
    """An output scored below its threshold; the message lists every failing question."""

    def __init__(self, message: str, evaluation: object | None = None) -> None:
        super().__init__(message)
        self.evaluation = evaluation
