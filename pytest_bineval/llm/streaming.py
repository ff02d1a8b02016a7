"""One request per question: the judge's reply streamed, the answer read from its first chunks.

A judge that cannot continue a prefill (any hosted model, an OpenAI-compatible server) is asked for
``{"answer": ..., "explanation": ...}``, the answer first, in one streamed reply. :func:`read_stream` reads the
chunks as they come and stops reading (closing the stream, so that the provider stops generating) as soon as
``until`` says the text so far is enough: under ``explain=failing``, a reply that has begun ``{"answer": "yes"``;
otherwise it reads to the end. The chunks are put back together as one OpenAI-shaped chat completion (content,
logprobs, finish reason, usage), so the reply goes through the same parsing and accounting as any other.

A stream closed early reports no usage: its tokens are estimated (the prompt's and the text's characters, about
four to a token, or litellm's tokenizer for a model it knows) and the request is counted as estimated. So is a
stream that ended without a usage chunk.

Whether a model streams is learned once (:class:`StreamNegotiator`): a server that answers a streamed request
with no usable chunk (a plain JSON body, an empty stream) or refuses the ``stream`` parameter gets the two-request
path from then on (an answer request, then an explanation request where one is wanted), said once in the summary.
A leaf module: it imports nothing heavy.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Literal

from .parsing import MAX_REPLY_CHARS, MalformedResponse, get

__all__ = ["CLOSED", "HEAD", "Head", "NoStream", "StreamError", "StreamNegotiator", "Streamed", "answer_so_far",
           "estimate_tokens", "read_stream", "refuses_stream", "sse_data"]

# The finish reason of a reply whose stream this client closed before the end (never a provider's).
CLOSED = "closed_by_client"

# A reply that has begun with its answer: a JSON object whose first key is "answer" and whose value is complete, as
# structured output writes it. Only that start counts: prose quoting a verdict ('The response claims {"answer":
# "yes"} but ...') or a code fence (a reply that may hold a second one) is read to the end and parsed whole, where
# an ambiguous reply is an error. What follows a complete first answer is not read when no explanation is wanted,
# as the prefill path reads one token.
_ANSWER_FIRST = re.compile(r'\A\s*\{\s*"answer"\s*:\s*"\s*(yes|no)\s*[.!]?\s*"', re.IGNORECASE)


def answer_so_far(text: str) -> Literal["yes", "no"] | None:
    """The answer of a reply that has begun ``{"answer": "yes"`` or ``{"answer": "no"`` (closing quote included),
    else None (not yet, or not a reply that starts with its answer)."""
    found = _ANSWER_FIRST.match(text)
    if found is None:
        return None
    return "yes" if found.group(1).lower() == "yes" else "no"


class NoStream(Exception):
    """The provider gave no usable stream for a streamed request (a plain body, no chunk with a choice);
    ``usage``: what the request(s) cost (set by the client)."""

    def __init__(self, message: str, usage: Any = None) -> None:
        super().__init__(message)
        self.usage = usage


_STREAM_MARKERS = ("stream",)


def refuses_stream(exc: BaseException) -> bool:
    """Whether a provider error says the ``stream`` parameter (or its options) is what it cannot take."""
    text = str(exc).lower()
    return any(marker in text for marker in _STREAM_MARKERS) and ("support" in text or "unrecognized" in text
                                                                   or "not allowed" in text or "invalid" in text)


def estimate_tokens(text: str) -> int:
    """About four characters to a token (what a tokenizer-less count can say; marked as an estimate)."""
    return max(1, (len(text) + 3) // 4) if text else 0


@dataclass
class Streamed:
    """A streamed reply put back together: an OpenAI-shaped chat completion (``response``), whether this client
    closed the stream before the end, and whether the provider reported the usage (else it is estimated)."""

    response: dict[str, Any]
    closed: bool
    reported_usage: bool
    chunks: int


# ``until`` sees the start of the reply only: its first HEAD characters, each run of whitespace squeezed to one space
# (an answer-first reply shows its answer within ~30 of them; a match of answer_so_far is the same on the squeezed
# text, since its pattern allows any run of whitespace wherever it allows one). So every chunk costs what it carries:
# reading is linear in the stream's size, however small its chunks (issue 33, item 2).
HEAD = 256
MAX_EVENT_BYTES = 1_000_000  # a server-sent event longer than this is no chunk of a reply (a malformed stream)
_YIELD_EVERY = 256  # chunks between two turns given to the event loop (a timeout can fire mid-stream)


class Head:
    """The start of a streamed text as ``until`` sees it (see :data:`HEAD`), fed piece by piece."""

    def __init__(self) -> None:
        self.text = ""
        self._space = False  # the text so far ends in (squeezed) whitespace

    @property
    def full(self) -> bool:
        return len(self.text) >= HEAD

    def feed(self, piece: str) -> bool:
        """Add ``piece`` (only what still fits); True when the head changed."""
        out: list[str] = []
        room = HEAD - len(self.text)
        for ch in piece:
            if room <= 0:
                break
            if ch.isspace():
                if self._space:
                    continue
                self._space = True
                out.append(" ")
            else:
                self._space = False
                out.append(ch)
            room -= 1
        if not out:
            return False
        self.text += "".join(out)
        return True


async def read_stream(chunks: AsyncIterator[Any], until: Callable[[str], bool]) -> Streamed:
    """Read ``chunks`` (OpenAI-style ``chat.completion.chunk`` objects or dicts) until the stream ends or ``until``
    accepts the start of the text so far (:class:`Head`); the caller closes the stream. :class:`NoStream` when no
    chunk carried text. Linear in the stream's size; no more text is read than the parser takes
    (:data:`~.parsing.MAX_REPLY_CHARS`: a longer reply is an error naming its size)."""
    text: list[str] = []
    size = 0
    head = Head()
    logprobs: list[Any] = []
    finish: str | None = None
    usage: Any = None
    model: Any = None
    seen_text = False  # a chunk whose delta has a content string ("" included): the reply was streamed
    closed = False
    count = 0
    async for chunk in chunks:
        count += 1
        if count % _YIELD_EVERY == 0:
            await asyncio.sleep(0)
        model = model or get(chunk, "model")
        u = get(chunk, "usage")
        if u is not None and (get(u, "prompt_tokens") or get(u, "completion_tokens")):
            usage = u
        choices = get(chunk, "choices")
        if not isinstance(choices, (list, tuple)) or not choices:
            continue
        choice = choices[0]
        delta = get(choice, "delta")
        piece = get(delta, "content") if delta is not None else None
        if isinstance(piece, str):
            seen_text = True
            text.append(piece)
            size += len(piece)
        entries = get(get(choice, "logprobs"), "content")
        if isinstance(entries, (list, tuple)):
            logprobs.extend(entries)
        finish = get(choice, "finish_reason") or finish
        if piece and finish is None and not head.full and head.feed(piece) and until(head.text):
            closed = True
            break
        if size > MAX_REPLY_CHARS:
            break  # the parser refuses a reply this long, naming its size: no need to read more of it
    if not seen_text:
        # what litellm makes of a server that answers a streamed request with a whole JSON body: a finish chunk
        # without any text (a real stream, even of an empty reply, carries a content string)
        raise NoStream(f"a streamed request got no text in {count} chunk(s): the server does not stream")
    content = "".join(text)
    response: dict[str, Any] = {
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": CLOSED if closed else finish,
                     "logprobs": {"content": logprobs} if logprobs else None}],
        "usage": usage,
    }
    return Streamed(response, closed=closed, reported_usage=usage is not None, chunks=count)


async def sse_data(blocks: AsyncIterator[bytes]) -> AsyncIterator[Any]:
    """The JSON payloads of a server-sent event stream (``data:`` fields; the ``[DONE]`` sentinel ends it), from its
    bytes as they arrive (cut anywhere). Linear in the stream's size. A payload that is no JSON, or an event longer
    than :data:`MAX_EVENT_BYTES`, raises :class:`~.parsing.MalformedResponse`; a payload with an ``error`` object
    raises :class:`StreamError`."""
    buffer = bytearray()
    scanned = 0  # the bytes of the buffer known to hold no line end
    data: list[bytes] = []
    pending = 0  # bytes of the event being read
    async for block in blocks:
        buffer += block
        start = 0
        while True:
            end = buffer.find(b"\n", max(start, scanned))
            if end < 0:
                break
            line = bytes(buffer[start:end]).rstrip(b"\r")
            start = end + 1
            if line.startswith(b"data:"):
                data.append(line[5:].lstrip(b" "))
                pending += len(line)
            elif not line and data:  # the end of an event
                payload = b"\n".join(data)
                data, pending = [], 0
                if payload == b"[DONE]":
                    return
                yield _event(payload)
        del buffer[:start]
        scanned = len(buffer)
        if pending + len(buffer) > MAX_EVENT_BYTES:
            raise MalformedResponse(f"malformed stream: an event longer than {MAX_EVENT_BYTES:,} bytes")
    last = bytes(buffer).rstrip(b"\r")  # a last line without its line end
    if last.startswith(b"data:"):
        data.append(last[5:].lstrip(b" "))
    if data and data != [b"[DONE]"]:  # a last event without its blank line
        yield _event(b"\n".join(data))


class StreamError(Exception):
    """The server reported an error inside a stream (an ``error`` object where a chunk was due)."""


def _event(payload: bytes) -> Any:
    try:
        value = json.loads(payload)
    except ValueError as exc:
        raise MalformedResponse(f"malformed stream: an event is not JSON ({exc})") from None
    error = value.get("error") if isinstance(value, dict) else None
    if error is not None:
        message = get(error, "message") if isinstance(error, dict) else error
        raise StreamError(f"the server reported an error in the stream: {message}")
    return value


class StreamNegotiator:
    """Per model: True (it streams), False (it does not: the two-request path), or unknown (not asked yet).
    Thread- and task-safe; the engine keeps one per session, beside the structured-output negotiation."""

    def __init__(self) -> None:
        self._known: dict[str, bool] = {}
        self._why: dict[str, str] = {}
        self._lock = threading.Lock()

    def streams(self, model: str) -> bool | None:
        with self._lock:
            return self._known.get(model)

    def learned(self, model: str, streams: bool, why: str = "") -> bool:
        """Record what a streamed request showed; True when this call changed what was known."""
        with self._lock:
            if model in self._known:
                return False
            self._known[model] = streams
            if not streams:
                self._why[model] = why
            return True

    def not_streaming(self) -> dict[str, str]:
        """Models that do not stream -> why."""
        with self._lock:
            return dict(self._why)
