"""The baseline diff, repeat aggregation and Wilson intervals as pure functions (no pytest run, no model)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_bineval.models import Evaluation, Verdict
from pytest_bineval.repeats import combine_repeats, combine_verdicts, wilson_interval
from pytest_bineval.report.comparison import diff_runs, match_questions
from pytest_bineval.report.document import ReportDocument, Totals
from pytest_bineval.report.record import Asked, EvaluationRecord


def verdict(qid: str, answer: str, *, dim: str = "consistency", text: str | None = None,
            repeats: list[str] | None = None, explanation: str = "", error: str | None = None) -> Verdict:
    return Verdict(question_id=qid, dimension=dim, question=text or f"Question {qid}?", answer=answer,  # type: ignore[arg-type]
                   explanation=explanation, error=error, repeats=repeats or [])  # type: ignore[arg-type]


def record(test: str, verdicts: list[Verdict], *, output: str = "out", thresholds: dict[str, float] | None = None,
           index: int = 0, gate: Any = "mean") -> EvaluationRecord:
    dims = list(dict.fromkeys(v.dimension for v in verdicts)) or ["consistency"]
    ev = Evaluation(task="t", model="m", dimensions=dims, verdicts=verdicts)
    return EvaluationRecord.build(Asked(output=output, gate=gate), ev, [],
                                  thresholds=thresholds or {d: 0.5 for d in dims}, status="explicit", test=test,
                                  index=index)


# -- Wilson intervals, checked against values computed by hand ------------------------------------------------
# center = (p + z²/2n) / (1 + z²/n), half = z / (1 + z²/n) * sqrt(p(1-p)/n + z²/4n²), z = 1.959964
@pytest.mark.parametrize(("yes", "n", "low", "high"), [
    (2, 4, 0.15004, 0.84996),   # p = .5: center .5, half = 1.959964/1.960364 * sqrt(.0625 + .060025) = .34996
    (5, 6, 0.43649, 0.96994),   # center 1.153455/1.640243 = .703223, half = 1.194920 * .223215 = .266724
    (0, 3, 0.0, 0.56151),       # center .640243/2.280485 = .280749 = half
    (3, 3, 0.43849, 1.0),
    (1, 2, 0.09453, 0.90547),
    (8, 10, 0.49016, 0.94332),
])
def test_wilson_interval_hand_computed(yes: int, n: int, low: float, high: float) -> None:
    interval = wilson_interval(yes, n)
    assert interval is not None
    assert interval[0] == pytest.approx(low, abs=5e-5)
    assert interval[1] == pytest.approx(high, abs=5e-5)


def test_wilson_interval_without_answers_and_bad_counts() -> None:
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError, match="within"):
        wilson_interval(4, 3)


# -- repeats ----------------------------------------------------------------------------------------------------
def test_combined_verdict_is_the_majority_no_on_a_tie_and_error_when_any_repeat_failed() -> None:
    yes2 = combine_verdicts([verdict("q", "yes", explanation="a"), verdict("q", "no", explanation="b"),
                             verdict("q", "yes", explanation="c")])
    assert (yes2.answer, yes2.repeats, yes2.agreement, yes2.explanation) == ("yes", ["yes", "no", "yes"], 2 / 3, "a")
    assert yes2.unstable
    tie = combine_verdicts([verdict("q", "yes"), verdict("q", "no", explanation="the no")])
    assert (tie.answer, tie.agreement, tie.explanation) == ("no", 0.5, "the no")
    failed = combine_verdicts([verdict("q", "yes"), verdict("q", "error", error="503")])
    assert (failed.answer, failed.error, failed.repeats) == ("error", "503", ["yes", "error"])
    stable = combine_verdicts([verdict("q", "no"), verdict("q", "no")])
    assert stable.agreement == 1.0 and not stable.unstable


def test_scores_and_intervals_count_every_repeat() -> None:
    runs = [Evaluation(task="t", model="m", dimensions=["consistency"],
                       verdicts=[verdict("c1", a1), verdict("c2", "yes")]) for a1 in ("yes", "no", "yes")]
    combined = combine_repeats(runs)
    assert combined.scores["consistency"] == pytest.approx(5 / 6)  # 5 yes of 2 questions x 3 repeats
    rec = EvaluationRecord.build(Asked(), combined, [], thresholds={"consistency": 0.8}, status="explicit", test="t")
    (dim,) = rec.dimensions
    assert (dim.answers, round(dim.low or 0, 4), round(dim.high or 0, 4)) == (6, 0.4365, 0.9699)
    assert rec.repeats == 3 and rec.outcome == "passed"  # gate mean: 0.83 >= 0.80
    gated = EvaluationRecord.build(Asked(gate="lower-bound"), combined, [], thresholds={"consistency": 0.8},
                                   status="explicit", test="t")
    assert gated.outcome == "failed"  # gate lower-bound: 0.44 < 0.80
    assert [v.question_id for v in rec.unstable()] == ["c1"]


def test_repeats_of_different_checklists_are_refused() -> None:
    a = Evaluation(task="t", model="m", dimensions=["consistency"], verdicts=[verdict("c1", "yes")])
    b = Evaluation(task="t", model="m", dimensions=["consistency"], verdicts=[verdict("c2", "yes")])
    with pytest.raises(ValueError, match="same questions"):
        combine_repeats([a, b])


# -- the diff ---------------------------------------------------------------------------------------------------
def test_questions_match_by_id_and_text_then_text_then_id() -> None:
    # "does it name c?" vs "does it name c at all?": difflib ratio 2 * 15 / 37 = 0.81, a small edit
    before = [verdict("c1", "yes", text="A?"), verdict("c9", "yes", text="B?"),
              verdict("c3", "yes", text="Does it name C?"), verdict("c4", "yes", text="D?")]
    after = [verdict("c1", "yes", text="A?"), verdict("c2", "yes", text="b?"),
             verdict("c3", "yes", text="Does it name C at all?"), verdict("c5", "no", text="E?")]
    pairs, by_text, by_id, added, removed = match_questions(before, after)
    assert [(b.question_id, a.question_id) for b, a in pairs] == [("c1", "c1"), ("c9", "c2"), ("c3", "c3")]
    assert (by_text, by_id) == (1, 1)
    assert [v.question_id for v in added] == ["c5"] and [v.question_id for v in removed] == ["c4"]


def test_diff_of_two_runs_every_kind() -> None:
    base = [
        record("t::a", [verdict("c1", "yes", explanation="was fine"), verdict("c2", "no", explanation="was bad"),
                        verdict("c3", "yes"), verdict("c4", "error", error="timeout")]),
        record("t::a", [verdict("c1", "yes", repeats=["yes", "yes", "no"])], index=1),
        record("t::gone", [verdict("c1", "yes")]),
    ]
    now = [
        record("t::a", [verdict("c1", "no", explanation="now wrong"), verdict("c2", "yes", explanation="now good"),
                        verdict("c3", "error", error="503"), verdict("c4", "yes")], output="changed"),
        record("t::a", [verdict("c1", "no", repeats=["no", "no", "yes"])], index=1),
        record("t::new", [verdict("c1", "yes")]),
    ]
    report = diff_runs(base, now, baseline="base.json", tolerance=0.1)
    assert [d.key for d in report.compared] == ["t::a", "t::a #1"]
    assert [e.key for e in report.added] == ["t::new"] and [e.key for e in report.removed] == ["t::gone"]
    first, second = report.compared
    kinds = [(c.kind, c.question_id, c.before, c.after) for c in first.changes]
    assert kinds == [("regression", "c1", "yes", "no"), ("judge error", "c3", "yes", "error"),
                     ("fix", "c2", "no", "yes"), ("recovered", "c4", "error", "yes")]
    regression = first.changes[0]
    assert (regression.explanation, regression.baseline_explanation) == ("now wrong", "was fine")
    assert first.changes[1].explanation == "503"
    assert first.output_changed and not second.output_changed
    # the unstable question's flip is not a regression
    assert [(c.kind, c.repeats, c.baseline_repeats) for c in second.changes] == [
        ("unstable flip", ["no", "no", "yes"], ["yes", "yes", "no"])]
    # scores: 2/3 -> 2/3 for the first (errors do not count), 2/3 -> 1/3 for the second (a drop of 1/3 > 0.1)
    (s1,) = first.scores
    (s2,) = second.scores
    assert (s1.before, s1.after, s1.delta) == (pytest.approx(2 / 3), pytest.approx(2 / 3), pytest.approx(0))
    assert s2.delta == pytest.approx(-1 / 3)
    assert [(d.key, s.name) for d, s in report.score_drops()] == [("t::a #1", "consistency")]
    # the yes -> no flips: one of a changed output, pending until re-asked (pytest_bineval.gate), one of the same
    # output (and source, task, question, judge): the judge's noise; a pending flip is unsettled, which fails the gate
    assert [(d.key, c.flip.status) for d, c in report.flips() if c.flip] == [("t::a", "pending"),
                                                                           ("t::a #1", "same input")]
    assert report.fail_reason() == ("1 flipped question could not be confirmed vs baseline base.json "
                                    "(--bineval-fail-on-regression)")
    assert diff_runs(base, now, baseline="base.json", tolerance=0.1, fail_on="any").fail_reason() == (
        "1 regression and 1 score drop beyond tolerance 0.10 vs baseline base.json (--bineval-fail-on-regression=any)")
    totals = Totals.of(now, now[0].usage, regressions=report)
    assert (totals.regressions, totals.unstable_flips, totals.fixes, totals.new_judge_errors, totals.score_drops,
            totals.unstable_questions) == (1, 1, 1, 1, 1, 1)
    assert (totals.regressed_cases, totals.confirmed_flips, totals.noise_flips, totals.unsettled_flips,
            totals.regressed_dimensions) == (0, 0, 1, 1, 0)


def test_tolerance_is_inclusive_and_nothing_changed_means_no_reason() -> None:
    base = [record("t::a", [verdict("c1", "yes")])]
    now = [record("t::a", [verdict("c1", "yes"), verdict("c2", "no")])]  # a new question: 1.0 -> 0.5
    assert diff_runs(base, now, tolerance=0.5, fail_on="any").fail_reason() is None
    assert "1 score drop beyond tolerance 0.49" in (diff_runs(base, now, tolerance=0.49, fail_on="any").fail_reason()
                                                    or "")
    same = diff_runs(base, base)
    assert same.fail_reason() is None and same.compared[0].unchanged == 1 and not same.compared[0].changes


def test_report_with_a_regression_section_round_trips(tmp_path: Any) -> None:
    base = [record("t::a", [verdict("c1", "yes")])]
    now = [record("t::a", [verdict("c1", "no", repeats=["no", "yes", "no"])])]
    doc = ReportDocument(evaluations=now, regressions=diff_runs(base, now, baseline="b.json"))
    doc.write(tmp_path / "r.json")
    back = ReportDocument.load(tmp_path / "r.json")
    assert back == doc
    assert back.regressions is not None and back.regressions.changes("unstable flip")
    assert back.evaluations[0].verdicts[0].agreement is None  # built directly, not combined: no agreement
