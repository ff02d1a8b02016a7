"""Statistics of the regression gate and question matching by meaning, as pure functions: exact tests against
p-values computed by hand, significant regressions versus noise, replaced and slightly edited questions, tests not
run."""

from __future__ import annotations

import pytest

from pytest_bineval.gate_stats import dimension_test, fisher_exact, mcnemar_exact
from pytest_bineval.models import Evaluation, Verdict
from pytest_bineval.repeats import wilson_interval
from pytest_bineval.report.comparison import EDIT_SIMILARITY, diff_runs, similarity
from pytest_bineval.report.record import Asked, EvaluationRecord


def verdict(qid: str, answer: str, *, text: str | None = None, repeats: list[str] | None = None) -> Verdict:
    return Verdict(question_id=qid, dimension="consistency", question=text or f"Question {qid}?",  # type: ignore[arg-type]
                   answer=answer, repeats=repeats or [])  # type: ignore[arg-type]


def record(test: str, verdicts: list[Verdict]) -> EvaluationRecord:
    ev = Evaluation(task="t", model="m", dimensions=["consistency"], verdicts=verdicts)
    return EvaluationRecord.build(Asked(output="out"), ev, [], thresholds={"consistency": 0.5}, status="explicit",
                                  test=test)


# McNemar's exact test: b ~ Binomial(b + c, 1/2) under "no change"; two-sided p = 2 * P(X <= min(b, c)), at most 1.
@pytest.mark.parametrize(("b", "c", "p"), [
    (6, 0, 0.03125),   # 2 * (1/2)^6 = 2/64
    (5, 0, 0.0625),    # 2 * (1/2)^5 = 2/32: five of five flips are not enough at 0.05
    (0, 6, 0.03125),   # symmetric
    (7, 1, 0.0703125),  # 2 * (C(8,0) + C(8,1)) / 2^8 = 2 * 9/256 = 18/256
    (3, 1, 0.625),     # 2 * (C(4,0) + C(4,1)) / 16 = 10/16
    (1, 0, 1.0),       # 2 * 1/2 = 1
    (0, 0, 1.0),       # no discordant pair: nothing changed
])
def test_mcnemar_exact_hand_computed(b: int, c: int, p: float) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(p)


# Fisher's exact test, two-sided: the sum of the hypergeometric probabilities of the tables with the same margins
# that are no more likely than the observed one.
def test_fisher_exact_hand_computed() -> None:
    # baseline 10 yes of 10, now 4 yes of 10: margins 14 yes, 6 no, N = 20; P(a) = C(14, a) C(6, 10 - a) / C(20, 10)
    # with C(20, 10) = 184756. P(10) = C(14,10) = 1001 / 184756; the other table as unlikely is a = 4 (C(14,4) C(6,6)
    # = 1001); a = 5 has C(14,5) C(6,5) = 12012 > 1001. p = 2002 / 184756 = 0.0108357
    assert fisher_exact(10, 10, 4, 10) == pytest.approx(2002 / 184756)
    # 2 of 2 vs 0 of 2: P(a=2) = C(2,2) C(2,0) / C(4,2) = 1/6, and a = 0 likewise: p = 2/6
    assert fisher_exact(2, 2, 0, 2) == pytest.approx(1 / 3)
    assert fisher_exact(3, 3, 3, 3) == pytest.approx(1.0)
    assert fisher_exact(0, 0, 1, 1) == 1.0  # nothing answered in one run: nothing to test


@pytest.mark.parametrize(("b", "c"), [(6, 0), (7, 1), (3, 1), (2, 2), (0, 9), (12, 5)])
def test_mcnemar_agrees_with_scipy(b: int, c: int) -> None:
    from scipy.stats import binomtest

    assert mcnemar_exact(b, c) == pytest.approx(binomtest(b, b + c, 0.5).pvalue, rel=1e-9)


@pytest.mark.parametrize("table", [(10, 10, 4, 10), (2, 2, 0, 2), (5, 5, 1, 5), (7, 12, 9, 12), (3, 8, 3, 5),
                                   (0, 4, 4, 4), (15, 30, 15, 30)])
def test_fisher_agrees_with_scipy(table: tuple[int, int, int, int]) -> None:
    from scipy.stats import fisher_exact as reference

    yb, nb, ya, na = table
    expected = reference([[yb, nb - yb], [ya, na - ya]]).pvalue
    assert fisher_exact(*table) == pytest.approx(expected, rel=1e-6)


def test_wilson_interval_of_a_confirmed_question() -> None:
    # 5 yes of 5: center = (1 + z^2/10) / (1 + z^2/5) = 1.384146 / 1.768291 = 0.782759; half = z/(1 + z^2/5) *
    # sqrt(0 + z^2/100) = 1.108393 * 0.195996 = 0.217241: [0.565518, 1]
    low, high = wilson_interval(5, 5) or (0.0, 0.0)
    assert (low, high) == (pytest.approx(0.565518, abs=1e-5), pytest.approx(1.0))


