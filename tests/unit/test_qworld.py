"""Qworld: the recursive expansion tree, the review, points, top-K, the weighted score and pins per question,
made deterministic by the scripted fake model (served through litellm like a real one)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_bineval import (
    BinevalAssertionError,
    Checklist,
    ChecklistGenerationError,
    Engine,
    Evaluation,
    Question,
    QworldConfig,
    Settings,
    UsageError,
    Verdict,
    assert_passes,
    generate_checklist,
    points_score,
)
from pytest_bineval.assertions import failure_message
from pytest_bineval.cli import main
from pytest_bineval.pins import PinFile, pin
from pytest_bineval.qworld import QWORLD_DIMENSION, parse_widths
from pytest_bineval.report.record import Asked, EvaluationRecord
from pytest_bineval.scope import reset_current, set_current
from pytest_bineval.testing import Request, ScriptedModel

QUESTION = ("I'm flying Berlin to Tokyo next month with my 2-year-old, 14 hours. "
            "How do I keep her calm and sleeping on the plane?")
OTHER_QUESTION = "My landlord kept my whole deposit for 'cleaning'. The flat was spotless. What can I do?"


def config(**kw: Any) -> QworldConfig:
    base: dict[str, Any] = {"widths": (1, 1, 1), "breadth": (2, 2, 2), "max_nodes": (5, 8), "similarity": "off"}
    base.update(kw)
    return QworldConfig(**base)


def make(fake: ScriptedModel, cache_dir: Path, strategy: str = "qworld", question: str = QUESTION,
         retries: int = 2, **kw: Any) -> Checklist:
    return generate_checklist(None, model=fake.model, cache_dir=str(cache_dir), strategy=strategy,
                              question=question, qworld=config(**kw), retries=retries)


def kinds(fake: ScriptedModel) -> list[str]:
    return [r.kind for r in fake.requests]


def criteria_reply(*items: tuple[str, int], penalties: tuple[tuple[str, int], ...] = ()) -> str:
    return json.dumps({"criteria": [{"question": q, "points": p, "tag": "t"} for q, p in items],
                       "penalties": [{"question": q, "points": p, "tag": "t"} for q, p in penalties]})


# -- the tree -------------------------------------------------------------------------------------------------
def test_expansion_counts_per_level(fake: ScriptedModel, cache_dir: Path) -> None:
    """widths 2/3/1, breadth 2: level by level, one decomposition call per kept parent, width-1 expansion rounds
    over the whole level, then one review call; the level's cap limits the parents of the next level."""
    c = make(fake, cache_dir, widths=(2, 3, 1), max_nodes=(3, 4))
    assert kinds(fake) == (
        ["qworld_scenarios"] * 2 + ["qworld_review_scenario"]            # 1 decomposition + 1 expansion
        + ["qworld_perspectives"] * (3 + 2) + ["qworld_review_perspective"]  # 3 kept scenarios + 2 expansions
        + ["qworld_criteria"] * 4 + ["qworld_review_criterion"])          # 4 kept perspectives, no expansion
    tree = c.tree
    assert tree is not None and c.strategy == "qworld" and c.question == QUESTION
    scenarios, perspectives = tree.level("scenario", kept_only=False), tree.level("perspective", kept_only=False)
    assert [(n.origin, n.round) for n in scenarios] == [("decompose", 0)] * 2 + [("expand", 1)] * 2
    assert [n.status for n in scenarios] == ["kept"] * 3 + ["cut"]  # max_nodes: 3 scenarios carried down
    assert [n.parent for n in perspectives[:6]] == ["s1", "s1", "s2", "s2", "s3", "s3"]
    assert [n.round for n in perspectives[6:]] == [1, 1, 2, 2]
    assert len(tree.level("perspective")) == 4  # cut to max_nodes[1]
    assert {n.parent for n in tree.level("criterion")} == {"p1", "p2", "p3", "p4"}
    assert tree.counts == {
        "scenario_generated": 4, "scenario_after_similarity": 4, "scenario_after_review": 4,
        "perspective_generated": 10, "perspective_after_similarity": 10, "perspective_after_review": 10,
        "criterion_generated": 8, "criterion_after_similarity": 8, "criterion_after_review": 8,
        "criterion_after_top_k": 8}
    assert tree.widths == [2, 3, 1]
    # every final criterion is a question of the checklist, with its points and the branch it came from
    assert len(c.questions) == 8
    q = next(q for q in c.questions if q.id == "c1")
    assert q.branch == "s1 > p1" and q.points == 10 and q.dimension == QWORLD_DIMENSION
    assert list(c.dimensions) == [QWORLD_DIMENSION]
    # questions are ordered by importance
    assert [abs(q.points or 0) for q in c.questions] == sorted((abs(q.points or 0) for q in c.questions), reverse=True)


