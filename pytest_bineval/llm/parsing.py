"""Reading a model's reply: its text (a malformed provider response is an error, never a crash), the one
JSON object in it (an ambiguous reply is an error, never a guess), and P(yes) from OpenAI-style logprobs."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Literal


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


# The answer step chooses between the yes and the no tokens (issue 11: no grammar, the choice a grammar would make),
# so when the token a judge chose at the answer position reads neither, its answer is the likelier of yes and no
# (the embedded 135M judge started "The ..." in 5 of 87 answers of the example project and the real-model tests,
# with yes and no holding 0.26-0.41 there; a floor of 0.5 made 3 of the example project's 5 tests errors). Only
# when yes and no together hold less than this share of the probability is the judge not answering the question at
# all (a refusal, another language): renormalising that mass would turn noise into a confident verdict, so it is an
# error verdict instead.
MIN_YES_NO_MASS = 0.1


class MalformedLogprobs(ValueError):
    """A logprobs entry without the fields of OpenAI's format (a token string, a numeric log-probability <= 0)."""


def _logprob(alt: Any) -> tuple[str, float]:
    """(token, logprob) of one OpenAI-style logprobs entry; :class:`MalformedLogprobs` when it has not that shape."""
    token, lp = get(alt, "token"), get(alt, "logprob")
    if not isinstance(token, str):
        raise MalformedLogprobs(f"malformed logprobs: an entry's token is {clip(repr(token), 80)}, not a string")
    if isinstance(lp, bool) or not isinstance(lp, (int, float)):
        raise MalformedLogprobs(f"malformed logprobs: the logprob of {clip(repr(token), 40)} is "
                                f"{clip(repr(lp), 80)}, not a number")
    if math.isnan(lp) or lp > 1e-6:  # a probability above 1 (rounding may give a tiny positive value)
        raise MalformedLogprobs(f"malformed logprobs: the logprob of {clip(repr(token), 40)} is {lp!r}")
    return token, min(float(lp), 0.0)


def reads_as(token: str) -> Literal["yes", "no"] | None:
    """Which answer a token reads as (any case, any leading space or quote; a prefix of two letters or more,
    or the whole word), None for any other token."""
    word = token.strip().strip('"').lower()
    for key in ("yes", "no"):
        if word and key.startswith(word) and (len(word) >= 2 or key == "no" == word):
            return key
    return None


def yes_no_mass(entry: Any) -> tuple[float, float]:
    """(P(yes), P(no)) at one generated position (an OpenAI-style logprobs entry): the summed probabilities of its
    top alternatives (the entry itself when it lists none) that read ``yes`` / ``no``. Raises
    :class:`MalformedLogprobs` when the entry or an alternative has not the fields of OpenAI's format."""
    if entry is None or isinstance(entry, (str, bytes, int, float)):
        raise MalformedLogprobs(f"malformed logprobs: the entry is {clip(repr(entry), 80)}")
    _logprob(entry)
    alternatives = get(entry, "top_logprobs")
    if alternatives is None or (isinstance(alternatives, (list, tuple)) and not alternatives):
        alternatives = [entry]
    if not isinstance(alternatives, (list, tuple)):
        raise MalformedLogprobs(f"malformed logprobs: top_logprobs is a {type(alternatives).__name__}, not a list")
    mass = {"yes": 0.0, "no": 0.0}
    for alt in alternatives:
        token, lp = _logprob(alt)
        key = reads_as(token)
        if key is not None:
            mass[key] += math.exp(lp)
    return mass["yes"], mass["no"]


def p_yes_at(entry: Any) -> float | None:
    """P(yes) at one generated position (an OpenAI-style logprobs entry): the probabilities of its top
    alternatives that read ``yes`` / ``no`` (any case, any leading space or quote), normalised over the two.
    None when no alternative reads either; :class:`MalformedLogprobs` when the entry is malformed."""
    yes, no = yes_no_mass(entry)
    total = yes + no
    return None if total == 0 else yes / total


def answer_at(token: str, entry: Any) -> tuple[Literal["yes", "no"], float | None]:
    """The answer and P(yes) of a judge whose answer is the one ``token`` it generated after a prefill, with that
    position's logprobs ``entry`` (None: the provider gave none).

    A token that reads yes or no is the answer (P(yes) from the alternatives, the likelier of the two when they
    disagree with the token's spelling alone). A token that reads neither is answered from the alternatives only
    when yes and no together hold at least :data:`MIN_YES_NO_MASS`. Raises ValueError (saying the judge answered
    neither yes nor no) otherwise, and :class:`MalformedLogprobs` for a malformed entry: never a guess."""
    chosen = reads_as(token)
    if entry is None:
        if chosen is None:
            raise ValueError(f"the judge answered neither yes nor no: its answer token is {clip(repr(token), 80)} "
                             "(and the provider gave no logprobs)")
        return chosen, None
    yes, no = yes_no_mass(entry)
    total = yes + no
    if chosen is not None and total == 0:  # alternatives that list neither yes nor no: the token's answer alone
        return chosen, None
    if total < MIN_YES_NO_MASS and chosen is None:
        raise ValueError(f"the judge answered neither yes nor no: its answer token is {clip(repr(token), 80)} and "
                         f"yes and no together have probability {total:.3f} there (below {MIN_YES_NO_MASS})")
    p_yes = yes / total
    return ("yes" if p_yes > 0.5 else "no"), p_yes
