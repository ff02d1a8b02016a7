"""The streamed reply's reader: the answer of a reply that starts with it, chunks put back together, a stream that
carried no text, the per-model negotiation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from pytest_bineval.llm.streaming import (
    CLOSED,
    NoStream,
    StreamNegotiator,
    answer_so_far,
    estimate_tokens,
    read_stream,
    refuses_stream,
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