def test_the_prompts_carry_the_question_parents_and_what_is_listed(fake: ScriptedModel, cache_dir: Path) -> None:
    make(fake, cache_dir, widths=(1, 1, 2), breadth=(1, 1, 1))
    first_criteria = next(r for r in fake.requests if r.kind == "qworld_criteria")
    assert "<input>\n" + QUESTION + "\n</input>" in first_criteria.user
    assert "p1: Perspective 1" in first_criteria.user and "Scenario 1" in first_criteria.user
    expansion = [r for r in fake.requests if r.kind == "qworld_criteria"][-1]
    assert "c1 [+10]: Does the response cover dosage (criterion 1)?" in expansion.user  # what is already listed
    review = fake.requests[-1]
    assert review.kind == "qworld_review_criterion" and review.ids == ["c1", "c2"]


def test_review_merges_duplicates_across_branches_and_fills_gaps(fake: ScriptedModel, cache_dir: Path) -> None:
    def review(req: Request) -> str:
        assert req.ids == ["c1", "c2", "c3", "c4"]
        return json.dumps({"duplicates": [{"keep": "c3", "drop": ["c1", "c9", "c3"]}, {"keep": "c7", "drop": ["c2"]}],
                           "missing": {"criteria": [{"question": "Does the response mention ear pressure at take-off?",
                                                     "points": 6, "tag": "health"}], "penalties": []}})

    fake.rules["qworld_review_criterion"] = review
    c = make(fake, cache_dir, breadth=(1, 2, 2))
    tree = c.tree
    assert tree is not None
    c1, c3 = tree.node("c1"), tree.node("c3")
    assert c1 is not None and c3 is not None
    assert (c1.status, c1.merged_into) == ("merged", "c3")
    assert c3.points == 10  # the kept criterion takes the larger importance of its group (c1: 10, c3: 8)
    (merge,) = [m for m in tree.merges if m.level == "criterion"]  # unknown ids (c9, c7) and self-drops ignored
    assert (merge.kept, merge.removed, merge.by) == ("c3", ["c1"], "review")
    added = tree.node("c5")
    assert added is not None and (added.origin, added.parent, added.points) == ("review", None, 6)
    assert [q.id for q in c.questions] == ["c3", "c2", "c4", "c5"]  # by points: 10, 9, 7, 6
    assert next(q for q in c.questions if q.id == "c5").branch == "review"
    assert tree.counts["criterion_after_review"] == 4


def test_similarity_prefilter_folds_repeats_but_never_opposite_polarity(fake: ScriptedModel, cache_dir: Path) -> None:
    fake.rules["qworld_criteria"] = lambda req: criteria_reply(
        ("Does the response suggest snacks and a favourite toy?", 6),
        ("Does the response suggest snacks and a favourite toy for the flight?", 9),
        ("Does the response mention sedatives for the child?", 3),
        penalties=(("Does the response avoid sedatives for the child?", 9),))
    c = make(fake, cache_dir, breadth=(1, 1, 4), similarity="lexical")
    tree = c.tree
    assert tree is not None
    (merge,) = tree.merges
    assert merge.kept == "c1" and merge.removed == ["c2"] and merge.by.startswith("similarity 0.")
    assert tree.node("c1").points == 9  # type: ignore[union-attr]
    assert tree.similarity == "lexical >= 0.7"
    # "mention sedatives" and "avoid sedatives" share their words but ask opposite things: both kept
    assert {q.text for q in c.questions} >= {"Does the response mention sedatives for the child?",
                                             "Does the response avoid sedatives for the child?"}
    assert tree.counts["criterion_generated"] == 4 and tree.counts["criterion_after_similarity"] == 3


