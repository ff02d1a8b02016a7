"""What a run counts, in the summary and the reports: judge errors, requests and cache hits of unknown cost, tests
that errored before any evaluation, and the evaluations of attempts a re-run replaced."""

from __future__ import annotations

import pytest
from support import PASS_AND_FAIL, Q, make_project, report_of

pytest_plugins = ["pytester"]


def test_summary_counts_evaluations_that_ended_in_a_judge_error(pytester: pytest.Pytester) -> None:
    """Bug: 'N (P passed, F below threshold)' left out the evaluations that ended in a judge error."""
    make_project(pytester, boom=(Q.format("fluency", 2),))
    pytester.makepyfile(PASS_AND_FAIL)
    result = pytester.runpytest("--bineval-retries=0")  # a 503 is retried after a backoff: not the subject
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["evaluations: 2 (0 passed, 0 below threshold, 2 judge error), *judge errors: 2*"])


def test_cache_hits_never_make_an_unknown_cost_known(pytester: pytest.Pytester) -> None:
    """Review finding: a cache hit costs $0, and adding it to a request of unknown cost showed '$0.0000'."""
    make_project(pytester)
    pytester.makepyfile(PASS_AND_FAIL)
    first = pytester.runpytest("--color=no")
    first.stdout.fnmatch_lines(["evaluations: 2 *requests: *, cache hits: *, cost: unknown"])
    # one output changed: its question is a new request of unknown price, the other verdicts are cache hits
    pytester.makepyfile(PASS_AND_FAIL.replace("A fine summary.", "Another fine summary."))
    mixed = pytester.runpytest("--color=no", "--bineval-report=report.json")
    mixed.stdout.fnmatch_lines(["evaluations: 2 *requests: *, cache hits: *, cost: unknown"])
    totals = report_of(pytester).totals
    assert totals.llm_calls == totals.unpriced_requests > 0 and totals.cache_hits > 0
    # nothing sent: nothing paid
    cached = pytester.runpytest("--color=no")
    cached.stdout.fnmatch_lines(["evaluations: 2 *requests: 0, cache hits: *, cost: $0.0000"])


UNSCORED = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize the article.")
def test_scored():
    assert_passes("s", dimension="fluency")

def test_no_task():
    assert_passes("s", dimension="fluency")
'''


def test_a_test_that_errors_before_any_evaluation_is_in_the_totals_and_reports(
        pytester: pytest.Pytester) -> None:
    """Bug: a test with no task, or a pin error under --bineval-strict, left no record: the JSON and HTML
    totals and the summary counted only the scored tests, as if the others had not run."""
    make_project(pytester)
    pytester.makepyfile(test_unscored=UNSCORED)
    result = pytester.runpytest("--bineval-report=report.json", "--bineval-html=report.html")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([
        "*bineval summary*",
        "NOT SCORED test_unscored.py::test_no_task: NoTaskError: pytest-bineval needs the task*",
        "PASS test_unscored.py::test_scored*",
        "evaluations: 1 (1 passed*",
        "tests not scored: 1 (errored before any evaluation)",
    ])
    doc = report_of(pytester)
    assert doc.totals.unscored_tests == 1 and doc.totals.evaluations == 1
    assert [(u.test, u.error) for u in doc.unscored] == [("test_unscored.py::test_no_task", "NoTaskError")]
    html = (pytester.path / "report.html").read_text()
    assert 'id="total-unscored">1<' in html and "test_unscored.py::test_no_task" in html

    result = pytester.runpytest("--bineval-strict", "--bineval-report=report.json")
    result.assert_outcomes(errors=2)
    assert sorted((u.test, u.error) for u in report_of(pytester).unscored) == [
        ("test_unscored.py::test_no_task", "NoTaskError"), ("test_unscored.py::test_scored", "PinError")]
    result.stdout.fnmatch_lines(["tests not scored: 2 (errored before any evaluation)"])


FLAKY = '''
import pathlib
import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize the article.")
def test_flaky():
    attempts = pathlib.Path("attempts")
    first = not attempts.exists()
    attempts.write_text("x")
    assert_passes("s", dimension="fluency", threshold=0.9 if first else 0.5)  # 0.50: below, then at threshold
'''


def test_a_rerun_keeps_the_last_attempts_records_and_counts_the_others(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bug: under pytest-rerunfailures every attempt's records stayed (a test that passed on its re-run showed
    a BELOW THRESHOLD evaluation) and the test stayed among the failed ones (a GitHub error annotation)."""
    pytest.importorskip("pytest_rerunfailures")
    make_project(pytester, no=(Q.format("fluency", 2),))
    pytester.makepyfile(test_flaky=FLAKY)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "summary.md"))
    result = pytester.runpytest("-p", "rerunfailures", "--reruns=1", "--bineval-report=report.json")
    assert result.parseoutcomes() == {"passed": 1, "rerun": 1}
    doc = report_of(pytester)
    assert [r.outcome for r in doc.evaluations] == ["passed"]
    assert doc.totals.rerun_evaluations == 1 and doc.totals.evaluations == 1
    assert doc.totals.cache_hits == 2  # the re-run's answers came from the cache: counted, not hidden
    out = result.stdout.str()
    assert "BELOW THRESHOLD" not in out and "::error" not in out
    result.stdout.fnmatch_lines(["re-runs: 1 evaluation of earlier attempts replaced by the last attempt's*"])


def test_a_run_of_unscored_tests_only_reaches_every_output(pytester: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Found in review: the bineval_checklist fixture's missing task was pytest's UsageError (not counted), and
    the GitHub job summary was written only when some test had been scored."""
    make_project(pytester)
    pytester.makepyfile(test_fixture="def test_checklist_without_a_task(bineval_checklist):\n    pass\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "summary.md"))
    result = pytester.runpytest("--bineval-report=report.json")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([
        "NOT SCORED test_fixture.py::test_checklist_without_a_task: NoTaskError: pytest-bineval needs the task*",
        "tests not scored: 1 (errored before any evaluation)",
    ])
    assert report_of(pytester).totals.unscored_tests == 1
    assert "**1 test not scored** (errored before any evaluation)." in (pytester.path / "summary.md").read_text()
