"""``bineval bench rubrics``: generated criteria against a reference rubric (coverage, uniqueness), on a small
HealthBench-style fixture with the scripted fake model as generator and judge."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_bineval.bench.rubrics import ItemResult, load_rubrics, prompt_text
from pytest_bineval.cli import main
from pytest_bineval.testing.scripted import TOPICS, Request, ScriptedModel

FIXTURE = Path(__file__).parents[1] / "data" / "rubrics-fixture.jsonl"
TOPIC_WORDS = {w for t in TOPICS for w in t.split()}


def match_by_topic(req: Request) -> str:
    """Covered when the criterion and a listed one share a topic word of the fake's criteria."""
    criterion = re.search(r"^Criterion: (.*)$", req.user, re.MULTILINE)
    listing = re.search(r"<prompt>\n(.*)\n</prompt>", req.user, re.DOTALL)
    assert criterion and listing
    words = set(re.findall(r"[a-z]+", criterion.group(1).lower())) & TOPIC_WORDS
    for line in listing.group(1).splitlines():
        ident, _, text = line.partition(": ")
        if words & set(re.findall(r"[a-z]+", text.lower())):
            return json.dumps({"answer": "yes", "match": ident, "explanation": "same topic"})
    return json.dumps({"answer": "no", "match": "none", "explanation": "no shared topic"})


def test_loader_reads_conversations_texts_and_points() -> None:
    items = load_rubrics(FIXTURE)
    assert [i.id for i in items] == ["flight", "deposit"]
    assert items[0].question.startswith("We fly 14 hours") and items[1].question.startswith("My landlord")
    assert [c.points for c in items[0].rubric] == [8, 5, -9] and [c.points for c in items[1].rubric] == [1, 4]
    assert prompt_text([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yes?"},
                        {"role": "user", "content": "Q"}], "x") == "user: Hi\n\nassistant: Yes?\n\nuser: Q"


def test_loader_errors_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "Q?", "rubrics": [{"criterion": "ok", "points": 2}]}\n'
                   '{"prompt": "Q?", "rubrics": [{"points": 3}]}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.jsonl, line 2, rubrics\[0\]: a rubric item is"):
        load_rubrics(bad)
    bad.write_text('{"question": "Q?", "rubrics": ["x"]}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="line 1: missing key 'prompt'"):
        load_rubrics(bad)


def test_coverage_and_uniqueness_by_hand(fake: ScriptedModel, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """qworld-lite on the fake writes 8 criteria per question, about the topics dosage, timing, cost, ... (the
    first question) and budget, schedule, weather, packing ... (the second). The judge matches shared topics:
    flight: 1 of 3 reference criteria covered (timing; points 8 of 8 + 5), 7 of 8 generated ones unique;
    deposit: nothing covered, all 8 unique."""
    fake.rules["criteria_match"] = match_by_topic
    out = tmp_path / "out"
    code = main(["bench", "rubrics", "--data", str(FIXTURE), "--strategy", "qworld-lite", "--model", fake.model,
                 "--cache-dir", str(tmp_path / "cache"), "--out", str(out), "--quiet"])
    assert code == 0
    doc = json.loads((out / f"rubrics-{fake.provider}-judge.json").read_text())
    (summary,) = doc["summary"]
    assert summary["coverage"] == pytest.approx((1 / 3 + 0) / 2)
    assert summary["weighted_coverage"] == pytest.approx((8 / 13 + 0) / 2)
    assert summary["uniqueness"] == pytest.approx((7 / 8 + 1) / 2)
    assert summary["criteria_per_item"] == 8 and summary["judge_errors"] == 0
    assert summary["generation"]["llm_calls"] == 2 and summary["judging"]["llm_calls"] == 3 + 8 + 2 + 8
    flight = doc["results"][0]
    assert [d["covered"] for d in flight["coverage_decisions"]] == [True, False, False]
    assert flight["coverage_decisions"][0]["match"] == "c2"
    printed = capsys.readouterr().out
    assert "| qworld-lite | 2 | 8.00 | 0.17 | 0.31 | 0.94 | 2 | 21 | 0 items, 0 judge errors |" in printed
    assert "bineval bench rubrics" in doc["command"] and "--strategy qworld-lite" in doc["command"]
    # the judge saw the question and both lists as delimited data
    judged = [r for r in fake.requests if r.kind == "criteria_match"]
    assert "<input>\nWe fly 14 hours" in judged[0].user and "c1: Does the response cover dosage" in judged[0].user
    assert "r1: Suggests keeping the toddler's usual sleep timing" in judged[3].user


def test_judge_errors_count_on_neither_side(fake: ScriptedModel, tmp_path: Path) -> None:
    def flaky(req: Request) -> object:
        if "Criterion: Recommends packing" in req.user:
            return RuntimeError("judge down")
        return match_by_topic(req)

    fake.rules["criteria_match"] = flaky
    result = ItemResult("x", "qworld-lite")
    main(["bench", "rubrics", "--data", str(FIXTURE), "--strategy", "qworld-lite", "--model", fake.model,
          "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out"), "--limit", "1", "--quiet",
          "--retries", "0"])
    doc = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    (summary,) = doc["summary"]
    assert summary["judge_errors"] == 1
    assert summary["coverage"] == pytest.approx(1 / 2)  # timing covered, sedative not, packing unknown
    assert result.coverage_share() is None


def test_rubrics_needs_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "rubrics", "--out", str(tmp_path)]) == 2
    assert "needs --data FILE" in capsys.readouterr().err