def test_points_and_penalties(fake: ScriptedModel, cache_dir: Path) -> None:
    fake.rules["qworld_criteria"] = lambda req: criteria_reply(
        ("Does the response suggest keeping her usual bedtime routine?", 8),
        ("Is the response short?", 0),
        penalties=(("Does the response avoid recommending sedatives without a doctor?", 9),
                   ("Does the response recommend melatonin?", 7)))  # not asked as "avoid": cannot be scored, dropped
    c = make(fake, cache_dir, breadth=(1, 1, 3))
    points = {q.text: q.points for q in c.questions}
    assert points == {"Does the response avoid recommending sedatives without a doctor?": -9,
                      "Does the response suggest keeping her usual bedtime routine?": 8,
                      "Is the response short?": 1}  # points are clipped to 1..10


def test_top_k_keeps_the_most_important(fake: ScriptedModel, cache_dir: Path) -> None:
    c = make(fake, cache_dir, breadth=(1, 2, 3), top_k=3)  # 6 criteria, points 10, 9, 8, 7, 6, 5
    assert [q.points for q in c.questions] == [10, 9, 8]
    tree = c.tree
    assert tree is not None and tree.top_k == 3
    assert [n.status for n in tree.level("criterion", kept_only=False)] == ["kept"] * 3 + ["cut"] * 3
    assert tree.counts["criterion_after_review"] == 6 and tree.counts["criterion_after_top_k"] == 3


def test_your_own_dimensions_are_assigned_per_criterion(fake: ScriptedModel, cache_dir: Path) -> None:
    def criteria(req: Request) -> str:
        schema = req.params["response_format"]["json_schema"]["schema"]
        assert schema["properties"]["criteria"]["items"]["properties"]["dimension"]["enum"] == ["safety", "helpful"]
        return json.dumps({"criteria": [
            {"question": "Does the response warn about ear pain?", "points": 9, "tag": "t", "dimension": "safety"},
            {"question": "Does the response list snacks to pack?", "points": 5, "tag": "t", "dimension": "helpful"}],
            "penalties": []})

    fake.rules["qworld_criteria"] = criteria
    c = generate_checklist(None, [{"safety": "Keeps the child safe."}, {"helpful": "Practical tips."}],
                           model=fake.model, cache_dir=str(cache_dir), strategy="qworld", question=QUESTION,
                           qworld=config(breadth=(1, 1, 2)))
    assert {q.dimension for q in c.questions} == {"safety", "helpful"}
    assert c.select(["safety"]).questions[0].text == "Does the response warn about ear pain?"


def test_qworld_lite_is_one_call(fake: ScriptedModel, cache_dir: Path) -> None:
    c = make(fake, cache_dir, strategy="qworld-lite", similarity="lexical")
    assert kinds(fake) == ["qworld_lite"]
    tree = c.tree
    assert tree is not None and c.strategy == "qworld-lite" and tree.widths == []
    assert [n.id for n in tree.level("scenario")] == ["s1", "s2"]
    assert [n.parent for n in tree.level("perspective")] == ["s1", "s1", "s2", "s2"]
    assert len(c.questions) == 8 and {q.branch for q in c.questions} == {"s1 > p1", "s1 > p2", "s2 > p3", "s2 > p4"}
    assert tree.counts["criterion_generated"] == 8 and "criterion_after_review" not in tree.counts


def test_failed_calls_are_recorded_and_a_failed_start_is_an_error(fake: ScriptedModel, cache_dir: Path) -> None:
    fake.rules["qworld_perspectives"] = lambda req: (RuntimeError("provider exploded: 503") if "s2:" in req.user
                                                     else ScriptedModel().reply(req))
    c = make(fake, cache_dir, breadth=(2, 1, 1), retries=0, **{"max_nodes": (5, 8)})  # no backoff waits
    tree = c.tree
    assert tree is not None and len(tree.failures) == 1
    assert tree.failures[0].startswith("perspectives of s2: ") and "provider exploded: 503" in tree.failures[0]
    fake.rules["qworld_scenarios"] = lambda req: RuntimeError("down")
    with pytest.raises(ChecklistGenerationError, match=r"qworld scenario decomposition failed .*down"):
        make(fake, cache_dir / "2", question=OTHER_QUESTION, retries=0)


def test_no_usable_criterion_is_an_error(fake: ScriptedModel, cache_dir: Path) -> None:
    fake.rules["qworld_criteria"] = lambda req: criteria_reply()
    with pytest.raises(ChecklistGenerationError, match="qworld wrote no usable criterion"):
        make(fake, cache_dir)


