"""The real embedded judge under ``-n 2``, as a CI job runs it and cancels it: an unpinned checklist is generated once
per run, by one worker, and every evaluation of the task is judged with it (issue 33 item 16); SIGTERM to the process
group (a CI cancel) while tests still run leaves the report, HTML page and JUnit with the evaluations that finished
(issue 33 item 11). One run proves both, as one CI job meets both: each inner worker imports litellm and loads the
model, seconds of CPU a run. The scripted runs are tests/plugin/test_shared_checklists.py and test_sigterm.py."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from support import report_of, terminate_after

pytest_plugins = ["pytester"]

JUDGED = 4
SUITE = f'''
import time

import pytest
from pytest_bineval import assert_passes

ARTICLE = "The bridge over the Tamar opened in 1961 and carries 40,000 cars a day."

@pytest.mark.bineval(task="Summarize the article in one sentence.")
@pytest.mark.parametrize("i", range({JUDGED}))
def test_judged(i):
    assert_passes(f"The Tamar bridge opened in 1961 ({{i}}).", dimension="consistency", source=ARTICLE,
                  threshold=0.0)

@pytest.mark.parametrize("i", range(2))
def test_slow(i):
    time.sleep(600)
'''

COUNTER = '''
import os
import pathlib
import pytest_bineval.checklist as _checklist


def pytest_configure(config):
    """Count the generations in the workers, outside the plugin."""
    if not hasattr(config, "workerinput"):
        return
    generate_for = _checklist.generate_for

    async def counted(*args, **kwargs):
        with open(pathlib.Path(__file__).parent / "generations.log", "a") as fh:
            fh.write(os.environ.get("PYTEST_XDIST_WORKER", "main") + "\\n")
        return await generate_for(*args, **kwargs)

    _checklist.generate_for = counted
'''


@pytest.mark.local_model
def test_two_workers_generate_the_checklist_once_and_sigterm_keeps_what_finished(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makeconftest(COUNTER)
    pytester.makepyfile(test_real=SUITE)
    code, text = terminate_after(pytester, JUDGED, group=True, wait=600)
    assert code == pytest.ExitCode.INTERRUPTED, text
    assert "[gw0]" in text and "[gw1]" in text
    # the checklist: generated once, by one worker, and every evaluation judged with it
    assert len((pytester.path / "generations.log").read_text().split()) == 1, text
    report = report_of(pytester)
    assert report.checklists.generated == 1
    assert len({tuple(v.question_id for v in r.verdicts) for r in report.evaluations}) == 1
    # SIGTERM: the evaluations that finished are in every output
    assert report.partial_reason == "interrupted (SIGTERM)", text
    assert sorted(r.test for r in report.evaluations) == [f"test_real.py::test_judged[{i}]" for i in range(JUDGED)]
    assert all(r.verdicts and not r.errors() for r in report.evaluations) and report.totals.llm_calls >= 2 * JUDGED
    html = (pytester.path / "report.html").read_text(encoding="utf-8")
    assert all(f"test_judged[{i}]" in html for i in range(JUDGED))
    cases = {c.get("name") for c in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")}
    assert cases >= {f"test_judged[{i}]" for i in range(JUDGED)}, text
