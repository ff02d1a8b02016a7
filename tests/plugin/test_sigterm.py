"""SIGTERM (what CI sends on a cancel or a timeout) under ``-n 2`` ends the run as Ctrl-C does: the report, the
HTML page and pytest's JUnit are written, with every evaluation finished before the signal; the report says it is
partial. Sent to the controller alone (``kill PID``) and to the whole process group (the controller and its
workers, as a runner ending a job's processes does)."""

from __future__ import annotations

import os
import signal
import time
import xml.etree.ElementTree as ET

import pytest
from support import make_project, report_of, terminate_after

pytest_plugins = ["pytester"]

SUITE = '''
import pathlib
import time

import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize the article.")
@pytest.mark.parametrize("i", range(4))
def test_judged(i):
    assert_passes(f"summary {i}", dimension="fluency", source="An article.")
    pathlib.Path(f"done-{i}").write_text("")

@pytest.mark.parametrize("i", range(2))
def test_slow(i):
    time.sleep(300)  # a test still running when CI cancels the job
'''


@pytest.mark.parametrize("target", ["controller", "process group"])
def test_sigterm_under_xdist_writes_the_partial_report_with_the_finished_evaluations(
        pytester: pytest.Pytester, target: str) -> None:
    make_project(pytester)
    pytester.makepyfile(test_suite=SUITE)
    code, text = terminate_after(pytester, 4, group=target == "process group")
    assert code == pytest.ExitCode.INTERRUPTED, text
    report = report_of(pytester)
    assert report.partial and report.partial_reason == "interrupted (SIGTERM)", text
    assert sorted(r.test for r in report.evaluations) == [f"test_suite.py::test_judged[{i}]" for i in range(4)]
    assert "test_judged[3]" in (pytester.path / "report.html").read_text(encoding="utf-8")
    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    assert {c.get("name") for c in cases} >= {f"test_judged[{i}]" for i in range(4)}, text


def test_the_handler_is_installed_once_restored_and_leaves_anothers_alone() -> None:
    from pytest_bineval.interrupt import TermAsInterrupt

    before = signal.getsignal(signal.SIGTERM)  # this test process's pytest-bineval already installed its own
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        term = TermAsInterrupt()
        term.install()
        assert signal.getsignal(signal.SIGTERM) == term._interrupt
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler runs at the next bytecode: never reached
        assert term.received and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # a second one ends the process
        term.restore()
        mine = signal.signal(signal.SIGTERM, lambda *_: None)
        other = TermAsInterrupt()
        other.install()  # someone else's handler: left as it is
        assert not other.installed and signal.getsignal(signal.SIGTERM) is not other._interrupt
        signal.signal(signal.SIGTERM, mine)
    finally:
        signal.signal(signal.SIGTERM, before)
