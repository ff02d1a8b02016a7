"""Qworld on the real embedded model (SmolLM2-135M through llama.cpp and litellm): qworld-lite and a small tree
(widths 2/1/1) complete and yield valid checklists that the judge can score with points.

Quality is not asserted: the 135M model's criteria are generic (see docs/qworld.md). Bounded cost: one kept
scenario and perspective per level, small replies; a module-scoped cache directory.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_bineval import Checklist, Engine, QworldConfig, Settings, points_score

pytestmark = pytest.mark.local_model

QUESTION = ("I'm flying from Berlin to Tokyo next month with my 2-year-old daughter; the flight is 14 hours. "
            "How do I keep her calm and sleeping on the plane?")
ANSWER = ("Keep her usual bedtime routine, bring familiar snacks and a favourite toy, and give her a bottle at "
          "take-off and landing for her ears. Do not give her medicine to make her sleep unless her doctor says so.")


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    e = Engine(Settings(cache_dir=str(tmp_path_factory.mktemp("qworld-real-cache"))))
    yield e
    e.close()


def check_valid(checklist: Checklist, strategy: str) -> None:
    """What every generated checklist must be, whatever the model wrote."""
    tree = checklist.tree
    assert tree is not None and checklist.strategy == strategy and checklist.question == QUESTION
    assert checklist.questions, "no criterion"
    assert Checklist.model_validate_json(checklist.model_dump_json()) == checklist
    ids = {n.id for n in tree.nodes}
    for q in checklist.questions:
        assert q.points is not None and 1 <= abs(q.points) <= 10
        assert q.text.endswith("?")
        if q.points < 0:
            assert q.text.startswith("Does the response avoid ")
        node = tree.node(q.id)
        assert node is not None and node.status == "kept" and node.level == "criterion"
        for part in q.branch.split(" > "):
            assert part in ids or q.branch in ("review",) or q.branch.startswith("expansion round")
    for n in tree.nodes:
        assert n.parent is None or n.parent in ids
        assert n.merged_into is None or n.merged_into in ids
    assert tree.counts["criterion_after_top_k"] == len(checklist.questions)


def judge_with_points(engine: Engine, checklist: Checklist) -> None:
    evaluation = engine.evaluate(ANSWER, checklist, QUESTION)
    assert not evaluation.errors and len(evaluation.verdicts) == len(checklist.questions)
    score = points_score(evaluation.verdicts, checklist.questions)
    assert score is None or 0.0 <= score <= 1.0


def test_qworld_lite_on_the_embedded_model(engine: Engine) -> None:
    config = QworldConfig(breadth=(1, 1, 2), top_k=4, max_tokens=350)
    checklist = engine.checklist(None, strategy="qworld-lite", question=QUESTION, qworld=config)
    check_valid(checklist, "qworld-lite")
    assert checklist.model == engine.settings.generator_model
    judge_with_points(engine, checklist)


def test_small_qworld_tree_on_the_embedded_model(engine: Engine, tmp_path: Path) -> None:
    # one expansion round (of the scenarios): the rounds of every level are one code path, and each round is a
    # request of several hundred prompt tokens on the real model
    config = QworldConfig(widths=(2, 1, 1), breadth=(1, 1, 2), max_nodes=(1, 1), top_k=4, max_tokens=300)
    before = engine.usage.llm_calls
    checklist = engine.checklist(None, strategy="qworld", question=QUESTION, qworld=config)
    check_valid(checklist, "qworld")
    tree = checklist.tree
    assert tree is not None and tree.widths == [2, 1, 1]
    # the scenarios: a decomposition of the question + one expansion; then a decomposition per level; one review
    # per level: 7 calls, more if a reply had to be retried
    assert engine.usage.llm_calls - before >= 7
    assert {n.round for n in tree.nodes if n.origin != "review"} <= {0, 1}
    assert {n.round for n in tree.nodes if n.origin != "review" and n.level != "scenario"} == {0}
    assert {n.origin for n in tree.nodes if n.level == "scenario"} >= {"decompose"}
    judge_with_points(engine, checklist)