def test_generation_is_cached(fake: ScriptedModel, cache_dir: Path) -> None:
    first = make(fake, cache_dir)
    n = len(fake.requests)
    engine = Engine(Settings(model=fake.model, cache_dir=str(cache_dir)))
    again = engine.checklist(None, strategy="qworld", question=QUESTION, qworld=config())
    engine.close()
    assert len(fake.requests) == n and engine.usage.llm_calls == 0 and engine.usage.cache_hits > 0
    assert again.questions == first.questions


def test_bad_arguments_are_usage_errors(fake: ScriptedModel, cache_dir: Path) -> None:
    with pytest.raises(UsageError, match="question is empty"):
        make(fake, cache_dir, question="  ")
    with pytest.raises(UsageError, match="pass question="):
        generate_checklist(None, model=fake.model, strategy="qworld")
    with pytest.raises(UsageError, match="question= is for strategy='qworld'"):
        generate_checklist("T", model=fake.model, question="Q?")
    with pytest.raises(UsageError, match="unknown checklist strategy 'tree'"):
        generate_checklist("T", model=fake.model, strategy="tree", question="Q?")
    with pytest.raises(UsageError, match="widths are three whole numbers"):
        QworldConfig(widths=(2, 0, 2))
    with pytest.raises(UsageError, match="top_k must be"):
        QworldConfig(top_k=0)
    with pytest.raises(UsageError, match="unknown similarity 'cosine'"):
        QworldConfig(similarity="cosine")
    assert parse_widths("3/4/3") == (3, 4, 3) and parse_widths("2") == (2, 2, 2)
    assert parse_widths((1, 2, 3)) == (1, 2, 3)
    assert fake.requests == []


def test_settings_configure_the_tree(fake: ScriptedModel, cache_dir: Path) -> None:
    engine = Engine(Settings(model=fake.model, cache_dir=str(cache_dir), qworld_widths="2,1,1", qworld_top_k=2,
                             qworld_similarity="off"))
    cfg = engine.qworld_config()
    assert (cfg.widths, cfg.top_k, cfg.similarity) == ((2, 1, 1), 2, "off")
    with pytest.raises(UsageError, match="qworld_widths"):
        Settings(qworld_widths="2,x")
    with pytest.raises(UsageError, match="qworld_similarity"):
        Settings(qworld_similarity="cosine")
    engine.close()


# -- checklist files ------------------------------------------------------------------------------------------
def test_the_tree_round_trips_and_old_checklists_serialize_as_before(fake: ScriptedModel, cache_dir: Path) -> None:
    c = make(fake, cache_dir, breadth=(1, 1, 2))
    text = c.model_dump_json()
    assert Checklist.model_validate_json(text).model_dump_json() == text
    data = json.loads(text)
    assert data["strategy"] == "qworld" and data["question"] == QUESTION and data["tree"]["nodes"]
    # a task checklist has none of the new fields in its JSON (pinned files do not change when re-pinned)
    old = {"task": "T", "dimensions": {"d": "D"}, "requirements": [], "model": "", "prompt_version": "",
           "questions": [{"id": "d-1", "dimension": "d", "text": "Is it?", "no_example": "", "requirement": ""}]}
    loaded = Checklist.model_validate(old)
    assert loaded.strategy == "bineval" and loaded.question is None and loaded.tree is None
    assert json.loads(loaded.model_dump_json()) == {**old, "task_digest": loaded.task_digest}


def test_pins_hold_one_checklist_per_question(fake: ScriptedModel, cache_dir: Path, tmp_path: Path) -> None:
    a = make(fake, cache_dir, breadth=(1, 1, 1))
    b = make(fake, cache_dir, question=OTHER_QUESTION, breadth=(1, 1, 1))
    path = tmp_path / "__bineval__" / "test_m" / "test_advice.json"
    assert pin(path, a, "test_advice[flight]") and pin(path, b, "test_advice[deposit]")
    assert not pin(path, a, "test_advice[flight]")  # unchanged
    pins = PinFile.read(path)
    assert [e.tests for e in pins.entries] == [["test_advice[flight]"], ["test_advice[deposit]"]]
    dims = {QWORLD_DIMENSION: a.dimensions[QWORLD_DIMENSION]}
    found, stale = pins.find(a.task, dims, "test_advice[flight]", question=QUESTION, strategy="qworld")
    assert found is not None and found.question == QUESTION and not stale
    assert found.tree == a.tree  # the whole tree is in the file
    # the same case with a changed question: its old pin is stale; the other case is untouched
    found, stale = pins.find(a.task, dims, "test_advice[flight]", question=QUESTION + " Alone.", strategy="qworld")
    assert found is None and stale
    found, stale = pins.find(a.task, dims, "test_advice[deposit]", question=OTHER_QUESTION, strategy="qworld")
    assert found is not None and not stale
    # another strategy for the same question is not the pinned one
    found, stale = pins.find(a.task, dims, "test_advice[flight]", question=QUESTION, strategy="qworld-lite")
    assert found is None and stale
    # a task checklist of the same task and dimensions is not a per-question pin, and vice versa
    assert pins.find(a.task, dims, "test_other")[0] is None


