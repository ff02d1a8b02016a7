"""Statistics of the regression gate and question matching by meaning, as pure functions: the suite-level
question (pytest_bineval.gate_stats: the sign-flip test against hand-computed and brute-force enumerations and
scipy, the clustering -- repeats and the questions of one evaluation are one observation --, Holm, the smallest
detectable drop and the verdicts), the comparison's flips and suite verdicts (diff_runs), replaced and slightly
edited questions, tests not run."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import pytest

from pytest_bineval.gate_stats import (
    MEANINGFUL_DROP,
    Pair,
    count_at_most,
    detectable_drop,
    holm,
    paired_change,
    sign_flip_integers,
    sign_flip_test,
    suite_tests,
    suite_verdicts,
)
from pytest_bineval.models import Evaluation, Verdict
from pytest_bineval.repeats import wilson_interval
from pytest_bineval.report.comparison import EDIT_SIMILARITY, diff_runs, similarity
from pytest_bineval.report.record import Asked, EvaluationRecord

F = Fraction


def verdict(qid: str, answer: str, *, text: str | None = None, repeats: list[str] | None = None) -> Verdict:
    return Verdict(question_id=qid, dimension="consistency", question=text or f"Question {qid}?",  # type: ignore[arg-type]
                   answer=answer, repeats=repeats or [])  # type: ignore[arg-type]


def record(test: str, verdicts: list[Verdict], output: str = "out") -> EvaluationRecord:
    ev = Evaluation(task="t", model="m", dimensions=["consistency"], verdicts=verdicts)
    return EvaluationRecord.build(Asked(output=output), ev, [], thresholds={"consistency": 0.5}, status="explicit",
                                  test=test)


def brute_force(changes: list[Fraction]) -> float:
    """The share of the sign assignments of the nonzero changes' sizes whose sum is at most the observed sum."""
    nonzero = [c for c in changes if c]
    observed = sum(changes, F(0))
    hits = sum(sum((s * abs(c) for s, c in zip(signs, nonzero, strict=True)), F(0)) <= observed
               for signs in itertools.product((1, -1), repeat=len(nonzero)))
    return hits / 2 ** len(nonzero) if nonzero else 1.0


@pytest.mark.parametrize(("changes", "p"), [
    ([F(-1)] * 3, 1 / 8),  # only the observed assignment (all -) reaches -3
    ([F(-1, 3)] * 5, 1 / 32),  # five evaluations each one question of three worse: 2^-5
    ([F(-1)] * 4, 1 / 16),  # four evaluations dropping 1.00 -> 0.00: the per-item p
    # sizes 3, 1, 1 (in thirds), observed -3 - 1 + 1 = -3: the sums of the 8 assignments are 5, 3, 3, 1, -1, -3, -3, -5
    ([F(-1), F(-1, 3), F(1, 3)], 3 / 8),
    ([F(0), F(0), F(-1)], 1 / 2),  # an evaluation without a change takes no part
    ([F(1)] * 3, 1.0),  # everything went up: every assignment is at most the observed sum
    ([], 1.0),
    ([F(0)] * 4, 1.0),
])
def test_sign_flip_hand_computed(changes: list[Fraction], p: float) -> None:
    result = sign_flip_test(changes)
    assert result.p_value == pytest.approx(p)
    assert result.exact
    assert result.changes == sum(1 for c in changes if c)


def test_sign_flip_agrees_with_brute_force_enumeration() -> None:
    rng = random.Random(7)
    for _ in range(120):
        changes = [F(rng.randint(-4, 4), rng.choice([1, 2, 3, 4, 6, 9])) for _ in range(rng.randint(1, 10))]
        assert sign_flip_test(changes).p_value == pytest.approx(brute_force(changes), abs=1e-12), changes


def test_count_at_most_is_the_subset_sum_count() -> None:
    rng = random.Random(3)
    for _ in range(100):
        values = [rng.randint(0, 7) for _ in range(rng.randint(0, 9))]
        limit = rng.randint(-2, sum(values) + 2)
        expected = sum(sum(s) <= limit for r in range(len(values) + 1) for s in itertools.combinations(values, r))
        assert count_at_most(values, limit) == expected


def test_sign_flip_with_equal_sizes_is_the_sign_test() -> None:
    """With every change of one size, the sum only counts the negative ones: the binomial sign test."""
    from scipy.stats import binomtest

    for n, negative in [(10, 8), (13, 4), (20, 15), (30, 20)]:
        changes = [F(-1, 3)] * negative + [F(1, 3)] * (n - negative)
        expected = binomtest(n - negative, n, 0.5, alternative="less").pvalue
        assert sign_flip_test(changes).p_value == pytest.approx(expected, rel=1e-9)


