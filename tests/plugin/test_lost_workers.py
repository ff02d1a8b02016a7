"""A pytest-xdist worker that never sends its ledger (Ctrl-C, a crash): what it finished still counts. Its tests'
teardown reports carry their records and the worker's running counts; the controller keeps them until the worker's
ledger arrives, and uses them when it never does."""

from __future__ import annotations

import pytest
from support import make_project, report_of

pytest_plugins = ["pytester"]

SUITE = '''
import os

import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize the article.")
@pytest.mark.parametrize("i", range(2))
def test_judged(i):
    assert_passes(f"summary {i}", dimension="fluency", source="An article.")

def test_crash():
    os._exit(1)  # the worker dies: its session never ends, so its ledger is never sent

@pytest.mark.bineval(task="Summarize the article.")
def test_after():
    assert_passes("summary after", dimension="fluency", source="An article.")
'''


def test_a_crashed_workers_finished_evaluations_are_in_the_report(pytester: pytest.Pytester) -> None:
    """Bug: under -n 2, Ctrl-C (or a crashed worker) lost everything the workers had judged: the report said
    0 evaluations and 0 requests for a run whose tests had passed, and the summary showed nothing."""
    make_project(pytester)
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "1", "--bineval-cache=off",
                                           "--bineval-report=report.json")
    result.assert_outcomes(passed=3, failed=1)  # test_crash: "worker 'gw0' crashed while running"
    result.stdout.fnmatch_lines([
        "PASS test_suite.py::test_judged[[]0[]]: *", "PASS test_suite.py::test_judged[[]1[]]: *",
        "evaluations: 3 (3 passed, *",
        "bineval: pytest-xdist worker gw0 ended before sending its results (interrupted, or it crashed): the "
        "report counts the 2 test(s) it finished, and what it spent up to the last of them",
    ])
    report = report_of(pytester)
    assert sorted(r.test for r in report.evaluations) == [
        "test_suite.py::test_after", "test_suite.py::test_judged[0]", "test_suite.py::test_judged[1]"]
    # what gw0 spent judging its two tests is counted once, with the replacement worker's own requests
    assert report.totals.llm_calls == sum(r.usage.llm_calls for r in report.evaluations) + \
        report.checklists.usage.llm_calls
    assert report.checklists.generated == 1  # gw0's: its replacement reads it (generated once per run)


def test_workers_that_finish_are_counted_once(pytester: pytest.Pytester) -> None:
    """What a worker reported test by test is replaced by its ledger when that arrives: nothing counts twice."""
    make_project(pytester)
    pytester.makepyfile(test_suite=SUITE.replace("    os._exit(1)", "    pass"))
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "2", "--bineval-cache=off",
                                           "--bineval-report=report.json")
    result.assert_outcomes(passed=4)
    assert "ended before sending its results" not in result.stdout.str()
    report = report_of(pytester)
    assert len(report.evaluations) == 3 and not report.notes
    assert report.totals.llm_calls == sum(r.usage.llm_calls for r in report.evaluations) + \
        report.checklists.usage.llm_calls
