"""Exceptions and warnings of pytest-bineval: every exception derives from :class:`BinevalError`, every warning
from :class:`BinevalWarning` (``-W error::pytest_bineval.BinevalWarning`` turns them all into errors).

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


class CheckError(UsageError):
    """A check that is not in the catalogue, or whose parameters do not fit its kind."""


class ConversationError(UsageError):
    """A list of chat messages that is not a conversation the plugin can judge (the message and what is wrong)."""


class CheckTimeout(BinevalError):
    """A check that did not finish within its bound (a regular expression that backtracks catastrophically)."""


class GenerationCancelled(BinevalError):
    """The embedded model stopped a generation because its request was cancelled; the tokens it had used."""

    def __init__(self, prompt_tokens: int, completion_tokens: int) -> None:
        super().__init__(f"generation cancelled after {completion_tokens} token(s)")
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens


class ContextTooSmall(BinevalError):
    """A prompt and its reply do not fit in the embedded model's context window."""

    def __init__(self, prompt_tokens: int, max_tokens: int, n_ctx: int) -> None:
        super().__init__(
            f"prompt of {prompt_tokens} tokens + {max_tokens} reply tokens exceeds the embedded model's "
            f"context of {n_ctx} tokens"
        )


class DataNotFoundError(BinevalError, FileNotFoundError):
    """The benchmark data directory (or one of its files) is missing."""


# -- warnings ------------------------------------------------------------------------------------------------------
class BinevalWarning(UserWarning):
    """Base class of every warning this package gives (``-W error::pytest_bineval.BinevalWarning``,
    ``filterwarnings = ignore::pytest_bineval.BinevalWarning``)."""


class MissingSourceWarning(BinevalWarning):
    """An assertion was asked without ``source=`` while questions of its checklist are about the input."""


class GeneratedCheckWarning(BinevalWarning):
    """The checklist generator attached a check that is not a valid check of the catalogue (an unknown kind,
    parameters that do not fit it, a library of the extra ``checks`` not installed): its question stays a judge
    question."""


class BinevalCacheWarning(BinevalWarning):
    """The cache could not be used for an entry or at all; results were recomputed."""


class BinevalEncodingWarning(BinevalWarning):
    """Text sent to a model, or a model's reply, had characters that cannot be encoded (lone surrogates); they
    were replaced by U+FFFD."""


class BinevalInsecureKeyWarning(BinevalWarning):
    """An API key is sent over plain HTTP to a host that is not this machine."""