def test_sign_flip_agrees_with_scipy_permutation_test() -> None:
    """scipy's paired permutation test (exact for a few samples) on the evaluations' scores before and after (as
    counts of yes of 3 questions, so that scipy's floats compare ties exactly)."""
    import numpy as np
    from scipy.stats import permutation_test

    rng = random.Random(11)
    for _ in range(5):
        before = [rng.randint(0, 3) for _ in range(9)]
        after = [rng.randint(0, 3) for _ in range(9)]
        res = permutation_test((np.array(after), np.array(before)), lambda x, y, axis: np.sum(x - y, axis=axis),
                               permutation_type="samples", alternative="less", n_resamples=np.inf)
        ours = sign_flip_test([F(a - b, 3) for a, b in zip(after, before, strict=True)]).p_value
        assert ours == pytest.approx(res.pvalue, rel=1e-9)


def test_monte_carlo_agrees_with_the_exact_count_and_is_seeded() -> None:
    rng = random.Random(5)
    changes = [F(rng.randint(-5, 3), 7) for _ in range(40)]
    exact = sign_flip_test(changes)
    mc = sign_flip_test(changes, exact_bits=0, seed=1)
    assert exact.exact and not mc.exact and mc.draws > 0
    assert mc.p_value == pytest.approx(exact.p_value, abs=0.01)
    assert sign_flip_test(changes, exact_bits=0, seed=1) == mc
    assert mc.p_value >= 1 / (1 + mc.draws)  # never 0


def test_integers_and_fractions_agree() -> None:
    changes = [F(-2, 3), F(1, 3), F(-1), F(0), F(-1, 3)]
    assert sign_flip_integers([-2, 1, -3, 0, -1]) == sign_flip_test(changes)


# -- clustering ------------------------------------------------------------------------------------------------------

def test_paired_change_is_the_mean_of_the_questions_rates() -> None:
    assert paired_change([(1, 1, 0, 1), (1, 1, 1, 1), (0, 1, 0, 1)]) == F(-1, 3)
    assert paired_change([(3, 3, 1, 3)]) == F(-2, 3)  # three repeats are one rate, 1.00 -> 0.33
    assert paired_change([(1, 1, 2, 3), (0, 0, 1, 1)]) == F(-1, 3)  # a question not answered in one run is left out
    assert paired_change([]) is None


def _suite(evaluations: int, questions: int, repeats: int, flipped: int) -> list[list[Pair]]:
    """``flipped`` of ``evaluations`` evaluations whose every question went from all yes to all no."""
    return [[(repeats, repeats, 0 if i < flipped else repeats, repeats)] * questions for i in range(evaluations)]


def test_repeats_and_questions_of_one_evaluation_are_one_observation() -> None:
    """The issue's example: 4 items x 3 runs all flipped is p = 1/16 (per item), not 1/4096 (pooled answers); and
    five questions of one evaluation failing together count once."""
    for questions, repeats in [(1, 1), (1, 3), (5, 1), (5, 3), (20, 5)]:
        [test] = suite_tests({"groundedness": _suite(4, questions, repeats, 4)}, shares=1)
        assert test.test.p_value == pytest.approx(1 / 16)
        assert test.mean == pytest.approx(-1.0)


def test_unchanged_evaluations_do_not_dilute_nor_strengthen_the_test() -> None:
    """Evaluations with no change take no part in the sign flips: 4 of 13 dropping is still 1/16; the mean
    change is over all 13."""
    [test] = suite_tests({"groundedness": _suite(13, 3, 1, 4)}, shares=1)
    assert test.test.p_value == pytest.approx(1 / 16)
    assert test.mean == pytest.approx(-4 / 13)


# -- Holm ------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("p", "adjusted"), [
    ([0.01, 0.04, 0.03], [0.03, 0.06, 0.06]),  # 3 x 0.01; max(0.03, 2 x 0.03); max(0.06, 1 x 0.04)
    ([0.01, 0.02, 0.03, 0.04], [0.04, 0.06, 0.06, 0.06]),
    ([0.5, 0.001], [0.5, 0.002]),
    ([0.04, 0.03], [0.06, 0.06]),  # 2 x 0.03, then 1 x 0.04 is lifted to the earlier step's 0.06 (monotone)
    ([0.9, 0.8], [1.0, 1.0]),  # 2 x 0.8 is capped at 1
    ([0.3], [0.3]),
    ([], []),
])
def test_holm_hand_computed(p: list[float], adjusted: list[float]) -> None:
    assert holm(p) == pytest.approx(adjusted)


