"""Provider prompt caching over real HTTP (litellm -> 127.0.0.1): cache breakpoints reach a fake Anthropic Messages
endpoint, the cache-token fields of the replies (Anthropic's and OpenAI's) reach Usage and the cost, a cached token
of a model without a known cache price is unpriced (never $0), and a prefix below the caching minimum is noted."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_bineval import Checklist, Question, Settings
from pytest_bineval.engine import Engine
from pytest_bineval.llm._litellm import import_litellm
from pytest_bineval.llm.caching import cache_minimum, needs_breakpoints, with_breakpoint, with_breakpoints
from pytest_bineval.models import Usage
from pytest_bineval.outputs.terminal import summary_lines
from pytest_bineval.report.document import Totals
from pytest_bineval.testing.faults import FaultServer, Received, Reply, anthropic_message, completion

MODEL = "anthropic/claude-haiku-4-5"  # litellm knows its prices, cache reads and writes included
LONG_SOURCE = " ".join(f"Sentence {i} of the article says the bridge opened in 1932." for i in range(300))


def checklist(n: int) -> Checklist:
    return Checklist(task="Summarize the article.", dimensions={"consistency": "D"},
                     questions=[Question(id=f"consistency-{i}", dimension="consistency",
                                         text=f"Is check number {i} met?") for i in range(1, n + 1)])


def _user_blocks(req: Received) -> list[dict[str, Any]]:
    users = [m for m in req.body["messages"] if m["role"] == "user"]
    content = users[0]["content"]
    assert isinstance(content, list), content
    return content


@pytest.mark.parametrize("stream", ["auto", "off"])
def test_anthropic_breakpoints_sent_and_cache_tokens_priced(monkeypatch: pytest.MonkeyPatch, stream: str) -> None:
    """Streamed (the default), each "yes" is read from the first events and the stream closed: the prompt's tokens,
    cached ones included, are what Anthropic reported when the stream started; the completion's are estimated."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-real")

    def respond(req: Received, index: int) -> Reply:
        # the first question writes the prefix to the cache, the others read it
        write, read = (1500, 0) if index == 0 else (0, 1500)
        return Reply(200, anthropic_message('{"answer": "yes"}', model="claude-haiku-4-5", input_tokens=30,
                                            output_tokens=6, cache_read=read, cache_write=write))

    with FaultServer(respond, paths=("/v1/messages",)) as server:
        engine = Engine(Settings(model=MODEL, api_base=server.root_url, cache="off", concurrency=1, stream=stream))
        result = engine.evaluate("The bridge opened in 1932.", checklist(3), LONG_SOURCE)
        assert [v.answer for v in result.verdicts] == ["yes"] * 3
        assert server.requests == 3 and server.streamed == (3 if stream == "auto" else 0)
        for req, q in zip(server.received, checklist(3).questions, strict=True):
            blocks = _user_blocks(req)
            # two breakpoints: after the source (what every assertion about it shares), after the output (what
            # the assertion's questions share); the question after them
            assert blocks[0]["cache_control"] == blocks[1]["cache_control"] == {"type": "ephemeral"}
            assert LONG_SOURCE in blocks[0]["text"] and "The bridge opened in 1932." not in blocks[0]["text"]
            assert "The bridge opened in 1932." in blocks[1]["text"] and q.text not in blocks[1]["text"]
            assert q.text in blocks[2]["text"] and "cache_control" not in blocks[2]
        # the shared parts are the same text in every request: what the provider caches
        assert len({(_user_blocks(r)[0]["text"], _user_blocks(r)[1]["text"]) for r in server.received}) == 1
    u = result.usage
    assert (u.cached_prompt_tokens, u.cache_write_tokens, u.prompt_tokens) == (3000, 1500, 3 * 1530)
    # streamed: the completion's tokens are those of the text received before the stream was closed, estimated
    assert u.estimated_requests == (3 if stream == "auto" else 0)
    assert 0 < u.completion_tokens <= 3 * 6
    prices = import_litellm().model_cost["claude-haiku-4-5"]
    expected = (3 * 30 * prices["input_cost_per_token"] + 3000 * prices["cache_read_input_token_cost"]
                + 1500 * prices["cache_creation_input_token_cost"]
                + u.completion_tokens * prices["output_cost_per_token"])
    assert u.unpriced_requests == 0 and u.cost_usd == pytest.approx(expected)
    assert u.below_cache_minimum == {}  # ~1500 shared tokens: above the 1024-token minimum
    assert engine.usage.cached_prompt_tokens == 3000


def test_anthropic_short_prefix_noted_once_per_evaluation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-real")

    def respond(req: Received, index: int) -> Reply:
        return Reply(200, anthropic_message('{"answer": "yes"}', model="claude-haiku-4-5", input_tokens=400))

    with FaultServer(respond, paths=("/v1/messages",)) as server:
        engine = Engine(Settings(model=MODEL, api_base=server.root_url, cache="off"))
        first = engine.evaluate("The bridge opened.", checklist(3), "A short article.")
        engine.evaluate("The bridge closed.", checklist(3), "A short article.")
    assert first.usage.below_cache_minimum == {MODEL: 1}
    assert engine.usage.below_cache_minimum == {MODEL: 2}
    lines = [text for text, _ in summary_lines([], Totals.of([], engine.usage))]
    assert any(line.startswith(f"prompt caching: 2 evaluations judged by {MODEL} share a prompt prefix shorter "
                               "than the provider's minimum of 1024 tokens") for line in lines), lines


