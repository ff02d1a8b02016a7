"""The streamed reply's reader: the answer of a reply that starts with it, chunks put back together, a stream that
carried no text, the per-model negotiation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from pytest_bineval.llm.parsing import MAX_REPLY_CHARS, MalformedResponse
from pytest_bineval.llm.streaming import (
    CLOSED,
    HEAD,
    MAX_EVENT_BYTES,
    Head,
    NoStream,
    StreamError,
    StreamNegotiator,
    answer_so_far,
    estimate_tokens,
    read_stream,
    refuses_stream,
    sse_data,
)


@pytest.mark.parametrize(("text", "answer"), [
    ('{"answer": "yes"', "yes"), ('  {"answer":"No"', "no"), ('{"answer": "yes.", "expl', "yes"),
    ('{"answer": "ye', None), ('{"answer": "', None), ('```json\n{"answer": "yes"', None),
    ('The response claims {"answer": "yes"}', None), ('{"explanation": "x", "answer": "yes"', None),
    ('{"answer": "maybe"', None),
])
def test_answer_so_far_only_from_a_reply_that_starts_with_it(text: str, answer: str | None) -> None:
    assert answer_so_far(text) == answer


def _chunks(*pieces: Any, usage: dict[str, int] | None = None) -> AsyncIterator[Any]:
    async def gen() -> AsyncIterator[Any]:
        for p in pieces:
            yield {"model": "m", "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]}
        yield {"model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        if usage:
            yield {"model": "m", "choices": [], "usage": usage}
    return gen()


def test_read_to_the_end_with_the_usage() -> None:
    got = asyncio.run(read_stream(_chunks('{"answer": ', '"no", "explanation": "x"}',
                                          usage={"prompt_tokens": 9, "completion_tokens": 4}), lambda t: False))
    assert got.response["choices"][0]["message"]["content"] == '{"answer": "no", "explanation": "x"}'
    assert got.response["choices"][0]["finish_reason"] == "stop"
    assert got.reported_usage and not got.closed and got.response["usage"]["prompt_tokens"] == 9


def test_closed_when_until_accepts() -> None:
    got = asyncio.run(read_stream(_chunks('{"answer": ', '"yes"', ', "explanation": "never read"}'),
                                  lambda t: answer_so_far(t) == "yes"))
    assert got.closed and got.response["choices"][0]["finish_reason"] == CLOSED
    assert got.response["choices"][0]["message"]["content"] == '{"answer": "yes"'
    assert not got.reported_usage and got.chunks == 2


def test_a_stream_without_text_is_no_stream() -> None:
    async def whole() -> AsyncIterator[Any]:  # what litellm makes of a plain JSON body
        yield {"choices": [{"index": 0, "delta": {"content": None}, "finish_reason": "stop"}]}
        yield {"choices": []}
    with pytest.raises(NoStream, match="the server does not stream"):
        asyncio.run(read_stream(whole(), lambda t: False))


def test_an_empty_streamed_reply_is_a_reply() -> None:
    got = asyncio.run(read_stream(_chunks(""), lambda t: False))
    assert got.response["choices"][0]["message"]["content"] == ""  # the parser calls it an empty reply


def test_refuses_stream() -> None:
    assert refuses_stream(Exception("stream: streaming is not supported"))
    assert refuses_stream(Exception("Unrecognized request argument supplied: stream_options"))
    assert not refuses_stream(Exception("Stream ended before a finish_reason was received"))
    assert not refuses_stream(Exception("temperature: invalid"))


def test_negotiator_learns_once() -> None:
    n = StreamNegotiator()
    assert n.streams("m") is None
    assert n.learned("m", False, "no text") and not n.learned("m", True)
    assert n.streams("m") is False and n.not_streaming() == {"m": "no text"}
    assert n.learned("k", True) and n.not_streaming() == {"m": "no text"}


def test_estimate_tokens() -> None:
    assert (estimate_tokens(""), estimate_tokens("abc"), estimate_tokens("a" * 40)) == (0, 1, 10)


# -- linear reading (issue 33, item 2) ------------------------------------------------------------------------------

def _spaces_then_answer(n: int) -> AsyncIterator[Any]:
    """``n`` one-space chunks, then a complete answer: the shape that cost quadratic CPU."""
    return _chunks(*([" "] * n), '{"answer": "yes", "explanation": "x"}')


def _work(n: int) -> tuple[int, int]:
    """(characters the predicate was given in all, calls) to read a stream of ``n`` one-space chunks."""
    seen = [0, 0]

    def until(text: str) -> bool:
        seen[0] += len(text)
        seen[1] += 1
        return False

    got = asyncio.run(read_stream(_spaces_then_answer(n), until))
    assert got.chunks == n + 2 and got.response["choices"][0]["message"]["content"].endswith('"x"}')
    return seen[0], seen[1]


def test_reading_a_stream_of_tiny_chunks_is_linear() -> None:
    """Doubling the chunks does not more than double the work (counted in characters examined, not in seconds):
    the predicate sees the start of the reply, whitespace runs squeezed, never the whole text again and again."""
    small, large = _work(5_000), _work(10_000)
    assert large[0] <= 2 * small[0] + HEAD and large[1] <= 2 * small[1] + 1
    assert large[0] <= HEAD * 3  # a run of spaces is one space to the predicate: the work does not grow at all


def test_the_head_squeezes_whitespace_and_keeps_the_answer() -> None:
    head = Head()
    for piece in ["\n", "  ", "{", "\n\n", '"answer"', " :  ", '"yes"']:
        head.feed(piece)
    assert head.text == ' { "answer" : "yes"' and answer_so_far(head.text) == "yes"
    head.feed("x" * (2 * HEAD))
    assert len(head.text) == HEAD and head.full and not head.feed("more")


def test_a_stream_answering_after_many_spaces_is_still_closed_at_its_answer() -> None:
    got = asyncio.run(read_stream(_chunks(*([" "] * 3000), '{"answer": ', '"yes"', ', "explanation": "never"}'),
                                  lambda t: answer_so_far(t) == "yes"))
    assert got.closed and got.response["choices"][0]["message"]["content"].endswith('"yes"')


def test_no_more_is_read_than_the_parser_takes() -> None:
    got = asyncio.run(read_stream(_chunks(*(["x" * 1000] * 500)), lambda t: False))
    assert MAX_REPLY_CHARS < len(got.response["choices"][0]["message"]["content"]) <= MAX_REPLY_CHARS + 1000
    assert got.chunks < 200


# -- server-sent events --------------------------------------------------------------------------------------------

async def _blocks(data: bytes, size: int) -> AsyncIterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i:i + size]


def _events(data: bytes, size: int) -> list[Any]:
    async def collect() -> list[Any]:
        return [e async for e in sse_data(_blocks(data, size))]
    return asyncio.run(collect())


@pytest.mark.parametrize("size", [1, 3, 7, 4096])
def test_sse_events_cut_anywhere(size: int) -> None:
    stream = (b': a comment\r\n\r\ndata: {"a": 1}\r\n\r\nevent: chunk\ndata: {"b":\ndata: 2}\n\n'
              b'data: {"c": 3}\n\ndata: [DONE]\n\ndata: {"after": "done"}\n\n')
    assert _events(stream, size) == [{"a": 1}, {"b": 2}, {"c": 3}]


def test_sse_last_event_without_blank_line_and_errors() -> None:
    assert _events(b'data: {"a": 1}\n\ndata: {"b": 2}', 5) == [{"a": 1}, {"b": 2}]
    with pytest.raises(MalformedResponse, match="not JSON"):
        _events(b"data: {nope\n\n", 4)
    with pytest.raises(StreamError, match="overloaded"):
        _events(b'data: {"error": {"message": "overloaded"}}\n\n', 4)
    with pytest.raises(MalformedResponse, match="longer than"):
        _events(b"data: " + b"x" * (MAX_EVENT_BYTES + 10), 65536)


def test_sse_one_long_event_in_tiny_blocks() -> None:
    """One long event arriving a few bytes at a time is read whole (the reader remembers how far it has looked for
    a line end, so each block is scanned once)."""
    payload = b'data: {"x": "' + b"y" * 20_000 + b'"}\n\n'
    assert _events(payload, 3) == [{"x": "y" * 20_000}]
