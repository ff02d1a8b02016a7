"""--bineval-baseline, --bineval-fail-on-regression, --bineval-repeats and --bineval-gate through pytester and the
real terminal output, with a scripted fake judge, in one process. Under ``-p xdist -n 2`` (the controller compares
the merged records with the baseline): tests/plugin/test_xdist.py's project of every feature compares with a
baseline (a regression, a new judge error, removed and not-run tests) and gets the same diff both ways; a confirmed
regression under ``-n 2`` is test_gate.py's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support import ANSWERS_FILE_RULE as ANSWER
from support import make_project

from pytest_bineval.dimensions import resolve_dimensions
from pytest_bineval.models import Evaluation, Verdict
from pytest_bineval.report.document import ReportDocument
from pytest_bineval.report.record import Asked, EvaluationRecord, text_digest
from pytest_bineval.testing.project import scripted_project

pytest_plugins = ["pytester"]

INI = """
[pytest]
bineval_model = rfake/judge
asyncio_default_fixture_loop_scope = function
"""


def Q(dim: str, i: int) -> str:  # the fake checklist writer's question text
    return f"Does the response meet {dim} check {i}?"


def project(pytester: pytest.Pytester, answers: dict[str, Any]) -> None:
    scripted_project(pytester, provider="rfake", rule=ANSWER)
    (pytester.path / "answers.json").write_text(json.dumps(answers))


def rec(test: str, verdicts: list[tuple[str, str, str, str]], *, output: str, thresholds: dict[str, float],
        index: int = 0, repeats: dict[str, list[str]] | None = None) -> EvaluationRecord:
    """A baseline record: verdicts (id, dimension, question text, answer), explanations "old <answer> <id>"."""
    vs = [Verdict(question_id=qid, dimension=dim, question=text, answer=ans,  # type: ignore[arg-type]
                  explanation=f"old {ans} {qid}", repeats=(repeats or {}).get(qid, []))  # type: ignore[arg-type]
          for qid, dim, text, ans in verdicts]
    ev = Evaluation(task="Summarize the article.", model="rfake/judge", dimensions=list(thresholds), verdicts=vs)
    return EvaluationRecord.build(Asked(output=output), ev, [], thresholds=thresholds, status="unpinned", test=test,
                                  index=index)


def write_baseline(path: Path, records: list[EvaluationRecord]) -> None:
    ReportDocument(created="2026-11-30T12:00:00+00:00", evaluations=records).write(path)


def line_of(path: Path, needle: str) -> int:
    return next(i for i, text in enumerate(path.read_text().splitlines(), 1) if needle in text)


# ------------------------------------------------------------------------------------------------------------
# The full diff: a regression, a fix, a judge error, added/removed questions and tests, changed and unchanged
# outputs, the GitHub job summary and annotations. The test file sits in a directory whose name has a comma,
# and the "no" explanation carries characters that workflow commands and markdown must escape.
DIR = "we,ird"
SUITE = '''
import pytest
from pytest_bineval import BinevalAssertionError, assert_passes

pytestmark = pytest.mark.bineval(task="Summarize the article.")

def test_a():
    assert_passes("output a", dimension=["consistency", "fluency"], threshold=0.5)

def test_b():
    assert_passes("output b new", dimension="consistency")

def test_c():
    assert_passes("output c", dimension="fluency")

def test_d():
    assert_passes("output d", dimension="consistency")

def test_new():
    assert_passes("output new", dimension="fluency")

def test_expected():  # the failure is what this test expects: it passes, and GitHub hears nothing of it
    with pytest.raises(BinevalAssertionError):
        assert_passes("output e", dimension="fluency")
'''
TRICKY = "50% off, see: <b>bold</b> | and\nmore"
ANSWERS = {
    f"output a|{Q('consistency', 1)}": {"answer": "no", "explanation": TRICKY},
    f"output c|{Q('fluency', 1)}": "no",
    f"output c|{Q('fluency', 2)}": "no",
    f"output d|{Q('consistency', 2)}": "boom",
    f"output e|{Q('fluency', 1)}": "no",
}


def full_baseline(path: Path) -> None:
    t = f"{DIR}/test_suite.py::"
    c1, c2, c3 = Q("consistency", 1), Q("consistency", 2), Q("consistency", 3)
    f1, f2 = Q("fluency", 1), Q("fluency", 2)
    write_baseline(path, [
        # a: consistency-1 yes -> no (regression, same output, its assertion still passes); fluency-2 is new
        rec(t + "test_a", [("consistency-1", "consistency", c1, "yes"), ("consistency-2", "consistency", c2, "yes"),
                           ("fluency-1", "fluency", f1, "yes")],
            output="output a", thresholds={"consistency": 0.5, "fluency": 0.5}),
        # b: another output; consistency-2 no -> yes (fix); consistency-1 had another id; consistency-3 is gone
        rec(t + "test_b", [("consistency-9", "consistency", c1, "yes"), ("consistency-2", "consistency", c2, "no"),
                           ("consistency-3", "consistency", c3, "yes")],
            output="output b old", thresholds={"consistency": 0.8}),
        # c: failed before and fails now, same answers
        rec(t + "test_c", [("fluency-1", "fluency", f1, "no"), ("fluency-2", "fluency", f2, "no")],
            output="output c", thresholds={"fluency": 0.7}),
        # d: consistency-2 yes -> judge error
        rec(t + "test_d", [("consistency-1", "consistency", c1, "yes"), ("consistency-2", "consistency", c2, "yes")],
            output="output d", thresholds={"consistency": 0.8}),
        rec(t + "test_gone", [("fluency-1", "fluency", f1, "yes")], output="gone", thresholds={"fluency": 0.7}),
    ])


def test_baseline_diff_section_report_and_github(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project(pytester, ANSWERS)
    (pytester.path / DIR).mkdir()
    suite = pytester.path / DIR / "test_suite.py"
    suite.write_text(SUITE)
    full_baseline(pytester.path / "base.json")
    summary_file = pytester.path / "step_summary.md"
    summary_file.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary_file))
    monkeypatch.setenv("GITHUB_WORKSPACE", str(pytester.path.parent))
    result = pytester.runpytest("--color=no", "--bineval-baseline=base.json", "--bineval-report=report.json",
                                "--bineval-retries=0")  # test_d's 503: no backoff waits
    result.assert_outcomes(passed=4, failed=1, errors=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    t = f"{DIR}/test_suite.py::"
    result.stdout.fnmatch_lines([
        "*= bineval regressions =*",
        "baseline: base.json (2026-11-30T12:00:00+00:00, pytest-bineval *)",
        "SUITE consistency: uninformative (*",
        "SUITE fluency: uninformative (*",
        f"UNSTABLE FLIP {t}test_a [[]consistency[]] {Q('consistency', 1)}: yes -> no (same output and source; "
        "judge noise: same input)",
        f"JUDGE ERROR {t}test_d [[]consistency[]] {Q('consistency', 2)}: yes -> error (same output and source)",
        "    cause: *provider exploded: 503*",
        "    was: old yes consistency-2",
        f"FIX {t}test_b [[]consistency[]] {Q('consistency', 2)}: no -> yes (output changed)",
        "    was: old no consistency-2",  # no "now:": a yes is not explained (--bineval-explain failing)
        f"SCORE DROP {t}test_a: consistency 1.00 -> 0.50 (-0.50, tolerance 0.00)",
        f"score change {t}test_b: consistency 0.67 -> 1.00 (+0.33)",
        f"QUESTIONS ADDED {t}test_a (1):",
        f"    [[]fluency[]] fluency-2: {Q('fluency', 2)}",
        f"QUESTIONS REMOVED {t}test_b (1):",
        f"    [[]consistency[]] consistency-3: {Q('consistency', 3)}",
        f"TEST ADDED {t}test_expected (failed)",
        f"TEST ADDED {t}test_new (passed)",
        f"TEST REMOVED {t}test_gone (was passed in the baseline)",
        "questions matched by text (id changed): 1, by id (text edited slightly): 0, replaced (same id, other text): "
        "0, not matched (asked in one run only): 2",
        "outputs: 1 changed, 3 unchanged and judged again, of 4 compared evaluations",
        "*= bineval summary =*",
    ])
    result.stdout.fnmatch_lines([
        "vs baseline base.json: 0 cases regressed (confirmed), 0 confirmed flips, 1 flip of the judge's noise, 0 "
        "flips unsettled, 0 dimensions regressed across the suite; 1 regression, 0 unstable flips, 1 fix, 1 new "
        "judge error, 1 score drop beyond tolerance 0.00; 4 evaluations compared, 2 added, 1 removed, 0 not run",
    ])
    assert "session failed" not in result.stdout.str()  # no --bineval-fail-on-regression
    # the JSON report keeps the section and the counts
    doc = ReportDocument.load(pytester.path / "report.json")
    assert doc.regressions is not None
    assert [d.key for d in doc.regressions.compared] == [t + n for n in ("test_a", "test_b", "test_c", "test_d")]
    assert [(c.kind, c.question_id) for d in doc.regressions.compared for c in d.changes] == [
        ("regression", "consistency-1"), ("fix", "consistency-2"), ("judge error", "consistency-2")]
    assert (doc.totals.regressions, doc.totals.fixes, doc.totals.new_judge_errors, doc.totals.score_drops) == (
        1, 1, 1, 1)
    assert not doc.regressions.failed
    # GitHub: workflow commands at the assert_passes lines, path relative to GITHUB_WORKSPACE, escaped
    out = result.stdout.lines
    file_prop = f"{pytester.path.name}/we%2Cird/test_suite.py"
    line_c = line_of(suite, '"output c"')
    line_d = line_of(suite, '"output d"')
    assert (f"::error file={file_prop},line={line_c},title=bineval%3A {DIR.replace(',', '%2C')}/test_suite.py%3A%3A"
            f"test_c below threshold::fluency 0.00 < 0.70%0A[fluency] {Q('fluency', 1)} -> no: scripted no for: "
            f"{Q('fluency', 1)}%0A[fluency] {Q('fluency', 2)} -> no: scripted no for: {Q('fluency', 2)}") in out
    errors = [ln for ln in out if ln.startswith("::error ")]
    assert len(errors) == 2
    assert any(ln.startswith(f"::error file={file_prop},line={line_d},title=bineval%3A judge error in ")
               and "provider exploded" in ln for ln in errors)
    assert not [ln for ln in out if ln.startswith("::warning ")]  # test_a's flip: the same input, the judge's noise
    # the job summary is appended: the failing and regressed tests, escaped, and the totals
    md = summary_file.read_text()
    assert md.startswith("earlier step\n## bineval\n")
    assert "**6 evaluations**: 3 passed, 2 below threshold, 1 judge error." in md
    assert ("Against the baseline `base.json`: 1 regression, 0 unstable flips, 1 fix, 1 new judge error, 1 score "
            "drop beyond tolerance 0.00; 2 added, 1 removed.") in md
    blocks = [ln for ln in md.splitlines() if ln.startswith("### ")]
    assert blocks == [f"### {DIR}/test\\_suite.py::test\\_a: passed", f"### {DIR}/test\\_suite.py::test\\_c: below "
                      "threshold", f"### {DIR}/test\\_suite.py::test\\_d: judge error", "### Totals"]
    assert "| consistency | 0.50 | 0.09-0.91 | 0.50 | 1.00 (-0.50) | pass |" in md  # 1 yes of 2
    assert "| fluency | 0.00 | 0.00-0.66 | 0.70 | 0.00 | **fail** |" in md
    assert (f"- **regression** \\[consistency\\] {Q('consistency', 1)}: yes → no (judge noise: same input); now: "
            "50% off, see: &lt;b&gt;bold&lt;/b&gt; \\| and more; was: old yes consistency-1") in md
    assert "- no confirmed regression (1 flip of the judge's noise)" in md  # the outcome, as every output says it
    assert f"- \\[fluency\\] {Q('fluency', 1)} → no: scripted no for: {Q('fluency', 1)}" in md
    assert "Tests added: we,ird/test\\_suite.py::test\\_expected, we,ird/test\\_suite.py::test\\_new.  " in md
    totals = md.splitlines()[md.splitlines().index("### Totals") + 4]
    assert totals.startswith("| 6 | 14 | ") and totals.endswith(" | 1 | 6 |")
    assert not [ln for ln in out if ln.startswith("::") and "test_expected" in ln]  # a test that passed


# ------------------------------------------------------------------------------------------------------------
GREEN = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize the article.")
def test_a():
    assert_passes("output a", dimension="consistency", threshold=0.5)
'''


def green_baseline(path: Path, test: str, verdicts: list[tuple[str, str, str, str]]) -> None:
    write_baseline(path, [rec(test, verdicts, output="output a", thresholds={"consistency": 0.5})])


def test_a_regression_fails_the_session_only_with_fail_on_regression(pytester: pytest.Pytester) -> None:
    project(pytester, {Q("consistency", 1): "no"})
    pytester.makepyfile(test_green=GREEN)
    green_baseline(pytester.path / "base.json", "test_green.py::test_a",
                   [("consistency-1", "consistency", Q("consistency", 1), "yes"),
                    ("consistency-2", "consistency", Q("consistency", 2), "yes")])
    plain = pytester.runpytest("--color=no", "--bineval-baseline=base.json")
    plain.assert_outcomes(passed=1)
    assert plain.ret == pytest.ExitCode.OK
    plain.stdout.fnmatch_lines(["UNSTABLE FLIP test_green.py::test_a *",
                                "vs baseline base.json: * 1 regression, *"])
    # the flip of the same output is the judge's noise: the bare option acts on confirmed regressions only
    noise = pytester.runpytest("--color=no", "--bineval-baseline=base.json", "--bineval-fail-on-regression")
    assert noise.ret == pytest.ExitCode.OK
    noise.stdout.fnmatch_lines(["UNSTABLE FLIP test_green.py::test_a [[]consistency] *: yes -> no (same output "
                                "and source; judge noise: same input)",
                                "SCORE DROP test_green.py::test_a: consistency 1.00 -> 0.50 (-0.50, tolerance "
                                "0.00)"])
    gated = pytester.runpytest("--color=no", "--bineval-baseline=base.json", "--bineval-fail-on-regression=any",
                               "--bineval-regression-tolerance=0.9")
    gated.assert_outcomes(passed=1)  # every test passed ...
    assert gated.ret == pytest.ExitCode.TESTS_FAILED  # ... and the regression fails the session, tolerance or not
    gated.stdout.fnmatch_lines([
        "bineval: session failed: 1 regression vs baseline base.json (--bineval-fail-on-regression=any)",
    ])


TWO = GREEN + '''

@pytest.mark.bineval(task="Summarize the article.")
def test_b():
    assert_passes("output b", dimension="consistency", threshold=0.0)
'''


def test_a_score_drop_fails_beyond_the_tolerance_only(pytester: pytest.Pytester) -> None:
    # No answer flips; consistency-2 is now asked and answered no. test_a: the baseline asked consistency-1 only
    # (yes): 1.00 -> 0.50. test_b: the baseline also asked consistency-3 (yes), not asked now: 0.67 -> 0.50.
    project(pytester, {Q("consistency", 2): "no"})
    pytester.makepyfile(test_green=TWO)
    c1, c2, c3 = Q("consistency", 1), Q("consistency", 2), Q("consistency", 3)
    write_baseline(pytester.path / "base.json", [
        rec("test_green.py::test_a", [("consistency-1", "consistency", c1, "yes")], output="output a",
            thresholds={"consistency": 0.5}),
        rec("test_green.py::test_b", [("consistency-1", "consistency", c1, "yes"),
                                      ("consistency-2", "consistency", c2, "no"),
                                      ("consistency-3", "consistency", c3, "yes")],
            output="output b", thresholds={"consistency": 0.0})])
    args = ("--color=no", "--bineval-baseline=base.json", "--bineval-fail-on-regression=any")
    # the default tolerance, 0: both drops count
    strict = pytester.runpytest(*args)
    assert strict.ret == pytest.ExitCode.TESTS_FAILED
    strict.stdout.fnmatch_lines([
        "SCORE DROP test_green.py::test_a: consistency 1.00 -> 0.50 (-0.50, tolerance 0.00)",
        "SCORE DROP test_green.py::test_b: consistency 0.67 -> 0.50 (-0.17, tolerance 0.00)",
        "bineval: session failed: 2 score drops beyond tolerance 0.00 vs baseline base.json *",
    ])
    # tolerance 0.4: test_a's drop of 0.50 counts, test_b's 0.17 does not; the page marks test_a only
    between = pytester.runpytest(*args, "--bineval-regression-tolerance=0.4", "--bineval-html=page.html")
    between.assert_outcomes(passed=2)
    assert between.ret == pytest.ExitCode.TESTS_FAILED
    between.stdout.fnmatch_lines([
        "SCORE DROP test_green.py::test_a: consistency 1.00 -> 0.50 (-0.50, tolerance 0.40)",
        "score change test_green.py::test_b: consistency 0.67 -> 0.50 (-0.17)",
        "vs baseline base.json: *; 0 regressions, 0 unstable flips, 0 fixes, 0 new judge errors, 1 score drop beyond "
        "tolerance 0.40; *",
        "bineval: session failed: 1 score drop beyond tolerance 0.40 vs baseline base.json *",
    ])
    page = (pytester.path / "page.html").read_text(encoding="utf-8")
    rows = re.findall(r'<tr class="test .*? data-regressed="(\d)".*?<span class="tn">([^<]+)</span>', page, re.DOTALL)
    assert sorted(rows) == [("0", "test_b"), ("1", "test_a")]
    # tolerance 0.5: a drop of exactly the tolerance is not counted; nothing fails the session
    tolerant = pytester.runpytest(*args, "--bineval-regression-tolerance=0.5")
    tolerant.assert_outcomes(passed=2)
    assert tolerant.ret == pytest.ExitCode.OK
    tolerant.stdout.fnmatch_lines([
        "score change test_green.py::test_a: consistency 1.00 -> 0.50 (-0.50)",
        "vs baseline base.json: *; 0 regressions, 0 unstable flips, 0 fixes, 0 new judge errors, 0 score drops *",
    ])
    assert "session failed" not in tolerant.stdout.str()


def test_ini_baseline_and_report_of_the_same_file(pytester: pytest.Pytester) -> None:
    """bineval_baseline in the ini; the run's report may overwrite its own baseline (read first, written last)."""
    project(pytester, {})
    pytester.makeini(INI + "bineval_baseline = base.json\nbineval_fail_on_regression = true\n")
    pytester.makepyfile(test_green=GREEN)
    green_baseline(pytester.path / "base.json", "test_green.py::test_a",
                   [("consistency-1", "consistency", Q("consistency", 1), "no")])
    result = pytester.runpytest("--color=no", "--bineval-report=base.json")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([f"FIX test_green.py::test_a [[]consistency[]] {Q('consistency', 1)}: no -> yes *"])
    doc = ReportDocument.load(pytester.path / "base.json")
    assert doc.regressions is not None and doc.totals.fixes == 1
    assert doc.evaluations[0].output_digest == text_digest("output a")
    again = pytester.runpytest("--color=no", "--bineval-report=base.json")
    again.stdout.fnmatch_lines(["outputs: 0 changed, 1 unchanged and judged again, of 1 compared evaluation",
                                "vs baseline base.json: *; 0 regressions, 0 unstable flips, 0 fixes, *"])


