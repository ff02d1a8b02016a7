"""The real embedded judge under ``-n 2``, SIGTERM to the process group (a CI cancel) while tests still run: the
report, HTML page and JUnit hold the evaluations that finished (issue 33 item 11; the scripted runs are in
tests/plugin/test_sigterm.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest
from support import REAL_CHECKLIST, report_of

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
    log = (pytester.path / "out.txt").open("wb")
    proc = pytester.popen([sys.executable, "-u", "-m", "pytest", "-p", "xdist", "-n", "2", "-v",
                           "--bineval-cache=off", "--bineval-report=report.json", "--bineval-html=report.html",
                           "--junitxml=junit.xml"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def passed() -> int:
        return (pytester.path / "out.txt").read_text(encoding="utf-8", errors="replace").count(" PASSED ")

    try:
        deadline = time.monotonic() + 600  # a bound on the wait, not a timing assertion
        while passed() < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert proc.poll() is None and passed() == 2, "the run never got that far"
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    text = (pytester.path / "out.txt").read_text(encoding="utf-8", errors="replace")
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, text
    report = report_of(pytester)
    assert report.partial_reason == "interrupted (SIGTERM)", text
    assert sorted(r.test for r in report.evaluations) == ["test_real.py::test_judged[0]",
                                                          "test_real.py::test_judged[1]"]
    assert all(len(r.verdicts) == 3 for r in report.evaluations) and report.totals.llm_calls >= 6
    assert "test_judged[1]" in (pytester.path / "report.html").read_text(encoding="utf-8")
    cases = {c.get("name") for c in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")}
    assert cases >= {"test_judged[0]", "test_judged[1]"}, text