# -- scores ---------------------------------------------------------------------------------------------------
def q(qid: str, points: int | None) -> Question:
    avoid = "avoid " if (points or 0) < 0 else ""
    return Question(id=qid, dimension="quality", text=f"Does the response {avoid}{qid}?", points=points)


def v(qid: str, answer: str) -> Verdict:
    return Verdict(question_id=qid, dimension="quality", question=qid, answer=answer,  # type: ignore[arg-type]
                   explanation=f"{answer} for {qid}")


QUESTIONS = [q("a", 10), q("b", 5), q("c", 3), q("x", -8), q("y", -2)]


@pytest.mark.parametrize(("answers", "expected"), [
    # earned: a (10) + c (3) = 13; penalty: x answered no -> -8; y answered yes -> 0; possible: 10 + 5 + 3 = 18
    ({"a": "yes", "b": "no", "c": "yes", "x": "no", "y": "yes"}, (13 - 8) / 18),
    ({"a": "yes", "b": "yes", "c": "yes", "x": "yes", "y": "yes"}, 1.0),
    # only b (5) earned, both penalties apply: 5 - 8 - 2 < 0 -> clipped to 0
    ({"a": "no", "b": "yes", "c": "no", "x": "no", "y": "no"}, 0.0),
    # an error verdict counts on neither side: possible 10 + 5 = 15, earned 10 - 2
    ({"a": "yes", "b": "no", "c": "error", "x": "yes", "y": "no"}, 8 / 15),
])
def test_points_score_by_hand(answers: dict[str, str], expected: float) -> None:
    verdicts = [v(k, a) for k, a in answers.items()]
    assert points_score(verdicts, QUESTIONS) == pytest.approx(expected)


def test_points_score_with_repeats() -> None:
    """A question asked three times counts by the share of its repeats: a (10) 2 of 3 yes, x (-8) 1 of 3 no."""
    a = Verdict(question_id="a", dimension="quality", question="a", answer="yes", repeats=["yes", "no", "yes"])
    x = Verdict(question_id="x", dimension="quality", question="x", answer="yes", repeats=["yes", "no", "yes"])
    b = Verdict(question_id="b", dimension="quality", question="b", answer="no", repeats=["no", "no", "no"])
    assert points_score([a, x, b], QUESTIONS) == pytest.approx((10 * 2 / 3 - 8 / 3) / 15)


def test_points_score_edge_cases() -> None:
    assert points_score([v("x", "no")], QUESTIONS) is None  # no positive criterion answered
    plain = [Question(id=i, dimension="quality", text=f"Q {i}?") for i in "ab"]  # no points: share of yes
    assert points_score([v("a", "yes"), v("b", "no")], plain) == 0.5