def test_holm_controls_the_family_wise_error() -> None:
    """Four dimensions with no change, 4000 simulated families of uniform p-values: a rejection at 0.05 in at
    most 5% of them (Holm is exact for independent uniforms at the first step: 1 - 0.9875^4 = 4.9%)."""
    rng = random.Random(2)
    families = 4000
    rejected = sum(min(holm([rng.random() for _ in range(4)])) < 0.05 for _ in range(families))
    assert rejected / families <= 0.05 + 0.01


# -- the smallest detectable drop and the verdicts --------------------------------------------------------------------

def _noisy(evaluations: int, questions: int, noise: float, seed: int) -> list[list[Pair]]:
    rng = random.Random(seed)
    out = []
    for _ in range(evaluations):
        ps = [1 - noise if rng.random() < 0.8 else noise for _ in range(questions)]
        out.append([(int(rng.random() < p), 1, int(rng.random() < p), 1) for p in ps])
    return out


def test_detectable_drop_shrinks_with_the_suite_and_is_seeded() -> None:
    small = detectable_drop(_noisy(13, 3, 0.1, 1), 0.0125)
    large = detectable_drop(_noisy(200, 8, 0.1, 1), 0.0125)
    assert small is not None and large is not None
    assert large < MEANINGFUL_DROP < small
    assert detectable_drop(_noisy(13, 3, 0.1, 1), 0.0125) == small


def test_detectable_drop_of_a_deterministic_judge_needs_enough_evaluations() -> None:
    """No change and a judge that never varies: every change is 0. A drop must still touch at least 7 evaluations
    for the test to reject at 0.0125 at all (2^-7 = 0.0078), so 13 evaluations x 3 questions cannot see 10 points
    (3.9 question flips); 200 evaluations see a drop of a few points."""
    steady = [[(1, 1, 1, 1)] * 3 for _ in range(13)]
    drop = detectable_drop(steady, 0.0125)
    assert drop is not None and drop > MEANINGFUL_DROP
    big = detectable_drop([[(1, 1, 1, 1)] * 3 for _ in range(200)], 0.0125)
    assert big is not None and big <= 0.03


def test_a_suite_with_no_room_to_fall_has_no_detectable_drop() -> None:
    assert detectable_drop([[(0, 1, 0, 1)] * 3] * 50, 0.0125) is None
    assert detectable_drop([], 0.0125) is None


def test_suite_verdicts_regressed_no_detectable_change_and_uninformative() -> None:
    dims = {
        "groundedness": _suite(12, 3, 1, 10),  # 10 of 12 evaluations lost every question: p = 2^-10
        "tone": _noisy(200, 8, 0.1, 4),  # a large suite with no change
        "helpfulness": [[(1, 1, 1, 1)] * 3 for _ in range(12)],  # a small steady suite with no change
    }
    verdicts = {v.dimension: v for v in suite_verdicts(dims, alpha=0.05)}
    g = verdicts["groundedness"]
    assert g.verdict == "regressed" and g.p_value == pytest.approx(2 ** -10)
    assert g.p_adjusted == pytest.approx(min(1.0, 2 * 3 * 2 ** -10))  # Holm's first step x3, the gate's half x2
    assert g.change == pytest.approx(-10 / 12) and g.detectable is None
    assert verdicts["tone"].verdict == "no detectable change"
    assert verdicts["tone"].detectable is not None and verdicts["tone"].detectable <= MEANINGFUL_DROP
    assert verdicts["tone"].detectable_at == pytest.approx(0.05 / 2 / 3)
    h = verdicts["helpfulness"]
    assert h.verdict == "uninformative" and h.detectable is not None and h.detectable > MEANINGFUL_DROP
    assert h.p_value == 1.0 and h.evaluations == 12 and h.questions == 36


def test_a_significant_drop_within_the_tolerance_is_not_a_regression() -> None:
    dims = {"d": [[(1, 1, 0, 1)] + [(1, 1, 1, 1)] * 19 for _ in range(12)]}  # every evaluation 5 points down
    [v] = suite_verdicts(dims, tolerance=0.10)
    assert v.p_value == pytest.approx(2 ** -12)
    assert v.verdict != "regressed"
    [v] = suite_verdicts(dims, tolerance=0.0)
    assert v.verdict == "regressed"


