"""What a reply cost: its tokens (reported by the provider, else estimated), prompt-cache tokens, and its price.

The usage a provider reports is checked before it is counted (issue 33, item 3): a count that is negative, not a
whole number, or larger than any request can be (:data:`MAX_TOKENS`) makes the whole report *impossible*. Such a
reply is counted as one whose usage is unknown: its tokens are estimated (as for a stream closed after its answer)
and its cost is unknown; the client says so once per model (:class:`BinevalUsageWarning`). So a provider cannot
spend a token budget backwards or print 10**30 tokens.

Estimates: the prompt's and the reply's tokens by litellm's tokenizer for the model (counted once per distinct
message text: the judge's instructions and turns repeat in every question; in a process that never imported litellm,
tiktoken's cl100k_base, which litellm uses for a model it does not know), else about four characters to a token.
"""

from __future__ import annotations

import threading
from typing import Any

from ..models import Usage
from ._litellm import import_litellm, imported_litellm, litellm_knows, tiktoken_count
from .caching import Points, cache_minimum
from .parsing import get
from .streaming import estimate_tokens
from .transports import transport_for

__all__ = ["MAX_TOKENS", "BinevalUsageWarning", "TokenCounter", "cache_tokens", "impossible_usage", "reply_usage",
           "short_prefix"]

# More tokens than any request can take or give (the largest context windows are ~10**7 tokens).
MAX_TOKENS = 100_000_000
_COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens", "cache_read_input_tokens",
           "cache_creation_input_tokens", "input_tokens", "output_tokens")
_DETAIL_COUNTS = ("cached_tokens", "cache_creation_tokens")


class BinevalUsageWarning(UserWarning):
    """A provider reported impossible usage (negative, fractional or absurd token counts): counted as unknown."""


def _possible(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0 <= value <= MAX_TOKENS
    if isinstance(value, float):
        return value.is_integer() and 0 <= value <= MAX_TOKENS
    return False


def impossible_usage(u: Any) -> str | None:
    """The first impossible count of a reported usage (``"prompt_tokens=-20000000"``), or None when every count
    it has is a whole number from 0 to :data:`MAX_TOKENS` (absent counts are fine)."""
    if u is None:
        return None
    for where, names in ((u, _COUNTS), (get(u, "prompt_tokens_details"), _DETAIL_COUNTS)):
        if where is None:
            continue
        for name in names:
            value = get(where, name)
            if value is not None and not _possible(value):
                shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "..."
                return f"{name}={shown}"
    return None


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError, OverflowError):
        return 0


def cache_tokens(u: Any) -> tuple[int, int]:
    """(prompt tokens read from the provider's prompt cache, prompt tokens written to it) of a reply's usage:
    OpenAI's ``prompt_tokens_details.cached_tokens``, Anthropic's ``cache_read_input_tokens`` and
    ``cache_creation_input_tokens`` (litellm carries both forms; either one is read, never both added)."""
    if u is None:
        return 0, 0
    details = get(u, "prompt_tokens_details")
    read = _int(get(u, "cache_read_input_tokens")) or _int(get(details, "cached_tokens"))
    written = _int(get(u, "cache_creation_input_tokens")) or _int(get(details, "cache_creation_tokens"))
    return read, written


class TokenCounter:
    """Token estimates by litellm's tokenizer for a model, each distinct text counted once (a bounded memo), else
    about four characters to a token. Thread-safe; the engine keeps one per session (in its negotiation state)."""

    LIMIT = 512  # texts remembered

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def text(self, model: str, text: str) -> int:
        if not text:
            return 0
        key = (model, text)
        with self._lock:
            known = self._known.get(key)
        if known is not None:
            return known
        try:
            litellm = imported_litellm()
            count = (int(litellm.token_counter(model=model, text=text)) if litellm is not None
                     else tiktoken_count(text))  # (a process that never imported litellm judges a model it does
            # not know: litellm would count with this tokenizer)
        except Exception:
            count = estimate_tokens(text)
        with self._lock:
            if len(self._known) >= self.LIMIT:
                self._known.clear()
            self._known[key] = count
        return count

    def ready(self, model: str) -> None:
        """Load the tokenizer of ``model`` now (its first count loads it: a set-up, not a request's work)."""
        self.text(model, "ready")

    def messages(self, model: str, messages: list[dict[str, Any]]) -> int:
        """A chat prompt's tokens: each message's role and text, plus OpenAI's framing (3 tokens a message, 3 for
        the reply's start), as litellm's ``token_counter`` counts them."""
        return 3 + sum(3 + self.text(model, str(m.get("role") or "")) + self.text(model, str(m.get("content") or ""))
                       for m in messages)


