"""A conversation judged by the real embedded model (SmolLM2-135M through llama.cpp, reached through litellm): a
3-turn support chat with a tool call, its per-turn and whole-conversation questions and its tool checks. Quality is
not asserted (a 135M judge is noise): that every assistant turn gets its verdicts, every judged one parses with
P(yes), the checks cost no request, the requests and cache hits are counted, and a failure names its turn."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import SUPPORT_CHAT, SUPPORT_CHECKLIST

from pytest_bineval import DEFAULT_MODEL, Checklist, Conversation, Engine, Settings
from pytest_bineval.assertions import failure_message
from pytest_bineval.report.record import Asked, EvaluationRecord

pytestmark = pytest.mark.local_model


def test_a_support_chat_with_a_tool_call_on_the_embedded_judge(tmp_path: Path) -> None:
    checklist = Checklist.model_validate(SUPPORT_CHECKLIST)
    engine = Engine(Settings(model=DEFAULT_MODEL, cache_dir=str(tmp_path / "cache")))
    try:
        ev = engine.evaluate(SUPPORT_CHAT, checklist)
        again = engine.evaluate(Conversation(SUPPORT_CHAT), checklist)
    finally:
        engine.close()
    judged = [v for v in ev.verdicts if v.decided_by == "judge"]
    coded = [v for v in ev.verdicts if v.decided_by == "code"]
    assert [(v.question_id, v.turn) for v in judged] == [
        ("helpfulness-2", None), ("helpfulness-1", 3), ("helpfulness-1", 5), ("helpfulness-1", 7),
        ("helpfulness-1", 9)]
    assert all(v.answer in ("yes", "no") and v.p_yes is not None for v in judged), [v.error for v in judged]
    assert [(v.question_id, v.turn, v.answer) for v in coded] == [
        ("tools-1", None, "yes"), ("tools-2", None, "yes"), ("helpfulness-3", 3, "yes"), ("helpfulness-3", 5, "no"),
        ("helpfulness-3", 7, "yes"), ("helpfulness-3", 9, "yes")]
    # the judge's requests only: one answer per judged verdict (a prefilled token), one explanation per "no"
    assert ev.usage.llm_calls == len(judged) + sum(v.answer == "no" for v in judged)
    assert ev.usage.failed_requests == 0 and ev.usage.prompt_tokens > 0
    assert (again.usage.llm_calls, again.usage.cache_hits) == (0, len(judged))
    assert [(v.answer, v.p_yes) for v in again.verdicts] == [(v.answer, v.p_yes) for v in ev.verdicts]

    record = EvaluationRecord.build(Asked(output=Conversation(SUPPORT_CHAT)), ev, checklist,
                                    thresholds={"helpfulness": 1.0, "tools": 1.0}, status="explicit", test="chat")
    assert record.outcome == "failed"
    failing_turns = [v.turn for v in record.failing() if v.turn is not None]
    assert record.first_failing_turn == min(failing_turns) <= 5
    message = failure_message(record)
    assert "  [helpfulness] turn 5 (assistant): Does the reply have at most 15 words?\n      -> no: 26 words; the " \
           "limit is 15" in message
    assert f"first step that went wrong: turn {record.first_failing_turn} (assistant)" in message
