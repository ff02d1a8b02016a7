"""Usage a provider reports is checked before it is counted (issue 33, item 3): negative, fractional and absurd
token counts are impossible; such a reply's tokens are estimated and its cost is unknown; a report or shard that
carries impossible counts is refused when it is read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from pytest_bineval.errors import UsageError
from pytest_bineval.llm.accounting import MAX_TOKENS, TokenCounter, impossible_usage, reply_usage
from pytest_bineval.models import MAX_COUNT, Usage
from pytest_bineval.report.document import REPORT_KIND, ReportDocument, Totals


def reply(usage: Any, content: str = '{"answer": "yes"}') -> dict[str, Any]:
    return {"model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                       "finish_reason": "stop"}], "usage": usage}


MESSAGES = [{"role": "system", "content": "You judge."}, {"role": "user", "content": "Is the sky blue? " * 20}]


@pytest.mark.parametrize(("usage", "problem"), [
    ({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}, None),
    ({"prompt_tokens": 10.0, "completion_tokens": 5}, None),  # a whole number written as a float
    ({"prompt_tokens": 10}, None),  # absent counts are fine
    (None, None),
    ({"prompt_tokens": -20_000_000, "completion_tokens": 5}, "prompt_tokens=-20000000"),
    ({"prompt_tokens": 10, "completion_tokens": 2.5}, "completion_tokens=2.5"),
    ({"prompt_tokens": 10**30, "completion_tokens": 5}, f"prompt_tokens={10**30}"),
    ({"prompt_tokens": MAX_TOKENS + 1}, f"prompt_tokens={MAX_TOKENS + 1}"),
    ({"prompt_tokens": "12"}, "prompt_tokens='12'"),
    ({"prompt_tokens": True}, "prompt_tokens=True"),
    ({"prompt_tokens": float("nan")}, "prompt_tokens=nan"),
    ({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": -3}}, "cached_tokens=-3"),
    ({"input_tokens": -1, "cache_read_input_tokens": 5}, "input_tokens=-1"),  # Anthropic's names
])
def test_impossible_usage(usage: Any, problem: str | None) -> None:
    assert impossible_usage(usage) == problem


@pytest.mark.parametrize("bad", [
    {"prompt_tokens": -20_000_000, "completion_tokens": 5},
    {"prompt_tokens": 10**30, "completion_tokens": 10**30},
    {"prompt_tokens": 7, "completion_tokens": 0.5},
])
def test_an_impossible_report_is_counted_as_unknown(bad: dict[str, Any]) -> None:
    usage, problem, counted = reply_usage(reply(bad), "openai/gpt-4o-mini", MESSAGES, estimate=False,
                                          counter=TokenCounter())
    assert problem is not None
    assert 0 < usage.prompt_tokens < 1000 and 0 < usage.completion_tokens < 100  # estimated from the texts
    assert usage.estimated_requests == 1 and usage.cost_usd is None and usage.unpriced_requests == 1
    assert counted["usage"]["prompt_tokens"] == usage.prompt_tokens


def test_a_possible_report_is_counted_as_reported() -> None:
    usage, problem, _ = reply_usage(reply({"prompt_tokens": 120, "completion_tokens": 7}), "openai/unknown-model",
                                    MESSAGES, estimate=False, counter=TokenCounter())
    assert problem is None and (usage.prompt_tokens, usage.completion_tokens) == (120, 7)
    assert usage.estimated_requests == 0 and usage.cost_usd is None  # a model litellm does not price


def test_an_impossible_early_report_of_a_stream_is_not_used() -> None:
    """Anthropic's message_start, held by litellm: a negative prompt count there is estimated instead."""
    usage, problem, _ = reply_usage(reply({"prompt_tokens": -5, "cache_read_input_tokens": 3}), "anthropic/x",
                                    MESSAGES, estimate=True, counter=TokenCounter())
    assert problem == "prompt_tokens=-5" and usage.prompt_tokens > 0 and usage.estimated_requests == 1