@pytest.mark.parametrize(("content", "message"), [
    (None, "ERROR: --bineval-baseline missing.json: there is no such file (*missing.json; a relative path is "
     "relative to the rootdir). A baseline is the --bineval-report file of an earlier run: write it with "
     "--bineval-report=PATH on the run to compare with (e.g. on main), then pass that file"),
    ("{not json", "ERROR: --bineval-baseline: cannot read the bineval report *missing.json*"),
    ('{"format": 7}', "*missing.json: unknown bineval report format 7*"),
    ('{"format": 2, "evaluations": [{"test": 3}]}', "*missing.json: not a valid bineval report*"),
])
def test_an_unreadable_baseline_is_a_usage_error_naming_the_file(pytester: pytest.Pytester, content: str | None,
                                                                 message: str) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")  # no fake judge: no litellm
    pytester.makepyfile("def test_x(): pass")
    if content is not None:
        (pytester.path / "missing.json").write_text(content)
    result = pytester.runpytest("--bineval-baseline=missing.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_regression_options_are_validated_and_listed(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile("def test_x(): pass")
    for option, message in (("--bineval-regression-tolerance=2", "*tolerance is a score difference within*"),
                            ("--bineval-gate=median", "*invalid choice: 'median'*"),
                            ("--bineval-github=maybe", "*invalid choice: 'maybe'*"),
                            ("--bineval-repeats=0", "*must be >= 1*"),
                            ("--bineval-alpha=0", "*alpha is a significance level within (0, 1], not 0.0*"),
                            ("--bineval-fail-on-regression=some", "*invalid choice: 'some'*")):
        result = pytester.runpytest(option)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([message])
    pytester.runpytest("--help").stdout.fnmatch_lines([
        "*--bineval-repeats=K*", "*--bineval-baseline=PATH*", "*--bineval-fail-on-regression*", "*--bineval-alpha=A*",
        "*--bineval-regression-tolerance=D*", "*--bineval-gate=GATE*", "*--bineval-github=MODE*",
    ])


# ------------------------------------------------------------------------------------------------------------
# Repeats: consistency-1 alternates no/yes/no across its three repeats (majority no, agreement 2/3), consistency-2
# is always yes: 4 yes of 6 answers -> 0.67, Wilson [0.30, 0.90]; fluency is always yes: 6 of 6 -> [0.61, 1.00].
REPEATED = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize the article.")
def test_r():
    assert_passes("output r", dimension=["consistency", "fluency"], threshold=0.6)
'''


def test_repeats_agreement_unstable_list_interval_and_gate(pytester: pytest.Pytester) -> None:
    project(pytester, {f"output r|{Q('consistency', 1)}": ["no", "yes", "no"],
                       f"output r|{Q('consistency', 2)}": "yes"})
    pytester.makepyfile(test_rep=REPEATED)
    result = pytester.runpytest("--color=no", "--bineval-repeats=3", "--bineval-report=report.json")
    result.assert_outcomes(passed=1)  # gate mean: 0.67 >= 0.60
    result.stdout.fnmatch_lines([
        "PASS test_rep.py::test_r: consistency 0.67 [[]0.30, 0.90[]] >= 0.60, fluency 1.00 [[]0.61, 1.00[]] >= 0.60",
        "unstable questions (1): the repeats of the judge gave both answers",
        f"    test_rep.py::test_r [[]consistency[]] {Q('consistency', 1)}: no (1 of 3 yes)",
        "evaluations: 1 *questions: 4, *",
    ])
    doc = ReportDocument.load(pytester.path / "report.json")
    (ev,) = doc.evaluations
    # 4 questions x 3 repeats answered, and the 2 repeats that said no explained (--bineval-explain failing)
    assert ev.repeats == 3 and ev.usage.llm_calls + ev.usage.cache_hits == 12 + 2
    by_id = {v.question_id: v for v in ev.verdicts}
    assert by_id["consistency-1"].answer == "no" and by_id["consistency-1"].agreement == pytest.approx(2 / 3)
    assert sorted(by_id["consistency-1"].repeats) == ["no", "no", "yes"]
    assert by_id["consistency-2"].repeats == ["yes"] * 3 and by_id["consistency-2"].agreement == 1.0
    consistency = ev.dimensions[0]
    assert (consistency.score, consistency.answers) == (pytest.approx(4 / 6), 6)
    assert (consistency.low, consistency.high) == (pytest.approx(0.29999, abs=5e-5), pytest.approx(0.90324, abs=5e-5))
    assert [(u.key, u.question_id, sorted(u.answers)) for u in doc.unstable] == [
        ("test_rep.py::test_r", "consistency-1", ["no", "no", "yes"])]
    assert doc.totals.unstable_questions == 1 and doc.settings.repeats == 3
    # gate lower-bound: 0.30 < 0.60 fails, with the interval in the message; all replies now come from the cache
    gated = pytester.runpytest("--color=no", "--bineval-repeats=3", "--bineval-gate=lower-bound")
    gated.assert_outcomes(failed=1)
    gated.stdout.fnmatch_lines([
        "*consistency: 0.67 over 6 answers, 95% interval [[]0.30, 0.90[]]; lower bound 0.30 (threshold 0.60) FAIL",
        "*fluency: 1.00 over 6 answers, 95% interval [[]0.61, 1.00[]]; lower bound 0.61 (threshold 0.60) ok",
        f"*-> no (1 of 3 yes): scripted no for: {Q('consistency', 1)}",
    ])
    gated.stdout.fnmatch_lines(["BELOW THRESHOLD test_rep.py::test_r: consistency 0.67 [[]0.30, 0.90[]] lower "
                                "bound 0.30 < 0.60, fluency 1.00 [[]0.61, 1.00[]] lower bound 0.61 >= 0.60"])


def test_repeat_zero_keeps_the_cache_of_a_single_run(pytester: pytest.Pytester) -> None:
    project(pytester, {})
    pytester.makepyfile(test_rep=REPEATED)
    pytester.runpytest("--bineval-report=once.json").assert_outcomes(passed=1)
    pytester.runpytest("--bineval-repeats=2", "--bineval-report=twice.json").assert_outcomes(passed=1)
    once = ReportDocument.load(pytester.path / "once.json").evaluations[0].usage
    twice = ReportDocument.load(pytester.path / "twice.json").evaluations[0].usage
    assert (once.llm_calls, once.cache_hits) == (4, 0)
    assert (twice.llm_calls, twice.cache_hits) == (4, 4)  # repeat 0 from the cache, repeat 1 asked anew


def test_unstable_flip_is_reported_apart_from_a_stable_regression(pytester: pytest.Pytester) -> None:
    project(pytester, {f"output r|{Q('consistency', 1)}": ["no", "yes", "no"],
                       f"output r|{Q('consistency', 2)}": "no"})
    pytester.makepyfile(test_rep=REPEATED.replace("threshold=0.6", "threshold=0.0"))
    c1, c2, f1, f2 = Q("consistency", 1), Q("consistency", 2), Q("fluency", 1), Q("fluency", 2)
    write_baseline(pytester.path / "base.json", [rec(
        "test_rep.py::test_r",
        [("consistency-1", "consistency", c1, "yes"), ("consistency-2", "consistency", c2, "yes"),
         ("fluency-1", "fluency", f1, "yes"), ("fluency-2", "fluency", f2, "yes")],
        output="output r", thresholds={"consistency": 0.0, "fluency": 0.0},
        repeats={"consistency-1": ["yes", "yes", "no"], "consistency-2": ["yes", "yes", "yes"]})])
    result = pytester.runpytest("--color=no", "--bineval-repeats=3", "--bineval-baseline=base.json",
                                "--bineval-fail-on-regression=any", "--bineval-regression-tolerance=1")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        f"REGRESSION test_rep.py::test_r [[]consistency[]] {c2}: yes -> no (same output and source; judge noise: "
        "same input)",
        "    answers now: no no no; in the baseline: yes yes yes",
        f"UNSTABLE FLIP test_rep.py::test_r [[]consistency[]] {c1}: yes -> no (same output and source; judge "
        "noise: same input)",
        "    answers now: *; in the baseline: yes yes no",
        "*= bineval summary =*",
        "PASS test_rep.py::test_r: consistency 0.17 [[]0.03, 0.56[]] >= 0.00, fluency 1.00 [[]0.61, 1.00[]] >= 0.00",
        "unstable questions (1): the repeats of the judge gave both answers",
        f"    test_rep.py::test_r [[]consistency[]] {c1}: no (1 of 3 yes)",
        "vs baseline base.json: *; 1 regression, 1 unstable flip, 0 fixes, *",
        "bineval: session failed: 1 regression vs baseline base.json (--bineval-fail-on-regression=any)",
    ])


# ------------------------------------------------------------------------------------------------------------
# A confirmed regression: six questions of a hand-written pin, all answered yes about the baseline's output and no
# about this run's (another output): re-asking keeps the first flip, so the case regressed; one test of the
# baseline is deselected with -k: not run, not removed.
SIG = '''
import pytest
from pytest_bineval import assert_passes

pytestmark = pytest.mark.bineval(task="Summarize the article.")

def test_s():
    assert_passes("output s", dimension="consistency", threshold=0.0)

def test_other():
    assert_passes("output o", dimension="consistency", threshold=0.0)
'''
SIX = [f"Does the summary keep fact {i} of the article?" for i in range(1, 7)]


def test_a_confirmed_regression_fails_the_session_and_a_deselected_test_is_not_run(pytester: pytest.Pytester) -> None:
    project(pytester, {f"output s|{q}": "no" for q in SIX})  # the baseline's output ("output s was") gets yes
    pytester.makepyfile(test_sig=SIG)
    pin = pytester.path / "__bineval__" / "test_sig" / "test_s.json"
    pin.parent.mkdir(parents=True)
    pin.write_text(json.dumps({"format": 2, "checklists": [{
        "task": "Summarize the article.", "dimensions": resolve_dimensions("consistency"),
        "questions": [{"id": f"consistency-{i}", "dimension": "consistency", "text": q} for i, q in enumerate(SIX, 1)],
        "tests": ["test_s"]}]}))
    write_baseline(pytester.path / "base.json", [
        rec("test_sig.py::test_s", [(f"consistency-{i}", "consistency", q, "yes") for i, q in enumerate(SIX, 1)],
            output="output s was", thresholds={"consistency": 0.0}),
        rec("test_sig.py::test_other", [("consistency-1", "consistency", Q("consistency", 1), "yes")],
            output="output o", thresholds={"consistency": 0.0})])
    result = pytester.runpytest("--color=no", "--bineval-baseline=base.json", "--bineval-fail-on-regression",
                                "-k", "not test_other")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # 6 flips at alpha / 2 = 0.025: each at 0.025 / 6; 10 asks of each output, 2 against the flip allowed: a steady
    # judge decides after 8 of each
    result.stdout.fnmatch_lines([
        "REGRESSED test_sig.py::test_s: output changed",
        f"  [[]consistency] {SIX[0]}: yes -> no (confirmed; re-asked: now no no no no no no no no; baseline yes yes "
        "yes yes yes yes yes yes)",
        f"  [[]consistency] {SIX[1]}: yes -> no (not re-asked: another flip of the case was confirmed)",
        "SUITE consistency: uninformative (1.00 -> 0.00 over 1 evaluation, p = 1; *)",
        "SCORE DROP test_sig.py::test_s: consistency 1.00 -> 0.00 (-1.00, tolerance 0.00)",
        "tests not run (1): in the baseline, not run this time (deselected, another subset, skipped or deleted): "
        "test_sig.py::test_other",
        "confirmation of flips: 6 flips to confirm by re-asking about both runs (at most 10 asks of each, 2 "
        "against the flip allowed; *): 16 fresh asks, 16 requests, 0 cache hits, *",
        "vs baseline base.json: 1 case regressed (confirmed), 1 confirmed flip, *; 1 evaluation compared, 0 added, 0 "
        "removed, 1 not run",
        "bineval: session failed: 1 case regressed (confirmed): test_sig.py::test_s vs baseline base.json "
        "(--bineval-fail-on-regression)",
    ])
    assert "TEST REMOVED" not in result.stdout.str()
    # a stricter alpha: 9 asks of each, 1 against the flip allowed; the re-asks come from the cache
    strict = pytester.runpytest("--color=no", "--bineval-baseline=base.json", "--bineval-fail-on-regression",
                                "--bineval-alpha=0.01", "-k", "not test_other")
    assert strict.ret == pytest.ExitCode.TESTS_FAILED
    strict.stdout.fnmatch_lines(["confirmation of flips: 6 flips to confirm by re-asking about both runs (at most 9 "
                                 "asks of each, 1 against the flip allowed; *): 16 fresh asks, 0 requests, 16 cache "
                                 "hits*"])


def test_fail_on_regression_without_a_baseline_says_nothing_was_compared(pytester: pytest.Pytester) -> None:
    project(pytester, {})
    pytester.makepyfile(test_green=GREEN)
    result = pytester.runpytest("--color=no", "--bineval-fail-on-regression")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["bineval: --bineval-fail-on-regression without --bineval-baseline: nothing was "
                                 "compared"])
    assert "bineval regressions" not in result.stdout.str()


INTERRUPTED = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize the article.")
def test_a_first():
    assert_passes("A fine summary.", dimension="fluency")

def test_b_interrupt():
    raise KeyboardInterrupt

@pytest.mark.bineval(task="Summarize the article.")
def test_c_never_runs():
    assert_passes("Another summary.", dimension="fluency")
'''


def test_an_interrupted_run_is_marked_partial_and_refused_as_baseline(pytester: pytest.Pytester,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    make_project(pytester)
    pytester.makepyfile(test_cut=INTERRUPTED)
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = pytester.runpytest("--color=no", "--bineval-report=report.json", "--bineval-html=report.html",
                                "--bineval-github=on", no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["bineval: partial run (interrupted*): the report covers only the tests that ran*"])
    data = ReportDocument.load(pytester.path / "report.json")
    assert data.partial and data.partial_reason is not None and "interrupted" in data.partial_reason
    assert [r.test for r in data.evaluations] == ["test_cut.py::test_a_first"]
    assert "Partial run" in (pytester.path / "report.html").read_text()
    assert "**Partial run**" in summary.read_text()

    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    refused = pytester.runpytest("--bineval-baseline=report.json", "-k", "a_first")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*--bineval-baseline report.json is the report of a partial run (interrupted*"
                                  "--bineval-allow-partial-baseline*"])
    allowed = pytester.runpytest("--bineval-baseline=report.json", "--bineval-allow-partial-baseline",
                                 "-k", "a_first")
    allowed.assert_outcomes(passed=1)


def test_a_run_stopped_by_maxfail_is_partial_and_a_complete_run_is_not(pytester: pytest.Pytester) -> None:
    make_project(pytester, no=(Q("fluency", 1),))
    pytester.makepyfile(test_stop='''
        import pytest
        from pytest_bineval import assert_passes

        @pytest.mark.bineval(task="Summarize the article.")
        @pytest.mark.parametrize("i", range(3))
        def test_fails(i):
            assert_passes(f"summary {i}", dimension="fluency")
    ''')
    pytester.runpytest("-x", "--bineval-report=cut.json").assert_outcomes(failed=1)
    cut = ReportDocument.load(pytester.path / "cut.json")
    assert cut.partial and cut.partial_reason == "stopping after 1 failures"
    pytester.runpytest("--bineval-report=full.json").assert_outcomes(failed=3)
    full = ReportDocument.load(pytester.path / "full.json")
    assert not full.partial and full.partial_reason is None