def test_paired_answers_use_mcnemar_and_repeats_use_fisher() -> None:
    pairs = [(verdict(f"c{i}", "yes"), verdict(f"c{i}", "no")) for i in range(6)]
    result = dimension_test(pairs)
    assert (result.test, result.yes_to_no, result.no_to_yes, result.pairs) == ("mcnemar", 6, 0, 6)
    assert result.p_value == pytest.approx(0.03125)
    repeated = [(verdict("c1", "yes", repeats=["yes"] * 5),
                 verdict("c1", "no", repeats=["no", "no", "no", "no", "yes"]))]
    result = dimension_test(repeated)
    # 5 yes of 5 vs 1 yes of 5: margins 6 yes, 4 no, N = 10, C(10,5) = 252; P(a=5) = C(6,5) C(4,0) = 6/252,
    # P(a=1) = C(6,1) C(4,4) = 6/252, a = 2..4 are likelier (15*4=60, 20*6=120, 60): p = 12/252
    assert result.test == "fisher" and result.p_value == pytest.approx(12 / 252)
    errored = [(verdict("c1", "yes"), verdict("c1", "error"))]
    assert dimension_test(errored).test == "none"


def test_a_dimension_regresses_only_when_its_drop_is_significant() -> None:
    base = [record("t::big", [verdict(f"c{i}", "yes") for i in range(8)]),
            record("t::small", [verdict(f"c{i}", "yes") for i in range(3)])]
    now = [record("t::big", [verdict(f"c{i}", "no" if i < 6 else "yes") for i in range(8)]),
           record("t::small", [verdict("c0", "no"), verdict("c1", "yes"), verdict("c2", "yes")])]
    report = diff_runs(base, now, baseline="base.json")
    (big,) = report.compared[0].scores
    (small,) = report.compared[1].scores
    assert (big.regressed, big.stat_test, big.p_value) == (True, "mcnemar", pytest.approx(0.03125))
    assert (small.regressed, small.p_value) == (False, pytest.approx(1.0))  # one flip of three: within noise
    assert [d.key for d, _ in report.regressed()] == ["t::big"]
    assert report.fail_reason() == ("1 dimension regressed significantly (p < 0.05) vs baseline base.json "
                                    "(--bineval-fail-on-regression)")
    assert diff_runs(base, now, alpha=0.01).fail_reason() is None  # 0.03125 is not below 0.01
    assert "2 regressions" not in (diff_runs(base, now, fail_on="any").fail_reason() or "")
    assert "7 regressions and 2 score drops" in (diff_runs(base, now, fail_on="any").fail_reason() or "")


def test_similarity_threshold_is_a_small_edit() -> None:
    assert similarity("Does it name the city?", "does  it name the city?") == 1.0
    assert similarity("Does it name C?", "Does it name C at all?") >= EDIT_SIMILARITY  # 2 * 15 / 37 = 0.81
    assert similarity("Is every number in the article?", "Is the tone neutral?") < EDIT_SIMILARITY


def test_a_replaced_question_is_neither_regression_nor_fix_and_a_small_edit_is_kept_out_of_the_gate() -> None:
    """Bug: after a re-pin, questions were matched by id although their texts were unrelated, and the flips
    between two different questions were reported (and gated) as regressions and fixes."""
    base = [record("t::a", [verdict("c1", "yes", text="Does the summary name the city?"),
                            verdict("c2", "no", text="Is the tone neutral?"),
                            verdict("c3", "yes", text="Does it name C?")])]
    now = [record("t::a", [verdict("c1", "no", text="Is every number in the summary in the article?"),
                           verdict("c2", "yes", text="Does the summary avoid speculation?"),
                           verdict("c3", "no", text="Does it name C at all?")])]
    report = diff_runs(base, now, baseline="base.json", fail_on="any")
    (d,) = report.compared
    assert d.replaced == 2 and d.matched_by_id == 1
    assert sorted(q.id for q in d.questions_added) == sorted(q.id for q in d.questions_removed) == ["c1", "c2"]
    assert report.changes("regression") == [] and report.changes("fix") == []
    ((_, edited),) = report.edited_changes()
    assert (edited.question_id, edited.before, edited.after, edited.edited_from) == ("c3", "yes", "no",
                                                                                     "Does it name C?")
    assert report.fail_reason() == ("1 score drop beyond tolerance 0.00 vs baseline base.json "
                                    "(--bineval-fail-on-regression=any)")  # 2/3 -> 1/3 yes: no regression at all


def test_a_baseline_test_that_did_not_run_is_not_run_not_removed() -> None:
    base = [record("t::a", [verdict("c1", "yes")]), record("t::b", [verdict("c1", "yes")]),
            record("t::c", [verdict("c1", "yes")])]
    now = [record("t::a", [verdict("c1", "yes")])]
    report = diff_runs(base, now, ran={"t::a", "t::c"})  # -k deselected t::b; t::c ran and evaluated nothing
    assert [e.key for e in report.not_run] == ["t::b"] and [e.key for e in report.removed] == ["t::c"]
    assert [e.key for e in diff_runs(base, now).removed] == ["t::b", "t::c"]  # without knowing what ran
    # t::b's file was collected, t::b was not (nor deselected): the test was deleted, so it is removed
    gone = diff_runs(base, now, ran={"t::a", "t::c"}, collected={"t::a", "t::c"})
    assert gone.not_run == [] and [e.key for e in gone.removed] == ["t::b", "t::c"]
    kept = diff_runs(base, now, ran={"t::a", "t::c"}, collected={"t::a", "t::b", "t::c"})  # -k deselected t::b
    assert [e.key for e in kept.not_run] == ["t::b"]