def test_record_and_failure_message_with_points() -> None:
    verdicts = [v("a", "yes"), v("b", "no"), v("c", "no"), v("x", "no"), v("y", "yes")]
    evaluation = Evaluation(task="T", model="m", dimensions=["quality"], verdicts=verdicts)
    assert evaluation.points_scores(QUESTIONS) == {"quality": pytest.approx(2 / 18),
                                                   "overall": pytest.approx(2 / 18)}
    record = EvaluationRecord.build(Asked(score_kind="points"), evaluation,
                                    Checklist(task="t", dimensions={}, questions=QUESTIONS, strategy="qworld"),
                                    thresholds={"quality": 0.5}, status="pinned", test="t")
    (dim,) = record.dimensions
    assert (dim.score, dim.score_kind, dim.outcome) == (pytest.approx(2 / 18), "points", "failed")
    assert record.score_kind == "points" and record.strategy == "qworld" and record.overall == pytest.approx(2 / 18)
    assert [f.question_id for f in record.failing()] == ["x", "b", "c"]  # by points: 8 penalty, 5, 3
    message = failure_message(record)
    assert "quality: 0.11 points (threshold 0.50) FAIL" in message
    lines = message.splitlines()
    start = lines.index("failing questions (3):")
    assert lines[start + 1] == "  [quality] (-8 penalty) x"
    assert lines[start + 3] == "  [quality] (+5 missed) b"
    share = EvaluationRecord.build(Asked(), evaluation, QUESTIONS, thresholds={"quality": 0.5}, status="pinned",
                                   test="t")
    assert share.dimensions[0].score == pytest.approx(2 / 5) and share.score_kind == "share"
    again = EvaluationRecord.model_validate_json(record.model_dump_json())
    assert again == record


@pytest.fixture
def outside_pytest(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """No current test context (as in a script), and the default cache directory in a temporary place."""
    monkeypatch.chdir(cache_dir.parent)
    token = set_current(None)
    yield
    reset_current(token)


def test_assert_passes_with_qworld_criteria_outside_pytest(fake: ScriptedModel, outside_pytest: None) -> None:
    fake.answers = {"Does the response cover dosage (criterion 1)?": "no",
                    "Does the response cover cost (criterion 3)?": "no"}
    kw: dict[str, Any] = {"model": fake.model}
    with pytest.raises(UsageError, match=r"pass the question .* as source="):
        assert_passes("Bring snacks.", criteria="qworld", **kw)
    with pytest.raises(UsageError, match="score='median'"):
        assert_passes("Bring snacks.", source=QUESTION, criteria="qworld", score="median", **kw)
    ev = assert_passes("Bring snacks.", source=QUESTION, criteria="qworld", score="points", threshold=0.5, **kw)
    assert ev.dimensions == [QWORLD_DIMENSION] and len(ev.failed) == 2
    with pytest.raises(BinevalAssertionError) as failure:
        assert_passes("Bring snacks.", source=QUESTION, criteria="qworld", score="points", threshold=1.0, **kw)
    lines = str(failure.value).splitlines()
    assert re.fullmatch(r"  quality: 0\.\d\d points \(threshold 1\.00\) FAIL", lines[1])
    assert lines[2:4] == ["failing questions (2):",
                          "  [quality] (+10 missed) Does the response cover dosage (criterion 1)?"]
    assert lines[5] == "  [quality] (+8 missed) Does the response cover cost (criterion 3)?"
    generation = [r for r in fake.requests if r.kind.startswith("qworld_")]
    assert generation and all(QUESTION in r.user for r in generation)
    # the task defaults to answering the question; the judge sees the question as the input
    verdict = next(r for r in fake.requests if r.kind == "verdict")
    assert "Task: Answer the user's question." in verdict.user and QUESTION in verdict.user


# -- the command line -----------------------------------------------------------------------------------------
def test_cli_checklist_with_the_qworld_strategy(fake: ScriptedModel, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    question = tmp_path / "question.txt"
    question.write_text(QUESTION, encoding="utf-8")
    common = ["--model", fake.model, "--cache-dir", str(tmp_path / "cache")]
    assert main(["checklist", "--strategy", "qworld", "--question", str(question), "--qworld-widths", "1",
                 "--qworld-top-k", "3", *common]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["strategy"] == "qworld" and data["question"] == QUESTION and len(data["questions"]) == 3
    assert data["tree"]["widths"] == [1, 1, 1] and data["tree"]["top_k"] == 3
    assert main(["checklist", "--strategy", "qworld-lite", "--question", str(question), *common]) == 0
    assert json.loads(capsys.readouterr().out)["strategy"] == "qworld-lite"
    assert main(["checklist", "--strategy", "qworld", *common]) == 2
    assert "give --question FILE" in capsys.readouterr().err
    assert main(["checklist", "--task", "T", "--question", str(question), *common]) == 2
    assert "--question is for --strategy qworld" in capsys.readouterr().err
    assert main(["checklist", *common]) == 2
    assert "--task is required" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["checklist", "--strategy", "qworld", "--question", str(question), "--qworld-widths", "0,1,1"])