def _openai_cached(model: str) -> Any:
    """Replies of "no" with an explanation: a streamed one is read to its end, where OpenAI reports the usage."""
    def respond(req: Received, index: int) -> Reply:
        body = completion('{"answer": "no", "explanation": "The response does not."}', model=model)
        body["usage"] = {"prompt_tokens": 2000, "completion_tokens": 6, "total_tokens": 2006,
                         "prompt_tokens_details": {"cached_tokens": 1536}}
        return Reply(200, body)
    return respond


@pytest.mark.parametrize("stream", ["auto", "off"])
def test_openai_cached_tokens_read_and_priced_at_the_cache_price(stream: str) -> None:
    with FaultServer(_openai_cached("gpt-4o-mini")) as server:
        engine = Engine(Settings(model="openai/gpt-4o-mini", api_base=server.base_url, cache="off", stream=stream))
        result = engine.evaluate("x", checklist(2), LONG_SOURCE)
        assert server.requests == 2 and server.streamed == (2 if stream == "auto" else 0)
        # an OpenAI-compatible server needs no breakpoint: the messages go as plain text
        assert all(isinstance(m["content"], str) for r in server.received for m in r.body["messages"])
    u = result.usage
    assert (u.cached_prompt_tokens, u.cache_write_tokens, u.prompt_tokens) == (2 * 1536, 0, 4000)
    prices = import_litellm().model_cost["gpt-4o-mini"]
    expected = 2 * (464 * prices["input_cost_per_token"] + 1536 * prices["cache_read_input_token_cost"]
                    + 6 * prices["output_cost_per_token"])
    assert u.unpriced_requests == 0 and u.estimated_requests == 0 and u.cost_usd == pytest.approx(expected)
    tot = Totals.of([], u)
    assert "tokens: 4000 prompt (3072 cached) + 12 completion" in summary_lines([], tot)[-1][0]
    assert json.loads(tot.model_dump_json())["cached_prompt_tokens"] == 3072


def test_cached_tokens_without_a_known_cache_price_are_unpriced() -> None:
    with FaultServer(_openai_cached("gpt-3.5-turbo")) as server:  # litellm knows no cache price of it
        engine = Engine(Settings(model="openai/gpt-3.5-turbo", api_base=server.base_url, cache="off"))
        result = engine.evaluate("x", checklist(1), LONG_SOURCE)
    assert result.usage.cached_prompt_tokens == 1536
    assert (result.usage.cost_usd, result.usage.unpriced_requests) == (None, 1)


def test_which_providers_get_breakpoints_and_minimums() -> None:
    assert needs_breakpoints("anthropic/claude-sonnet-4-5")
    assert needs_breakpoints("bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0")
    assert needs_breakpoints("vertex_ai/claude-3-5-sonnet@20240620")
    assert not needs_breakpoints("bedrock/meta.llama3-70b") and not needs_breakpoints("vertex_ai/gemini-2.0-flash")
    assert not needs_breakpoints("openai/gpt-4o") and not needs_breakpoints("bineval/smollm2")
    assert cache_minimum("openai/gpt-4o", None) == 1024 and cache_minimum("anthropic/claude-x", "http://h") == 1024
    assert cache_minimum("openai/smollm2", "http://127.0.0.1:8080/v1") is None  # a server of one's own
    assert cache_minimum("bineval/smollm2", None) is None


def test_the_source_breakpoint_is_shared_by_assertions_about_one_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two outputs of one source: the first block (up to the end of the source) is the same text in both
    assertions' requests, so a suite judging many outputs of one input reads the source from the cache."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-real")
    with FaultServer(lambda req, i: Reply(200, anthropic_message('{"answer": "yes"}', model="claude-haiku-4-5")),
                     paths=("/v1/messages",)) as server:
        engine = Engine(Settings(model=MODEL, api_base=server.root_url, cache="off"))
        engine.evaluate("First summary.", checklist(2), LONG_SOURCE)
        engine.evaluate("Second summary.", checklist(2), LONG_SOURCE)
    firsts = {_user_blocks(r)[0]["text"] for r in server.received}
    seconds = {_user_blocks(r)[1]["text"] for r in server.received}
    assert len(firsts) == 1 and LONG_SOURCE in next(iter(firsts))
    assert len(seconds) == 2  # one per output


def test_with_breakpoints_split_at_each_point() -> None:
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "source|output|question"}]
    out = with_breakpoints(messages, ((1, 7), (1, 14)))
    assert out[1]["content"] == [{"type": "text", "text": "source|", "cache_control": {"type": "ephemeral"}},
                                 {"type": "text", "text": "output|", "cache_control": {"type": "ephemeral"}},
                                 {"type": "text", "text": "question"}]
    assert with_breakpoints(messages, ((1, 99), (7, 1))) is messages


def test_with_breakpoint_splits_only_text_in_range() -> None:
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "shared|question"}]
    out = with_breakpoint(messages, (1, 7))
    assert out[1]["content"] == [{"type": "text", "text": "shared|", "cache_control": {"type": "ephemeral"}},
                                 {"type": "text", "text": "question"}]
    assert messages[1]["content"] == "shared|question"  # the caller's messages are left alone
    assert with_breakpoint(messages, (5, 1)) is messages and with_breakpoint(messages, (1, 99)) is messages


def test_usage_adds_cache_fields() -> None:
    a = Usage(prompt_tokens=10, cached_prompt_tokens=4, cache_write_tokens=1, below_cache_minimum={"m": 1})
    b = Usage(prompt_tokens=5, cached_prompt_tokens=2, below_cache_minimum={"m": 1, "n": 1})
    total = a + b
    assert (total.cached_prompt_tokens, total.cache_write_tokens) == (6, 1)
    assert total.below_cache_minimum == {"m": 2, "n": 1}
    assert total.since(a).below_cache_minimum == {"m": 1, "n": 1}
