"""Reading a model's reply: its text (a malformed provider response is an error, never a crash), the one
JSON object in it (an ambiguous reply is an error, never a guess), and P(yes) from OpenAI-style logprobs."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any


class MalformedResponse(ValueError):
    """The provider's response has not the shape of a chat completion (no choices, no message, no content)."""


@dataclass(frozen=True)
class ReplyParts:
    content: str
    logprobs: Any
    finish_reason: str | None


def clip(text: str, n: int = 200) -> str:
    return text if len(text) <= n else text[:n] + "…"


def get(obj: Any, name: str) -> Any:
    """``obj[name]`` or ``obj.name`` (litellm gives objects, raw JSON gives dicts), None when absent."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def reply_parts(response: Any) -> ReplyParts:
    """The first choice's text, logprobs and finish reason; :class:`MalformedResponse` when the response has
    no choices, no message or no text."""
    choices = get(response, "choices")
    if not isinstance(choices, (list, tuple)) or not choices:
        raise MalformedResponse("malformed provider response: no choices")
    choice = choices[0]
    finish = get(choice, "finish_reason")
    message = get(choice, "message")
    if message is None:
        raise MalformedResponse("malformed provider response: the choice has no message")
    content = get(message, "content")
    if isinstance(content, list):  # content parts: keep the text ones
        content = "".join(str(get(part, "text") or "") for part in content)
    if content is None:
        raise MalformedResponse(f"malformed provider response: null content (finish_reason={finish!r})")
    if not isinstance(content, str):
        raise MalformedResponse(f"malformed provider response: content is a {type(content).__name__}")
    if not content.strip():
        raise MalformedResponse(f"empty reply (finish_reason={finish!r})")
    return ReplyParts(content, get(choice, "logprobs"), None if finish is None else str(finish))


# strict=False: control characters (a raw newline) inside strings are taken, as some servers' JSON grammars
# let them through (llama.cpp's server does).
_DECODER = json.JSONDecoder(strict=False)


def _objects(text: str) -> list[tuple[dict[str, Any], int, int]]:
    """Every JSON object found by scanning ``text`` left to right (an object's inside is not rescanned)."""
    found: list[tuple[dict[str, Any], int, int]] = []
    i = 0
    while True:
        start = text.find("{", i)
        if start < 0:
            return found
        try:
            obj, end = _DECODER.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):
            i = start + 1
            continue
        if isinstance(obj, dict):
            found.append((obj, start, end))
        i = max(end, start + 1)


def _nested_keys(value: Any, depth: int = 0) -> set[str]:
    """Keys of every object nested inside ``value`` (not ``value``'s own top level)."""
    keys: set[str] = set()
    if isinstance(value, dict):
        for k, v in value.items():
            if depth > 0:
                keys.add(str(k))
            keys |= _nested_keys(v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            keys |= _nested_keys(v, depth + 1 if depth else 1)
    return keys


def _key_pattern(key: str) -> re.Pattern[str]:
    """The key quoted, as in JSON (with or without its colon: a reply cut after ``{"answer"`` is a fragment too)."""
    return re.compile(r"""["']""" + re.escape(key) + r"""["']""", re.IGNORECASE)


def parse_json_object(text: str) -> dict[str, Any]:
    """The one JSON object of a model reply; ValueError when there is none or more than one.

    A reply that is one JSON object (what a provider-enforced JSON mode returns) is that object. Otherwise the
    reply may have prose or code fences around exactly one JSON object; it is ambiguous, and rejected, when it
    holds several objects, when a fragment outside the object carries one of its keys quoted (``"answer"`` in
    prose or in a broken object), or when an object nested inside it repeats one of its top-level keys
    (``{"answer": "no", "x": {"answer": "yes"}}``). A verdict quoted from the output under test can so never
    stand in for the judge's own.
    """
    stripped = text.strip()
    try:
        whole = _DECODER.decode(stripped)
    except (ValueError, RecursionError):
        whole = None
    if isinstance(whole, dict):
        obj, outside = whole, ""
    else:
        found = _objects(text)
        if not found:
            raise ValueError(f"no JSON object in reply: {clip(text)!r}")
        if len(found) > 1:
            raise ValueError(f"ambiguous reply: {len(found)} JSON objects where one was asked for: {clip(text)!r}")
        obj, start, end = found[0]
        outside = text[:start] + "\n" + text[end:]
    keys = [str(k) for k in obj]
    repeated = sorted(set(keys) & _nested_keys(obj))
    if repeated:
        raise ValueError(f"ambiguous reply: key {repeated[0]!r} repeated inside the JSON object: {clip(text)!r}")
    for key in keys:
        if _key_pattern(key).search(outside):
            raise ValueError(f"ambiguous reply: another {key!r} outside the JSON object: {clip(text)!r}")
    return obj


_ANSWER_PREFIX = re.compile(r'"answer"\s*:\s*"\s*$')


def p_yes_from_logprobs(logprobs: Any) -> float | None:
    """P(yes) at the answer position of a ``{"answer": "yes"|"no", ...}`` reply, from OpenAI-style logprobs.

    Sums the probabilities of the top alternatives that read ``yes`` / ``no`` (any case, any
    leading space or quote) and normalises over the two. None when the provider gave no logprobs.
    """
    content = get(logprobs, "content") if logprobs is not None else None
    if not content:
        return None
    text = ""
    for entry in content:
        if _ANSWER_PREFIX.search(text):
            return p_yes_at(entry)
        text += str(get(entry, "token") or "")
    return None


def p_yes_at(entry: Any) -> float | None:
    """P(yes) at one generated position (an OpenAI-style logprobs entry): the probabilities of its top
    alternatives that read ``yes`` / ``no`` (any case, any leading space or quote), normalised over the two.
    None when no alternative reads either."""
    mass = {"yes": 0.0, "no": 0.0}
    alternatives = get(entry, "top_logprobs") or [entry]
    for alt in alternatives:
        word = str(get(alt, "token") or "").strip().strip('"').lower()
        lp = get(alt, "logprob")
        if lp is None:
            continue
        for key in mass:
            if word and key.startswith(word) and (len(word) >= 2 or key == "no" == word):
                mass[key] += math.exp(float(lp))
                break
    total = mass["yes"] + mass["no"]
    return None if total == 0 else mass["yes"] / total
