"""A judge reply that gives its answer twice (``{"answer": "yes", "answer": "no", ...}``) is ambiguous in every
explain mode, over real HTTP to a scripted server that streams it: a stream closed early is read up to the key after
the answer, so the second "answer" is seen there too (the probe of issue 33 saw a pass under failing and none)."""

from __future__ import annotations

import pytest

from pytest_bineval import Checklist, Question, Settings
from pytest_bineval.engine import Engine
from pytest_bineval.kinds import ExplainMode
from pytest_bineval.testing.faults import FaultServer, Received, Reply, Stream, completion

MODEL = "openai/fault"
CHECKLIST = Checklist(task="Summarize.", dimensions={"consistency": "D"},
                      questions=[Question(id="consistency-1", dimension="consistency", text="Is it right?")])
TWICE = '{"answer": "yes", "answer": "no", "explanation": "It is."}'


def _whole(req: Received, index: int) -> Reply:
    return Reply(200, completion(TWICE))  # streamed one piece (word or mark) an event, as a real server would


def _one_chunk(req: Received, index: int) -> Stream:
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "fault",
             "choices": [{"index": 0, "delta": {"role": "assistant", "content": TWICE}, "finish_reason": None}]}
    end = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "fault",
           "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return Stream((chunk, end))


@pytest.mark.parametrize("explain", ["failing", "all", "none"])
@pytest.mark.parametrize("respond", [_whole, _one_chunk], ids=["piece-by-piece", "one-chunk"])
def test_an_answer_given_twice_is_an_error_in_every_explain_mode(explain: ExplainMode, respond: object) -> None:
    with FaultServer(respond) as server:  # type: ignore[arg-type]
        engine = Engine(Settings(model=MODEL, api_base=server.base_url, cache="off", retries=1, explain=explain))
        result = engine.evaluate("The bridge opened.", CHECKLIST, "The bridge opened in 1932.")
        engine.close()
    (verdict,) = result.verdicts
    assert verdict.answer == "error", verdict
    assert "ambiguous reply: key 'answer' given twice" in (verdict.error or "")
    assert server.streamed == server.requests == result.usage.llm_calls == 2  # asked and retried, both counted
