"""The real embedded judge under ``-n 2``, SIGTERM to the process group (a CI cancel) while tests still run: the
report, HTML page and JUnit hold the evaluations that finished (issue 33 item 11; the scripted runs are in
tests/plugin/test_sigterm.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from support import REAL_CHECKLIST, report_of, terminate_after

pytest_plugins = ["pytester"]

SUITE = '''
import json
import time

import pytest
from pytest_bineval import Checklist, assert_passes

CHECKLIST = Checklist.model_validate(json.loads(%r))
ARTICLE = "The bridge over the Tamar opened in 1961 and carries 40,000 cars a day."

@pytest.mark.parametrize("i", range(2))
def test_judged(i):
    assert_passes(f"The Tamar bridge opened in 1961 ({i}).", "consistency", source=ARTICLE, checklist=CHECKLIST,
                  threshold=0.0)

@pytest.mark.parametrize("i", range(2))
def test_slow(i):
    time.sleep(600)
'''


@pytest.mark.local_model
def test_sigterm_to_a_real_judge_run_under_xdist_keeps_what_finished(pytester: pytest.Pytester) -> None:
    import json

    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_real=SUITE % json.dumps(REAL_CHECKLIST))
    code, text = terminate_after(pytester, 2, group=True, wait=600)
    assert code == pytest.ExitCode.INTERRUPTED, text
    report = report_of(pytester)
    assert report.partial_reason == "interrupted (SIGTERM)", text
    assert sorted(r.test for r in report.evaluations) == ["test_real.py::test_judged[0]",
                                                          "test_real.py::test_judged[1]"]
    assert all(len(r.verdicts) == 3 for r in report.evaluations) and report.totals.llm_calls >= 6
    assert "test_judged[1]" in (pytester.path / "report.html").read_text(encoding="utf-8")
    cases = {c.get("name") for c in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")}
    assert cases >= {"test_judged[0]", "test_judged[1]"}, text
