"""The retry policy of model requests: what an error means, how long to wait, and when to stop.

- Every request waits at most ``timeout`` seconds; one question's requests, retries and waits included,
  end within ``timeout * (retries + 1) + 1`` seconds (its *budget*), and never past the deadline of the
  assertion that asked it (the same budget, counted from the start of the assertion).
- A transient error (rate limit, 5xx, connection reset, timeout, a malformed or unparseable reply) is
  retried up to ``retries`` times; anything else (401, 404, a bad request) is not: retrying cannot help.
- Between tries: the server's ``Retry-After`` (seconds or an HTTP date) when it gives one and it fits in
  ``timeout`` and in what is left of the budget (a longer one ends the retries at once, saying so);
  otherwise exponential backoff, ``base * 2**attempt`` capped at ``cap``, with jitter (50-100 % of it).
  No request is started with less than 1 s (or the timeout, when shorter) left before the deadline.
- A context-window overflow (litellm's ``ContextWindowExceededError``, or a 400/413 whose message says the
  context or maximum length was exceeded) is not a judge error but :class:`~pytest_bineval.errors.InputTooLargeError`.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal

from .negotiation import rejects_format
from .parsing import MalformedResponse

Kind = Literal["too_large", "format", "transient", "fatal"]
GRACE = 1.0  # seconds a budget adds to timeout * (retries + 1)
MIN_REQUEST = 1.0  # no request is started with less time than this (or the timeout) left before the deadline

_TRANSIENT = frozenset({
    "RateLimitError", "APIConnectionError", "ServiceUnavailableError", "InternalServerError", "BadGatewayError",
    "Timeout", "APITimeoutError", "APIError", "TimeoutError", "ConnectionError", "StreamError",
})
_FATAL = frozenset({
    "AuthenticationError", "PermissionDeniedError", "NotFoundError", "BadRequestError", "UnprocessableEntityError",
    "UnsupportedParamsError", "ContentPolicyViolationError", "BudgetExceededError", "InvalidRequestError",
})
_CONTEXT = re.compile(
    r"context[ _](?:window|length)|maximum context|max(?:imum)?[ _]tokens?.{0,40}exceed|too many tokens|"
    r"prompt is too long|input is too long|exceeds? the (?:model's )?context",
    re.IGNORECASE,
)
_CREDENTIALS = re.compile(r"missing credentials|api_key client option must be set", re.IGNORECASE)


def _names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _caused_by(exc: BaseException, name: str) -> bool:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 20:
        if name in _names(current):
            return True
        seen.append(current)
        current = current.__cause__ or current.__context__
    return False


def status_of(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None)
    return code if isinstance(code, int) else None


def classify(exc: BaseException) -> Kind:
    """What a failed request means for the next one."""
    names = _names(exc)
    status = status_of(exc)
    if _caused_by(exc, "CrossHostRedirect"):  # refused on purpose: asking again gets the same redirect
        return "fatal"
    if "ContextWindowExceededError" in names or (status in (400, 413) and _CONTEXT.search(str(exc))):
        return "too_large"
    if status in (400, 422, 500) and rejects_format(exc):
        return "format"
    if _CREDENTIALS.search(str(exc)):
        return "fatal"
    if isinstance(exc, (MalformedResponse, asyncio.TimeoutError)):
        return "transient"
    if names & _FATAL:
        return "fatal"
    if names & _TRANSIENT:
        return "transient"
    if status is not None and (status == 429 or status >= 500):
        return "transient"
    return "fatal"


def _headers(exc: BaseException) -> Any:
    for source in (getattr(exc, "litellm_response_headers", None),
                   getattr(getattr(exc, "response", None), "headers", None),
                   getattr(exc, "headers", None)):
        if source:
            return source
    return None


def retry_after(exc: BaseException, now: float | None = None) -> float | None:
    """Seconds the server asked to wait (``Retry-After``: seconds or an HTTP date; ``retry-after-ms``), or None."""
    headers = _headers(exc)
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        raw = headers.get("retry-after")
    except Exception:
        return None
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    if raw is None:
        return None
    return parse_retry_after(str(raw), now)


def parse_retry_after(value: str, now: float | None = None) -> float | None:
    """``"20"`` -> 20.0; ``"Wed, 21 Oct 2015 07:28:00 GMT"`` -> seconds from ``now`` (0 when past); else None."""
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if seconds == seconds else None  # NaN is not a delay
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    current = datetime.fromtimestamp(time.time() if now is None else now, timezone.utc)
    return max(0.0, (when - current).total_seconds())


@dataclass(frozen=True)
class RetryPolicy:
    """``retries`` after the first try, ``timeout`` seconds per request, backoff ``base * 2**n`` up to ``cap``."""

    retries: int
    timeout: float
    base: float = 0.5
    cap: float = 8.0

    @property
    def budget(self) -> float:
        """Seconds one question (and one assertion) may take, retries and waits included: ``timeout * (retries +
        1)`` plus :data:`GRACE` (which absorbs the overhead around the requests, so that the first request of a
        question that starts at once has its whole ``timeout``)."""
        return self.timeout * (self.retries + 1) + GRACE

    @property
    def min_request(self) -> float:
        """Seconds a request needs at least: with less left before the deadline, none is started."""
        return min(MIN_REQUEST, self.timeout)

    def backoff(self, attempt: int, rng: random.Random | None = None) -> float:
        """The wait after failed try number ``attempt`` (0-based): exponential, capped, 50-100 % jitter."""
        full = min(self.cap, self.base * 2 ** attempt)
        return float(full * (rng or random).uniform(0.5, 1.0))

    def wait(self, attempt: int, server_asks: float | None, remaining: float,
             rng: random.Random | None = None) -> tuple[float | None, str]:
        """(seconds to wait before the next try, or None to stop; why when stopping)."""
        if server_asks is not None:
            if server_asks > self.timeout:
                return None, (f"the server asked to retry after {server_asks:g} s, more than the timeout "
                              f"({self.timeout:g} s)")
            if server_asks + self.min_request > remaining:
                return None, (f"the server asked to retry after {server_asks:g} s, beyond this question's deadline "
                              f"({max(0.0, remaining):.1f} s left)")
            return server_asks, ""
        delay = self.backoff(attempt, rng)
        if delay + self.min_request > remaining:
            return None, f"no time left for another try within the deadline ({max(0.0, remaining):.1f} s left)"
        return delay, ""
