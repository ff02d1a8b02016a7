"""Reading a model's reply: its text (a malformed provider response is an error, never a crash), the one
JSON object in it (an ambiguous reply is an error, never a guess), and P(yes) from OpenAI-style logprobs."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError


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
    no choices, no message or no text, ValueError when the text is longer than :data:`MAX_REPLY_CHARS`."""
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
    check_reply_size(content)
    return ReplyParts(content, get(choice, "logprobs"), None if finish is None else str(finish))


class _RepeatedKey(ValueError):
    """An object of the reply gives one key twice (``{"answer": "yes", "answer": "no"}``): which one counts is a
    guess (Python's decoder keeps the last, a streamed read the first), so the reply is ambiguous."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _RepeatedKey(key)
        obj[key] = value
    return obj


# strict=False: control characters (a raw newline) inside strings are taken, as some servers' JSON grammars
# let them through (llama.cpp's server does). A key given twice in one object is refused (_RepeatedKey).
_DECODER = json.JSONDecoder(strict=False, object_pairs_hook=_unique_keys)

# A reply longer than this is not read (an error verdict naming its size): every reply the plugin asks for is a
# few hundred tokens (the longest, a qworld-lite tree, is bounded at 1,800), so 100,000 characters leave a margin of
# more than ten, and reading a reply stays a matter of milliseconds inside the evaluation's deadline.
MAX_REPLY_CHARS = 100_000
# JSON nested deeper than this is not decoded (no reply the plugin asks for nests deeper than 5): a deeper candidate
# counts as no object, and Python's decoder never meets its recursion limit.
MAX_JSON_DEPTH = 100


def check_reply_size(text: str) -> None:
    """ValueError naming the size and the limit when ``text`` is longer than :data:`MAX_REPLY_CHARS`."""
    if len(text) > MAX_REPLY_CHARS:
        raise ValueError(f"the reply is {len(text):,} characters long, more than the limit of {MAX_REPLY_CHARS:,} "
                         f"characters a reply may have (MAX_REPLY_CHARS); it was not read")


# Lone surrogates cannot be written as UTF-8 (a report, a pinned checklist, the terminal): model text that holds
# one, raw or as a JSON escape (\udc80), has it replaced by U+FFFD where it enters, in the reply text.
_SURROGATE_CHAR = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u([dD][89a-fA-F][0-9a-fA-F]{2})")


def _escaped(text: str, at: int) -> bool:
    """Whether the backslash at ``at`` is itself escaped (an odd run of backslashes before it)."""
    k = at
    while k > 0 and text[k - 1] == "\\":
        k -= 1
    return (at - k) % 2 == 1


def clean_reply(text: str) -> tuple[str, int]:
    """``text`` with every lone surrogate replaced by U+FFFD, raw ones and JSON escapes of one (``\\udc80``, not
    part of a ``\\ud83d\\ude00`` pair) alike, and how many were replaced. Linear in the text."""
    text, count = _SURROGATE_CHAR.subn("\ufffd", text)
    matches = [m for m in _SURROGATE_ESCAPE.finditer(text) if not _escaped(text, m.start())]
    if not matches:
        return text, count
    out: list[str] = []
    last = 0
    i = 0
    while i < len(matches):
        m = matches[i]
        nxt = matches[i + 1] if i + 1 < len(matches) else None
        if (int(m.group(1), 16) < 0xDC00 and nxt is not None and nxt.start() == m.end()
                and int(nxt.group(1), 16) >= 0xDC00):
            i += 2  # a high and a low surrogate: one character, kept
            continue
        out += [text[last:m.start()], "\\ufffd"]
        last = m.end()
        count += 1
        i += 1
    out.append(text[last:])
    return "".join(out), count


_STRUCTURE = re.compile(r'[{}\[\]"]')


def _balanced_objects(text: str) -> list[tuple[int, int, int, int]]:
    """Every ``{...}`` span of ``text`` whose brackets balance as JSON would read them from its ``{``, as
    (start, end, quote parity, nesting depth inside), sorted by start; one pass over the text.

    A ``"`` not escaped by a backslash toggles "inside a string"; which brackets are inside a string depends on
    where decoding starts, but only through the parity of the quotes before it, so one bracket stack per parity
    finds, for every ``{``, the ``}`` a decoder starting there would end at (if it ends at all)."""
    stacks: tuple[list[list[Any]], list[list[Any]]] = ([], [])
    spans: list[tuple[int, int, int, int]] = []
    parity = 0
    for m in _STRUCTURE.finditer(text):
        i = m.start()
        c = text[i]
        if c == '"':
            if not _escaped(text, i):
                parity ^= 1
            continue
        stack = stacks[parity]
        if c in "{[":
            stack.append([i, c, 0])
            continue
        if not stack or stack[-1][1] != ("{" if c == "}" else "["):
            stack.clear()  # a closer that matches nothing: no open bracket before it starts a valid object
            continue
        start, opener, inner = stack.pop()
        if stack:
            stack[-1][2] = max(stack[-1][2], inner + 1)
        if opener == "{":
            spans.append((start, i, parity, inner))
    spans.sort()
    return spans


def _objects(text: str) -> tuple[list[tuple[dict[str, Any], int, int]], bool]:
    """Every JSON object found in ``text`` left to right (an object's inside is not rescanned), and whether a
    candidate was skipped for nesting deeper than :data:`MAX_JSON_DEPTH`. An object that gives a key twice raises
    ValueError (an ambiguous reply).

    Linear in the text: decoding is tried only where a ``{`` has a balanced ``}``, on that span alone; a failed try
    skips the candidates of its parity that start before the point where it failed (what it read), a decoded
    object every candidate inside it, and a span nested deeper than :data:`MAX_JSON_DEPTH` every candidate inside
    it, so a character is handed to at most :data:`MAX_JSON_DEPTH` tries per parity (one, in every reply seen)."""
    found: list[tuple[dict[str, Any], int, int]] = []
    resume = 0
    read_to = [-1, -1]
    too_deep = False
    for start, end, parity, inner in _balanced_objects(text):
        if start < resume or start <= read_to[parity]:
            continue
        if inner >= MAX_JSON_DEPTH:
            too_deep = True
            read_to[parity] = end
            continue
        try:  # the span alone: a decode error's line and column are counted from the start of what it was given
            obj, stop = _DECODER.raw_decode(text[start:end + 1])
        except json.JSONDecodeError as exc:
            read_to[parity] = start + exc.pos
            continue
        except _RepeatedKey as exc:
            raise ValueError(f"ambiguous reply: key {exc.key!r} given twice in one JSON object: {clip(text)!r}") \
                from None
        except RecursionError:
            too_deep = True
            read_to[parity] = end
            continue
        if start + stop != end + 1:  # the decoder stopped before the span's end: no object ends at this span's "}"
            read_to[parity] = start + stop
            continue
        if isinstance(obj, dict):
            found.append((obj, start, end + 1))
        resume = end + 1
    return found, too_deep


def _nested_keys(value: Any) -> set[str]:
    """Keys of every object nested inside ``value`` (not ``value``'s own top level)."""
    keys: set[str] = set()
    todo = list(value.values()) if isinstance(value, dict) else list(value) if isinstance(value, list) else []
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            keys.update(str(k) for k in item)
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return keys


_QUOTED = re.compile(r"""(?=["']([^"']*)["'])""")


def _quoted_outside(outside: str) -> set[str]:
    """What stands between each quote character of ``outside`` and the next one, case-folded: a key quoted as in
    JSON (``"answer"``, ``'answer'``) is one of these."""
    return {m.group(1).casefold() for m in _QUOTED.finditer(outside)}


def _quoted_in(key: str, quoted: set[str]) -> bool:
    """Whether ``key`` may stand quoted outside the object. A key holding quote characters is taken apart at
    them, and every part must be among the quoted pieces: a necessary condition (the check errs towards
    ambiguity, never towards a verdict)."""
    parts = re.split(r"""["']""", key.casefold())
    return all(part in quoted for part in parts)


def parse_json_object(text: str) -> dict[str, Any]:
    """The one JSON object of a model reply; ValueError when there is none or more than one.

    A reply that is one JSON object (what a provider-enforced JSON mode returns) is that object. Otherwise the
    reply may have prose or code fences around exactly one JSON object; it is ambiguous, and rejected, when it
    holds several objects, when a fragment outside the object carries one of its keys quoted (``"answer"`` in
    prose or in a broken object), when an object gives a key twice (``{"answer": "yes", "answer": "no"}``), or
    when an object nested inside it repeats one of its top-level keys
    (``{"answer": "no", "x": {"answer": "yes"}}``). A verdict quoted from the output under test can so never
    stand in for the judge's own. A reply longer than :data:`MAX_REPLY_CHARS` is refused unread; reading is
    linear in the reply's length.
    """
    check_reply_size(text)
    found, too_deep = _objects(text)
    if not found:
        deep = f" (JSON nested deeper than {MAX_JSON_DEPTH} levels is not read)" if too_deep else ""
        raise ValueError(f"no JSON object in reply{deep}: {clip(text)!r}")
    if len(found) > 1:
        raise ValueError(f"ambiguous reply: {len(found)} JSON objects where one was asked for: {clip(text)!r}")
    obj, start, end = found[0]
    keys = [str(k) for k in obj]
    repeated = sorted(set(keys) & _nested_keys(obj))
    if repeated:
        raise ValueError(f"ambiguous reply: key {repeated[0]!r} repeated inside the JSON object: {clip(text)!r}")
    outside = text[:start] + "\n" + text[end:]
    quoted = _quoted_outside(outside)
    for key in keys:
        if _quoted_in(key, quoted):
            raise ValueError(f"ambiguous reply: another {key!r} outside the JSON object: {clip(text)!r}")
    return obj


_KEY = re.compile(r'"answer"\s*:')
# A reply that has begun with its answer and what follows it: the object's end, or the next key whole.
_ANSWER_THEN = re.compile(r'\A\s*\{\s*"answer"\s*:\s*"\s*(?:yes|no)\s*[.!]?\s*"\s*(?:\}|,\s*"(?:[^"\\]|\\.)*"\s*:)',
                          re.IGNORECASE)


def answer_settled(text: str) -> bool:
    """Whether a streamed reply read so far has its answer and, after it, the end of the object or the whole name
    of the next key: what a reader that stops early must have seen, so that a second ``"answer"`` right after the
    first (``{"answer": "yes", "answer": "no"``) is read, and refused (:func:`check_answer_once`), in every explain
    mode. A few tokens more than the answer alone."""
    return _ANSWER_THEN.match(text) is not None


def check_answer_once(text: str) -> None:
    """ValueError (an ambiguous reply) when the start of a reply read so far (a stream closed after its answer)
    names the ``"answer"`` key more than once outside a string, escaped quotes aside: ``{"answer": "yes",
    "answer": "no"`` is as ambiguous cut short as whole (:func:`parse_json_object`), whichever answer a reader
    would take. Linear in the text."""
    keys = [m for m in _KEY.finditer(text) if not _escaped(text, m.start())]
    if len(keys) > 1:
        raise ValueError(f"ambiguous reply: key 'answer' given twice: {clip(text)!r}")


M = TypeVar("M", bound=BaseModel)


def reply_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema asked of the provider for replies of ``model``: pydantic's, without its titles and
    descriptions (the docstrings are for readers of the code, not tokens of every request), closed
    (``additionalProperties: false``). A structured reply is defined once, as a pydantic model: this schema and
    :func:`read_reply` (the validator) both come from it."""
    def closed(node: Any) -> Any:
        if not isinstance(node, dict):
            return [closed(v) for v in node] if isinstance(node, list) else node
        out = {k: ({name: closed(v) for name, v in node[k].items()} if k in ("properties", "$defs") else closed(v))
               for k, v in node.items() if k not in ("title", "description")}
        if out.get("type") == "object" and "properties" in out:
            out.setdefault("additionalProperties", False)
        return out

    schema: dict[str, Any] = closed(model.model_json_schema())
    return schema


def read_reply(model: type[M], obj: dict[str, Any]) -> M:
    """``obj`` (a reply's JSON object) as ``model``; ValueError naming the field and what is wrong with it
    otherwise (``"answer": Input should be 'yes' or 'no' (got 'maybe')``)."""
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        problems = []
        for e in exc.errors(include_url=False):
            field = ".".join(str(part) for part in e["loc"]) or "the reply"
            got = "" if "input" not in e or isinstance(e["input"], dict) else f" (got {clip(repr(e['input']), 80)})"
            problems.append(f'"{field}": {e["msg"].removeprefix("Value error, ")}{got}')
        raise ValueError("; ".join(problems)) from None


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
