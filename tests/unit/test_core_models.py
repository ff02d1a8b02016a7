"""The data of BinEval without any model: scores, rescaling, JSON round-trips, checklist selection."""

from __future__ import annotations

import json

import pytest

from pytest_bineval import Checklist, Evaluation, Question, Usage, Verdict
from pytest_bineval.models import rescale, share_of_yes, task_digest


def verdict(dimension: str, answer: str, n: int = 1, **extra: object) -> Verdict:
    return Verdict(question_id=f"{dimension}-{n}", dimension=dimension, question=f"Is {dimension} check {n} met?",
                   answer=answer, **extra)  # type: ignore[arg-type]


def evaluation(verdicts: list[Verdict], dimensions: list[str] | None = None) -> Evaluation:
    dims = dimensions or list(dict.fromkeys(v.dimension for v in verdicts))
    return Evaluation(task="Summarize.", model="fake/judge", dimensions=dims, verdicts=verdicts)


# -- scoring -------------------------------------------------------------------------------------------------

def test_share_of_yes_counts_answered_questions_only() -> None:
    assert share_of_yes([verdict("c", "yes"), verdict("c", "no")]) == 0.5
    assert share_of_yes([verdict("c", "yes"), verdict("c", "error"), verdict("c", "error")]) == 1.0
    assert share_of_yes([verdict("c", "no"), verdict("c", "error")]) == 0.0
    assert share_of_yes([verdict("c", "error")]) is None
    assert share_of_yes([]) is None


def test_the_papers_consistency_example_3_yes_of_7() -> None:
    """The paper's Figure-4 example: 3 yes of 7 consistency questions -> 3/7 = 0.43.

    The paper then says "rescaled to 1-5 -> 1.57", but its own formula S' = S * (b - a) + a gives
    3/7 * 4 + 1 = 2.71, and no affine map of [0, 1] onto [1, 5] sends 3/7 to 1.57 (= 11/7). The package
    implements the stated formula; this test pins that choice (and fails if someone "fixes" it to 1.57).
    """
    answers = ["yes", "no", "yes", "no", "no", "yes", "no"]
    result = evaluation([verdict("consistency", a, i) for i, a in enumerate(answers, 1)])
    assert result.scores == {"consistency": pytest.approx(3 / 7)}
    assert round(result.scores["consistency"], 2) == 0.43
    assert result.rescaled(1, 5)["consistency"] == pytest.approx(1 + 4 * 3 / 7)
    assert round(result.rescaled(1, 5)["consistency"], 2) == 2.71
    assert result.rescaled(1, 5)["consistency"] != pytest.approx(1.57, abs=0.01)
    assert result.rescaled()["overall"] == pytest.approx(1 + 4 * 3 / 7)


def test_rescale_is_the_affine_map_and_keeps_none() -> None:
    assert rescale(0.0, 1, 5) == 1
    assert rescale(1.0, 1, 5) == 5
    assert rescale(0.5, 1, 5) == 3
    assert rescale(0.25, 0, 100) == 25
    assert rescale(None, 1, 5) is None


def test_scores_per_dimension_and_overall_exclude_error_verdicts() -> None:
    result = evaluation([
        verdict("consistency", "yes", 1), verdict("consistency", "no", 2), verdict("consistency", "error", 3),
        verdict("fluency", "yes", 1), verdict("fluency", "yes", 2),
        verdict("relevance", "error", 1),
    ])
    assert result.scores == {"consistency": 0.5, "fluency": 1.0, "relevance": None}
    assert result.overall == pytest.approx(3 / 4)  # 3 yes of 4 answered; the 2 errors do not count
    assert [v.question_id for v in result.errors] == ["consistency-3", "relevance-1"]
    assert [v.question_id for v in result.failed] == ["consistency-2"]
    rescaled = result.rescaled(1, 5)
    assert rescaled == {"consistency": 3.0, "fluency": 5.0, "relevance": None, "overall": 4.0}


def test_a_dimension_without_questions_scores_none() -> None:
    result = evaluation([verdict("fluency", "no")], dimensions=["fluency", "coherence"])
    assert result.scores == {"fluency": 0.0, "coherence": None}
    assert result.overall == 0.0


def test_usage_adds_up_and_keeps_unknown_cost_none() -> None:
    a = Usage(llm_calls=2, prompt_tokens=10, completion_tokens=3, seconds=0.5)
    b = Usage(cache_hits=4, prompt_tokens=1, cost_usd=0.25)
    total = Usage.total([a, b])
    assert (total.llm_calls, total.cache_hits, total.prompt_tokens, total.completion_tokens) == (2, 4, 11, 3)
    assert total.cost_usd == 0.25
    assert total.seconds == 0.5
    assert (a + a).cost_usd is None


# -- lossless JSON round-trip -------------------------------------------------------------------------------

