"""The outputs list tests by test id, not in the order they finished (or the order shards were merged): tests
defined in reverse order of their ids run (and finish) in that order, and every summary lists them sorted."""

from __future__ import annotations

import json

import pytest

from pytest_bineval.testing import scripted_project

TESTS = '''
import pytest
from pytest_bineval import assert_passes

pytestmark = pytest.mark.bineval(task="Summarize the article.")

def test_c():
    assert_passes("c", dimension="fluency")

def test_b():
    assert_passes("b", dimension="fluency", threshold=0)
    assert_passes("b again", dimension="fluency")

def test_unscored_y():
    assert_passes(123)

def test_unscored_x():
    assert_passes(123)

def test_a():
    assert_passes("a", dimension="fluency")
'''

ORDER = ["test_a", "test_b", "test_b #1", "test_c"]


def test_every_summary_lists_tests_by_id_not_by_completion(pytester: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    scripted_project(pytester, provider="orderfake", answers={"Does the response meet fluency check 1?": "no"})
    pytester.makepyfile(test_order=TESTS)
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = pytester.runpytest("--bineval-cache=off", "--bineval-report=report.json",
                                "--bineval-html=report.html", "--bineval-github=on", "-v")
    result.assert_outcomes(failed=3, errors=2)
    stdout = result.stdout.str()
    ran = [stdout.index(f"test_order.py::{name} FAILED") for name in ("test_c", "test_b", "test_a")]
    assert ran == sorted(ran)  # they ran (and finished) in the file's order: c, b, a

    report = json.loads((pytester.path / "report.json").read_text())
    assert [e["test"].split("::")[1] + (f" #{e['index']}" if e["index"] else "")
            for e in report["evaluations"]] == ORDER
    assert [u["test"] for u in report["unscored"]] == ["test_order.py::test_unscored_x",
                                                       "test_order.py::test_unscored_y"]
    terminal = stdout[stdout.index("bineval summary"):]
    failing = ["test_a", "test_b", "test_c"]
    places = [terminal.index(f"BELOW THRESHOLD test_order.py::{name}") for name in failing]
    assert places == sorted(places)
    job = summary.read_text()
    places = [job.index(f"### test\\_order.py::{name.replace('_', chr(92) + '_')}") for name in failing]
    assert places == sorted(places)
    html = (pytester.path / "report.html").read_text()
    places = [html.index(f"test_order.py::{name}") for name in ("test_a", "test_b", "test_c")]
    assert places == sorted(places)