def test_token_counter_counts_each_text_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_bineval.llm.accounting as accounting

    calls: list[str] = []

    class Fake:
        @staticmethod
        def token_counter(model: str, text: str) -> int:
            calls.append(text)
            return len(text) // 4

    monkeypatch.setattr(accounting, "imported_litellm", lambda: Fake)
    counter = TokenCounter()
    first = counter.messages("m", MESSAGES)
    second = counter.messages("m", MESSAGES)
    assert first == second > 0 and len(calls) == 4  # two roles and two texts, once each


def test_without_litellm_the_tokens_are_counted_as_litellm_counts_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that never imported litellm (the direct path) counts with the tokenizer litellm uses for a model it
    does not know."""
    import pytest_bineval.llm.accounting as accounting
    from pytest_bineval.llm._litellm import import_litellm

    text = "The council approved a new library, to open by 2027. " * 7
    expected = import_litellm().token_counter(model="openai/not-a-known-model", text=text)
    monkeypatch.setattr(accounting, "imported_litellm", lambda: None)
    assert TokenCounter().text("openai/not-a-known-model", text) == expected


@pytest.mark.parametrize("field", ["prompt_tokens", "llm_calls", "completion_tokens", "estimated_requests"])
def test_usage_refuses_impossible_counts(field: str) -> None:
    with pytest.raises(ValidationError):
        Usage(**{field: -1})
    with pytest.raises(ValidationError):
        Usage(**{field: MAX_COUNT + 1})
    with pytest.raises(ValidationError):
        Usage(**{field: 2.5})
    assert getattr(Usage(**{field: 3}), field) == 3
    with pytest.raises(ValidationError):
        Usage(cost_usd=-0.01)
    with pytest.raises(ValidationError):
        Usage(below_cache_minimum={"m": -1})


def test_totals_refuse_impossible_counts() -> None:
    with pytest.raises(ValidationError, match="prompt_tokens is -20000000"):
        Totals(prompt_tokens=-20_000_000)
    with pytest.raises(ValidationError, match="cost is never negative"):
        Totals(cost_usd=-1.0)
    assert Totals(prompt_tokens=5).prompt_tokens == 5


def _report(totals: dict[str, Any], usage: dict[str, Any]) -> dict[str, Any]:
    record = {"test": "t.py::test_a", "index": 0, "task": "T", "model": "m", "checklist_status": "pinned",
              "outcome": "passed", "overall": 1.0, "usage": usage,
              "dimensions": [{"name": "fluency", "score": 1.0, "threshold": 0.5, "outcome": "passed"}],
              "verdicts": [{"question_id": "fluency-1", "dimension": "fluency", "question": "Fluent?",
                            "answer": "yes"}]}
    return {"format": 2, "kind": REPORT_KIND, "generator": "g", "settings": {}, "totals": totals,
            "evaluations": [record]}


@pytest.mark.parametrize(("totals", "usage", "message"), [
    ({"prompt_tokens": -20_000_000}, {}, "prompt_tokens is -20000000"),
    ({}, {"prompt_tokens": -5}, "evaluations[0].usage.prompt_tokens"),
    ({}, {"completion_tokens": 10**30}, "evaluations[0].usage.completion_tokens"),
])
def test_a_report_with_impossible_counts_is_refused(tmp_path: Path, totals: dict[str, Any], usage: dict[str, Any],
                                                   message: str) -> None:
    path = tmp_path / "shard.json"
    path.write_text(json.dumps(_report(totals, usage)), encoding="utf-8")
    with pytest.raises(UsageError) as info:
        ReportDocument.load(path)
    assert str(path) in str(info.value) and message in str(info.value)


def test_merging_a_shard_with_negative_counts_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_bineval.cli import main

    good, bad = tmp_path / "a.json", tmp_path / "b.json"
    good.write_text(json.dumps(_report({}, {"prompt_tokens": 5})), encoding="utf-8")
    bad_doc = _report({"completion_tokens": -3}, {})
    bad_doc["evaluations"][0]["test"] = "t.py::test_b"
    bad.write_text(json.dumps(bad_doc), encoding="utf-8")
    assert main(["report", "merge", str(good), str(bad), "-o", str(tmp_path / "merged.json")]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "completion_tokens is -3" in err
    assert not (tmp_path / "merged.json").exists()
