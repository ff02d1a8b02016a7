"""The real embedded judge under ``-n 2``: an unpinned checklist is generated once per run, by one worker, and
every evaluation of the task is judged with it (issue 33 item 16; the scripted run is in
tests/plugin/test_shared_checklists.py)."""

from __future__ import annotations

import pytest
from support import report_of

pytest_plugins = ["pytester"]

SUITE = '''
import pytest
from pytest_bineval import assert_passes

ARTICLE = "The bridge over the Tamar opened in 1961 and carries 40,000 cars a day."

@pytest.mark.bineval(task="Summarize the article in one sentence.")
@pytest.mark.parametrize("i", range(4))
def test_summary(i):
    assert_passes(f"The Tamar bridge opened in 1961 ({i}).", dimension="consistency", source=ARTICLE,
                  threshold=0.0)
'''

COUNTER = '''
import os
import pathlib
import pytest_bineval.checklist as _checklist


def pytest_configure(config):
    """Count the generations in the workers only: the controller runs in the test's own process (pytester's
    in-process run), whose pytest_bineval.checklist must stay as it is."""
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
def test_two_workers_of_the_real_judge_generate_the_checklist_once(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makeconftest(COUNTER)
    pytester.makepyfile(test_real=SUITE)
    result = pytester.runpytest_inprocess("-p", "xdist", "-n", "2", "-v", "--bineval-cache=off",
                                          "--bineval-report=report.json")
    result.assert_outcomes(passed=4)
    out = result.stdout.str()
    assert "[gw0]" in out and "[gw1]" in out
    assert len((pytester.path / "generations.log").read_text().split()) == 1
    report = report_of(pytester)
    assert report.checklists.generated == 1
    assert len({tuple(v.question_id for v in r.verdicts) for r in report.evaluations}) == 1