# -- the comparison: flips and the suite, in diff_runs ------------------------------------------------------------

def test_diff_runs_examines_flips_and_tests_the_suite() -> None:
    """Twelve evaluations lose every question (p = 2^-12 over the evaluations, x2 for the gate's two questions);
    each yes -> no flip of a changed output is pending (re-asking decides it), one of an unchanged output is the
    judge's noise, one a code check decided is a regression without re-asking."""
    base = [record(f"t::c{i}", [verdict(f"q{j}", "yes") for j in range(3)], output="was") for i in range(12)]
    now = [record(f"t::c{i}", [verdict(f"q{j}", "no") for j in range(3)], output="now") for i in range(12)]
    now[0] = record("t::c0", [verdict(f"q{j}", "no") for j in range(3)], output="was")  # same output
    base[1].verdicts[0] = base[1].verdicts[0].model_copy(update={"decided_by": "code"})
    now[1].verdicts[0] = now[1].verdicts[0].model_copy(update={"decided_by": "code"})
    report = diff_runs(base, now, baseline="base.json")
    assert {c.flip.status for _, c in report.flips() if c.flip} == {"pending", "same input", "code check"}
    assert len(report.flips("same input")) == 3 and len(report.flips("code check")) == 1
    assert len(report.flips("pending")) == 36 - 3 - 1
    (suite,) = report.suite
    assert (suite.name, suite.verdict, suite.evaluations, suite.questions) == ("consistency", "regressed", 12, 36)
    assert suite.p_value == pytest.approx(2 ** -12) and suite.p_adjusted == pytest.approx(2 * 2 ** -12)
    assert (suite.before, suite.after, suite.change) == (1.0, 0.0, -1.0)
    assert [d.key for d in report.regressed_cases()] == ["t::c1"]  # the code check; the others are pending
    reason = report.fail_reason() or ""
    assert reason.startswith("1 case regressed (confirmed): t::c1; consistency regressed across the suite (p = ")
    assert "32 flipped questions could not be confirmed vs baseline base.json" in reason
    # a flipped evaluation keeps both outputs for the reviewer; one without a flip keeps neither
    assert (report.compared[2].output, report.compared[2].baseline_output) == ("now", "was")


def test_the_suite_question_of_a_few_flips_is_uninformative_not_within_noise() -> None:
    """The issue's failure: 4 of 13 evaluations lose their groundedness questions. The suite-level test cannot
    reach significance on 4 changed evaluations (p = 1/16, adjusted 1/8); it says the suite cannot detect a
    10-point drop instead of calling it noise -- the per-case question is the one that answers."""
    base = [record(f"t::c{i}", [verdict(f"q{j}", "yes") for j in range(3)], output="was") for i in range(13)]
    now = [record(f"t::c{i}", [verdict(f"q{j}", "no" if i < 4 else "yes") for j in range(3)],
                  output="now" if i < 4 else "was") for i in range(13)]
    (suite,) = diff_runs(base, now).suite
    assert suite.p_value == pytest.approx(1 / 16)
    assert suite.verdict == "uninformative" and suite.detectable is not None and suite.detectable > MEANINGFUL_DROP


def test_a_flip_with_a_changed_judge_is_re_asked_even_on_the_same_output() -> None:
    from pytest_bineval.report.record import JudgedBy

    base = [record("t::a", [verdict("q0", "yes")], output="same")]
    now = [record("t::a", [verdict("q0", "no")], output="same")]
    assert diff_runs(base, now).flips()[0][1].flip.status == "same input"  # type: ignore[union-attr]
    judged = (JudgedBy(model="m1"), JudgedBy(model="m2"))
    assert diff_runs(base, now, judged=judged).flips()[0][1].flip.status == "pending"  # type: ignore[union-attr]


def test_wilson_interval_of_a_confirmed_question() -> None:
    # 5 yes of 5: center = (1 + z^2/10) / (1 + z^2/5) = 1.384146 / 1.768291 = 0.782759; half = z/(1 + z^2/5) *
    # sqrt(0 + z^2/100) = 1.108393 * 0.195996 = 0.217241: [0.565518, 1]
    low, high = wilson_interval(5, 5) or (0.0, 0.0)
    assert (low, high) == (pytest.approx(0.565518, abs=1e-5), pytest.approx(1.0))


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
