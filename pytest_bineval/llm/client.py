"""Every model call goes through here, and from here through ``litellm.acompletion``.

Hosted models (``openai/...``, ``anthropic/...``, ``ollama/...``, any OpenAI-compatible ``api_base``), the
embedded model (``bineval/...``) and the scripted fakes of the test suite all take the same path:
cache lookup, structured-output request, tolerant JSON parsing, bounded retries, usage accounting.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ..errors import CallError, InputTooLargeError
from ..models import Usage
from ..prompting import prompt_version
from ._litellm import import_litellm
from .cache import ResponseCache, cache_key
from .providers import ensure_provider

T = TypeVar("T")

_TRANSIENT = (
    "RateLimitError",
    "APIConnectionError",
    "ServiceUnavailableError",
    "InternalServerError",
    "Timeout",
    "APIError",
)


@dataclass
class Reply(Generic[T]):
    value: T
    raw: str
    p_yes: float | None
    usage: Usage
    cached: bool


@dataclass
class ModelSettings:
    """Decoding and transport settings of one model (picklable; never holds a secret)."""

    model: str
    temperature: float = 0.0
    timeout: float = 120.0
    retries: int = 2
    api_base: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # Which repeat of a request this client makes (--bineval-repeats): part of the cache key when > 0, so that
    # each repeat gets its own reply and repeat 0 keeps the keys of a run that asks once. Never sent.
    repeat: int = 0


def parse_json_object(text: str) -> dict[str, Any]:
    """Tolerant parse of a JSON object from a model reply (code fences, prose around it)."""
    stripped = text.strip()
    fence = re.search(r"```(?:json)?\s*(.*?)```", stripped, re.DOTALL)
    if fence:
        stripped = fence.group(1).strip()
    try:
        obj = json.loads(stripped)
    except json.JSONDecodeError:
        start = stripped.find("{")
        if start < 0:
            raise ValueError(f"no JSON object in reply: {_clip(text)!r}") from None
        try:
            obj, _ = json.JSONDecoder().raw_decode(stripped[start:])
        except json.JSONDecodeError as exc:
            raise ValueError(f"invalid JSON in reply ({exc.msg}): {_clip(text)!r}") from None
    if not isinstance(obj, dict):
        raise ValueError(f"reply is JSON but not an object: {_clip(text)!r}")
    return obj


def _clip(text: str, n: int = 200) -> str:
    return text if len(text) <= n else text[:n] + "…"


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


_ANSWER_PREFIX = re.compile(r'"answer"\s*:\s*"\s*$')


def p_yes_from_logprobs(logprobs: Any) -> float | None:
    """P(yes) at the answer position of a ``{"answer": "yes"|"no", ...}`` reply, from OpenAI-style logprobs.

    Sums the probabilities of the top alternatives that read ``yes`` / ``no`` (any case, any
    leading space or quote) and normalises over the two. None when the provider gave no logprobs.
    """
    content = _get(logprobs, "content") if logprobs is not None else None
    if not content:
        return None
    text = ""
    for entry in content:
        if _ANSWER_PREFIX.search(text):
            mass = {"yes": 0.0, "no": 0.0}
            alternatives = _get(entry, "top_logprobs") or [entry]
            for alt in alternatives:
                word = str(_get(alt, "token") or "").strip().strip('"').lower()
                lp = _get(alt, "logprob")
                if lp is None:
                    continue
                for key in mass:
                    if word and key.startswith(word) and (len(word) >= 2 or key == "no" == word):
                        mass[key] += math.exp(float(lp))
                        break
            total = mass["yes"] + mass["no"]
            return None if total == 0 else mass["yes"] / total
        text += str(_get(entry, "token") or "")
    return None


def response_format(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


class LLMClient:
    """Asks one model for JSON replies, with cache, retries, timeouts and usage accounting."""

    def __init__(self, settings: ModelSettings, cache: ResponseCache | None) -> None:
        self.settings = settings
        self.cache = cache

    @property
    def model(self) -> str:
        return self.settings.model

    async def complete_json(
        self,
        messages: list[dict[str, str]],
        *,
        schema_name: str,
        schema: dict[str, Any],
        validate: Callable[[dict[str, Any]], T],
        max_tokens: int,
        want_p_yes: bool = False,
        sampling: dict[str, float] | None = None,
    ) -> Reply[T]:
        """One JSON reply validated by ``validate`` (which raises ValueError on a bad one).

        ``sampling``: extra OpenAI-style decoding parameters (e.g. ``presence_penalty``), part of the key.
        """
        ensure_provider(self.settings.model)
        s = self.settings
        request: dict[str, Any] = {
            "model": s.model,
            "messages": messages,
            "temperature": s.temperature,
            "max_tokens": max_tokens,
            "response_format": response_format(schema_name, schema),
            **(sampling or {}),
            **s.extra,
        }
        if s.api_base:
            request["api_base"] = s.api_base
        if want_p_yes:
            request["logprobs"] = True
            request["top_logprobs"] = 5
        key = cache_key({**request, "prompt_version": prompt_version(), **({"repeat": s.repeat} if s.repeat else {})})

        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                try:
                    value = validate(parse_json_object(str(hit["content"])))
                    p = hit.get("p_yes")
                    return Reply(value, str(hit["content"]), None if p is None else float(p),
                                 Usage(cache_hits=1, cost_usd=0.0), cached=True)
                except (ValueError, KeyError, TypeError):
                    pass  # an entry that no longer validates is recomputed

        usage = Usage()
        started = time.perf_counter()
        convo = list(messages)
        cause = "no attempt made"
        for attempt in range(s.retries + 1):
            try:
                response = await self._call({**request, "messages": convo})
            except InputTooLargeError:
                raise
            except Exception as exc:
                cause = f"{type(exc).__name__}: {_clip(str(exc), 300)}"
                if type(exc).__name__ not in _TRANSIENT and not isinstance(exc, asyncio.TimeoutError):
                    break
                await asyncio.sleep(min(0.5 * 2**attempt, 8.0) if attempt < s.retries else 0)
                continue
            usage = usage + _usage_of(response)
            content = str(_get(_get(response.choices[0], "message"), "content") or "")
            try:
                value = validate(parse_json_object(content))
            except (ValueError, TypeError, KeyError) as exc:
                cause = f"unparseable reply: {exc}"
                convo = [
                    *messages,
                    {"role": "assistant", "content": content},
                    {"role": "user", "content": f"That reply was not valid ({_clip(str(exc), 200)}). "
                     "Reply with only the JSON object, nothing else."},
                ]
                continue
            p_yes = p_yes_from_logprobs(_get(response.choices[0], "logprobs")) if want_p_yes else None
            usage.seconds = time.perf_counter() - started
            if self.cache is not None:
                self.cache.set(key, {"content": content, "p_yes": p_yes})
            return Reply(value, content, p_yes, usage, cached=False)
        usage.seconds = time.perf_counter() - started
        raise CallError(cause, usage)

    async def _call(self, request: dict[str, Any]) -> Any:
        litellm = import_litellm()
        timeout = self.settings.timeout
        try:
            return await asyncio.wait_for(
                litellm.acompletion(**request, timeout=timeout, drop_params=True, num_retries=0),
                timeout=timeout,
            )
        except litellm.ContextWindowExceededError as exc:
            raise InputTooLargeError(
                f"the prompt does not fit in the context window of {request['model']}: {_clip(str(exc), 400)}"
            ) from exc
        except asyncio.TimeoutError:
            raise asyncio.TimeoutError(f"no reply within {timeout:g} s") from None


def _usage_of(response: Any) -> Usage:
    u = _get(response, "usage")
    cost: float | None
    try:
        litellm = import_litellm()
        cost = float(litellm.completion_cost(completion_response=response))
    except Exception:
        cost = None
    return Usage(
        llm_calls=1,
        prompt_tokens=int(_get(u, "prompt_tokens") or 0) if u is not None else 0,
        completion_tokens=int(_get(u, "completion_tokens") or 0) if u is not None else 0,
        cost_usd=cost,
    )
