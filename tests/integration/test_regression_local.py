"""--bineval-baseline and --bineval-repeats on the real embedded judge (SmolLM2-135M through llama.cpp and litellm);
the scripted judge's tests of both are tests/plugin/test_regression.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import REAL_CHECKLIST, real_judge_project

from pytest_bineval.report.document import ReportDocument
from pytest_bineval.report.record import Asked, EvaluationRecord

pytest_plugins = ["pytester"]

# The real embedded judge: a baseline run, then a run where one of two outputs changed.
REAL_SUITE = '''
import pathlib
import pytest
from pytest_bineval import assert_passes

ARTICLE = "The city of Lyon opened a new bridge on Monday. It cost 40 million euros."

@pytest.mark.bineval(task="Summarize the article in one sentence.",
                     dimensions=[{"consistency": "The summary states only facts from the article."}])
def test_real_diff():
    changing = (pathlib.Path(__file__).parent / "output.txt").read_text()
    assert_passes(changing, source=ARTICLE, threshold=0.0)
    assert_passes("Lyon opened a 40 million euro bridge on Monday.", source=ARTICLE, threshold=0.0)
'''


@pytest.mark.local_model
def test_baseline_diff_through_the_real_embedded_model(pytester: pytest.Pytester, tmp_path: Path) -> None:
    from pytest_bineval.report.comparison import classify

    real_judge_project(pytester, "test_real_diff", REAL_SUITE)
    output = pytester.path / "output.txt"
    cache = f"--bineval-cache-dir={tmp_path / 'cache'}"
    output.write_text("Lyon opened a 40 million euro bridge on Monday.")
    first = pytester.runpytest_inprocess("--bineval-strict", "--bineval-report=base.json", cache)
    first.assert_outcomes(passed=1)
    output.write_text("Paris closed an old tunnel in 1990 after a fire that cost 3 euros.")
    second = pytester.runpytest_inprocess("--color=no", "--bineval-strict", "--bineval-baseline=base.json",
                                          "--bineval-report=now.json", cache)
    second.assert_outcomes(passed=1)
    base = ReportDocument.load(pytester.path / "base.json")
    now = ReportDocument.load(pytester.path / "now.json")
    report = now.regressions
    assert report is not None and report.baseline == "base.json"
    assert [d.key for d in report.compared] == ["test_real.py::test_real_diff", "test_real.py::test_real_diff #1"]
    changed, same = report.compared
    assert changed.output_changed and not same.output_changed
    assert same.changes == [] and same.unchanged == 3  # same output, same (greedy, cached) answers
    assert now.evaluations[1].usage.llm_calls == 0  # judged again from the cache
    # every change is what the two reports' verdicts say it is, and the section prints each one
    before = {v.question_id: v for v in base.evaluations[0].verdicts}
    after = {v.question_id: v for v in now.evaluations[0].verdicts}
    assert all(v.answer in ("yes", "no") for v in [*before.values(), *after.values()])
    expected = {q: classify(before[q], after[q]) for q in after if classify(before[q], after[q])}
    assert {c.question_id: c.kind for c in changed.changes} == expected
    assert changed.unchanged == 3 - len(expected)
    for c in changed.changes:
        if c.flip is None:  # no -> yes
            second.stdout.fnmatch_lines([f"{c.kind.upper()} test_real.py::test_real_diff [[]consistency[]] "
                                         f"{c.question}: {c.before} -> {c.after} (output changed)"])
        else:  # yes -> no: re-asked about both outputs by the embedded model, which decodes greedily: it keeps
            # its answers, so each flip is confirmed (or not re-asked, once its case is)
            assert c.flip.status in ("confirmed", "skipped")
            second.stdout.fnmatch_lines([f"*[[]consistency[]] {c.question}: {c.before} -> {c.after} (*"])
    delta = changed.scores[0].delta
    assert delta == pytest.approx((now.evaluations[0].dimensions[0].score or 0)
                                  - (base.evaluations[0].dimensions[0].score or 0))
    second.stdout.fnmatch_lines(["*= bineval regressions =*",
                                 "outputs: 1 changed, 1 unchanged and judged again, of 2 compared evaluations",
                                 f"vs baseline base.json: {now.totals.regressed_cases} case* regressed (confirmed), "
                                 "*"])


@pytest.mark.local_model
def test_repeats_on_the_real_embedded_model(tmp_path: Path) -> None:
    """The embedded model is asked each question once per repeat (cached apart); greedy decoding agrees with
    itself, so nothing is unstable; repeat 0 is the single run's cache entry."""
    from pytest_bineval import DEFAULT_MODEL, Checklist, Engine, Settings

    checklist = Checklist.model_validate(REAL_CHECKLIST)
    article = "The city of Lyon opened a new bridge on Monday. It cost 40 million euros."
    summary = "Lyon opened a 40 million euro bridge on Monday."
    cache = str(tmp_path / "cache")
    repeated = Engine(Settings(model=DEFAULT_MODEL, cache_dir=cache, repeats=2))
    try:
        ev = repeated.evaluate(summary, checklist, article)
    finally:
        repeated.close()
    # 3 questions x 2 repeats, each its own entry; and each "no" explained in each repeat (explain=failing)
    noes = sum(v.answer == "no" for v in ev.verdicts)
    assert ev.usage.llm_calls == 6 + 2 * noes and ev.usage.cache_hits == 0
    assert all(len(v.repeats) == 2 and v.repeats[0] == v.repeats[1] == v.answer for v in ev.verdicts)
    assert all(v.agreement == 1.0 and not v.unstable for v in ev.verdicts)
    rec = EvaluationRecord.build(Asked(gate="lower-bound"), ev, [], thresholds={"consistency": 0.0}, status="explicit",
                                 test="t")
    (dim,) = rec.dimensions
    assert dim.answers == 6 and dim.low is not None and dim.low <= (dim.score or 0) <= (dim.high or 1)
    once = Engine(Settings(model=DEFAULT_MODEL, cache_dir=cache))
    try:
        single = once.evaluate(summary, checklist, article)
    finally:
        once.close()
    assert single.usage.llm_calls == 0 and single.usage.cache_hits == 3  # repeat 0 = the single run's key
    assert [v.answer for v in single.verdicts] == [v.answer for v in ev.verdicts]