def _estimated(response: dict[str, Any], model: str, messages: list[dict[str, Any]],
               counter: TokenCounter) -> dict[str, Any]:
    """``response`` (a streamed reply without a final usage report: closed after the answer, or a server that sends
    none; or a reply whose report was impossible, already removed) with its tokens estimated where the provider did
    not report them: the prompt's (Anthropic reports them, cached ones included, when the stream starts: those are
    kept) and the text received. A provider bills a stream closed early for about that."""
    early = response.get("usage")
    choices = get(response, "choices")
    first = choices[0] if isinstance(choices, (list, tuple)) and choices else None
    content = str(get(get(first, "message"), "content") or "")
    prompt = _int(get(early, "prompt_tokens")) or counter.messages(model, messages)
    completion = counter.text(model, content)
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion,
                             "total_tokens": prompt + completion}
    for name in ("prompt_tokens_details", "cache_read_input_tokens", "cache_creation_input_tokens"):
        if get(early, name) is not None:
            usage[name] = get(early, name)
    return {**response, "usage": usage}


def _usage_of(response: Any, model: str, priced: bool) -> Usage:
    """Tokens and cost of a response of ``model`` (requests are counted by the caller). Cost: litellm's price list
    for a model it knows, looked up quietly (cached tokens at its cache prices); None ("unknown") for any other
    model, for a transport's, for cached tokens of a model whose cache prices litellm does not know, and when not
    ``priced``."""
    u = get(response, "usage")
    read, written = cache_tokens(u)
    cost = _cost(response, read, written) if priced and transport_for(model) is None else None
    return Usage(
        prompt_tokens=_int(get(u, "prompt_tokens")) if u is not None else 0,
        cached_prompt_tokens=read,
        cache_write_tokens=written,
        completion_tokens=_int(get(u, "completion_tokens")) if u is not None else 0,
        cost_usd=cost,
        unpriced_requests=int(cost is None),
    )


def reply_usage(response: Any, model: str, messages: list[dict[str, Any]], *, estimate: bool,
                counter: TokenCounter) -> tuple[Usage, str | None, Any]:
    """(the tokens and cost of one reply, the impossible count of its reported usage or None, the reply with the
    usage counted). ``estimate``: the reply is a stream that reported no usage (its tokens are estimated,
    :attr:`Usage.estimated_requests`). A reply whose report is impossible is estimated too, and its cost is
    unknown."""
    problem = impossible_usage(get(response, "usage"))
    if problem is not None:
        response = {**_as_dict(response), "usage": None}
    if estimate or problem is not None:
        response = _estimated(_as_dict(response), model, messages, counter)
    usage = _usage_of(response, model, priced=problem is None)
    usage.estimated_requests += int(estimate or problem is not None)
    return usage, problem, response


def _as_dict(response: Any) -> dict[str, Any]:
    """A reply as the dict :mod:`.streaming` makes (litellm's response objects have ``model_dump``)."""
    if isinstance(response, dict):
        return response
    dump = getattr(response, "model_dump", None)
    value = dump() if callable(dump) else {}
    return value if isinstance(value, dict) else {}


def short_prefix(response: Any, model: str, api_base: str | None, messages: list[dict[str, str]],
                 points: Points) -> Usage:
    """``below_cache_minimum`` of one reply: its shared prefix (the reply's prompt tokens, in proportion to the
    prefix's share of the characters) is shorter than the provider's minimum for prompt caching."""
    minimum = cache_minimum(model, api_base)
    prompt_tokens = _int(get(get(response, "usage"), "prompt_tokens"))
    if minimum is None or not prompt_tokens:
        return Usage()
    lengths = [len(str(m.get("content") or "")) for m in messages]
    index, chars = points[-1]
    shared = sum(lengths[:index]) + chars
    if prompt_tokens * shared / max(1, sum(lengths)) >= minimum:
        return Usage()
    return Usage(below_cache_minimum={model: 1})


def _cost(response: Any, cache_read: int = 0, cache_write: int = 0) -> float | None:
    try:
        model = str(get(response, "model") or "")
        if isinstance(response, dict):  # a streamed reply put back together (:mod:`.streaming`), or the direct path's
            provider = response.get("provider")
        else:
            hidden = getattr(response, "_hidden_params", None) or {}
            provider = hidden.get("custom_llm_provider") if isinstance(hidden, dict) else None
        if not litellm_knows(model, f"{provider}/{model}"):
            return None  # (known without importing litellm)
        litellm = import_litellm()
        known = litellm.model_cost
        candidates = [c for c in (model, f"{provider}/{model}" if provider else model) if c in known]
        if not candidates:
            return None
        prices = known[candidates[0]]
        if (cache_read and prices.get("cache_read_input_token_cost") is None) or (
                cache_write and prices.get("cache_creation_input_token_cost") is None):
            return None  # cached tokens at a price litellm does not know: unpriced, never a guess
        if isinstance(response, dict):
            u = response.get("usage") or {}
            prompt_cost, completion_cost = litellm.cost_per_token(
                model=candidates[0], prompt_tokens=_int(get(u, "prompt_tokens")),
                completion_tokens=_int(get(u, "completion_tokens")), cache_read_input_tokens=cache_read,
                cache_creation_input_tokens=cache_write)
            return float(prompt_cost + completion_cost)
        return float(litellm.completion_cost(completion_response=response))
    except Exception:
        return None