CHECKLIST = Checklist(
    task="Summarize the news article in 2-3 sentences.",
    dimensions={"consistency": "Only facts from the input.", "tone": "Neutral, {braces} and \"quotes\" ü"},
    requirements=["The summary states only facts from the article."],
    questions=[
        Question(id="consistency-1", dimension="consistency", text="Is every claim supported by the input?",
                 no_example="Invents a quote.", requirement="Only facts."),
        Question(id="tone-1", dimension="tone", text="Is the response free of opinion?"),
    ],
    model="fake/judge",
    prompt_version="1",
)


def test_checklist_json_round_trip_is_lossless() -> None:
    text = CHECKLIST.model_dump_json()
    again = Checklist.model_validate_json(text)
    assert again == CHECKLIST
    assert again.model_dump_json() == text
    assert json.loads(text)["task_digest"] == task_digest(CHECKLIST.task)  # computed, and accepted back


def test_verdict_json_round_trip_is_lossless() -> None:
    for v in (
        verdict("consistency", "yes", explanation="It says so.", p_yes=0.8123456789012345, cached=True),
        verdict("consistency", "error", error="TimeoutError: no reply within 0.2 s"),
        verdict("fluency", "no", p_yes=None),
    ):
        assert Verdict.model_validate_json(v.model_dump_json()) == v


def test_evaluation_json_round_trip_is_lossless() -> None:
    result = evaluation(
        [verdict("consistency", "yes", 1, p_yes=0.9), verdict("consistency", "error", 2, error="boom"),
         verdict("fluency", "no", 1, explanation="Typos.")],
        dimensions=["consistency", "fluency", "relevance"],
    )
    result.usage = Usage(llm_calls=3, cache_hits=1, prompt_tokens=120, completion_tokens=30, cost_usd=0.001,
                         seconds=1.25)
    again = Evaluation.model_validate_json(result.model_dump_json())
    assert again == result
    assert again.scores == result.scores == {"consistency": 1.0, "fluency": 0.0, "relevance": None}
    assert again.errors == result.errors


def test_verdict_answer_is_yes_no_or_error_only() -> None:
    with pytest.raises(ValueError):
        verdict("consistency", "maybe")


# -- selection -----------------------------------------------------------------------------------------------

def test_checklist_select_keeps_the_named_dimensions_and_their_questions() -> None:
    sub = CHECKLIST.select(["tone"])
    assert list(sub.dimensions) == ["tone"]
    assert [q.id for q in sub.questions] == ["tone-1"]
    assert sub.task == CHECKLIST.task
    assert len(CHECKLIST.questions) == 2  # the original is untouched
    assert CHECKLIST.select(None) is CHECKLIST
    assert CHECKLIST.select(["tone", "consistency", "tone"]).dimensions == {
        "tone": CHECKLIST.dimensions["tone"], "consistency": CHECKLIST.dimensions["consistency"]}


def test_checklist_select_rejects_unknown_dimensions_naming_them() -> None:
    with pytest.raises(ValueError, match=r"fluency.*consistency.*tone"):
        CHECKLIST.select(["fluency"])


def test_by_dimension_groups_questions_and_keeps_empty_dimensions() -> None:
    checklist = CHECKLIST.model_copy(update={"dimensions": {**CHECKLIST.dimensions, "fluency": "Reads well."}})
    groups = checklist.by_dimension()
    assert {name: [q.id for q in qs] for name, qs in groups.items()} == {
        "consistency": ["consistency-1"], "tone": ["tone-1"], "fluency": []}


def test_usage_since_is_the_spend_between_two_totals() -> None:
    from pytest_bineval.models import Usage

    before = Usage(llm_calls=2, cache_hits=1, prompt_tokens=100, completion_tokens=10, cost_usd=0.5, seconds=1.0)
    spent = Usage(llm_calls=3, cache_hits=0, prompt_tokens=40, completion_tokens=4, cost_usd=0.25, seconds=2.0)
    assert (before + spent).since(before) == spent
    assert Usage(llm_calls=1).since(Usage()).cost_usd is None  # unknown cost stays unknown


def test_cost_text_is_a_lower_bound_when_some_replies_are_unpriced() -> None:
    from pytest_bineval.models import Usage, cost_text

    priced, unpriced, hit = Usage(llm_calls=1, cost_usd=0.002), Usage(llm_calls=1, unpriced_requests=1), \
        Usage(cache_hits=1, cost_usd=0.0)
    assert cost_text((priced + hit).cost_usd, (priced + hit).unpriced_requests) == "$0.0020"
    total = unpriced + hit
    assert (total.cost_usd, cost_text(total.cost_usd, total.unpriced_requests)) == (0.0, "unknown")
    total = priced + unpriced + hit
    assert cost_text(total.cost_usd, total.unpriced_requests) == "at least $0.0020 (1 unpriced)"
    assert (total.since(priced).unpriced_requests, cost_text(None, 0)) == (1, "$0.0000")
