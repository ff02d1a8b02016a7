"""Under ``-n 2`` an unpinned checklist is generated once per run, not once per worker: the first worker to need it
generates it under a lock named by its key, the other waits and reads it (issue 33 item 16)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import make_project, report_of

pytest_plugins = ["pytester"]

SUITE = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize the article.")
@pytest.mark.parametrize("i", range(6))
def test_judged(i):
    assert_passes(f"summary {i}", dimension="fluency", source="An article.")
'''

# every generation the engine starts, by worker, counted outside pytest-bineval; slowed so that both workers want
# the checklist while the first is still generating it. Undone when the run ends: the runs are in-process (the
# module patched is this test process's own).
COUNTER = '''

import asyncio as _asyncio
import os as _os
import pathlib as _pathlib

import pytest_bineval.checklist as _checklist

_generate_for = _checklist.generate_for


async def _counted(*args, **kwargs):
    with open(_pathlib.Path(__file__).parent / "generations.log", "a") as fh:
        fh.write(_os.environ.get("PYTEST_XDIST_WORKER", "main") + "\\n")
    await _asyncio.sleep(1.0)
    return await _generate_for(*args, **kwargs)


_checklist.generate_for = _counted


def pytest_unconfigure(config):
    _checklist.generate_for = _generate_for
'''


def _project(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    conftest = pytester.path / "conftest.py"
    conftest.write_text(conftest.read_text(encoding="utf-8") + COUNTER, encoding="utf-8")
    pytester.makepyfile(test_suite=SUITE)


def test_two_workers_generate_an_unpinned_checklist_once(pytester: pytest.Pytester) -> None:
    _project(pytester)
    alone = pytester.runpytest("-p", "no:xdist", "--bineval-cache=off", "--bineval-report=alone.json")
    alone.assert_outcomes(passed=6)
    (pytester.path / "generations.log").unlink()

    result = pytester.runpytest("-p", "xdist", "-n", "2", "-v", "--bineval-cache=off", "--bineval-report=report.json")
    result.assert_outcomes(passed=6)
    out = result.stdout.str()
    assert "[gw0]" in out and "[gw1]" in out  # both workers judged tests of the task
    assert (pytester.path / "generations.log").read_text().split() in (["gw0"], ["gw1"])  # generated once
    report, single = report_of(pytester), report_of(pytester, "alone.json")
    assert report.checklists.generated == 1
    assert report.checklists.usage.llm_calls == single.checklists.usage.llm_calls  # one generation's requests
    assert len({tuple(q.question_id for q in r.verdicts) for r in report.evaluations}) == 1  # one checklist
    assert report.totals.llm_calls == single.totals.llm_calls
    assert not list((pytester.path / ".bineval_cache").glob("checklists-shared/*"))  # the run's own: removed
    import pytest_bineval.checklist

    assert pytest_bineval.checklist.generate_for.__name__ == "generate_for"  # this process's module left as it was


def test_the_second_asker_waits_for_the_first_and_reads_its_checklist(tmp_path: Path) -> None:
    """Two askers of one key at once (two workers; here two lock files opened apart, as flock sees two processes):
    one generation; another key is generated apart; a directory that cannot be written falls back to generating."""
    import asyncio

    from pytest_bineval.models import Checklist
    from pytest_bineval.shared_checklists import SharedChecklists

    made: list[str] = []

    async def generate(task: str) -> Checklist:
        made.append(task)
        await asyncio.sleep(0.3)  # the other asker arrives meanwhile
        return Checklist(task=task, dimensions={"d": "D"}, questions=[])

    async def both() -> list[tuple[Checklist, bool]]:
        first, second = SharedChecklists(tmp_path / "run"), SharedChecklists(tmp_path / "run")
        return list(await asyncio.gather(first.once(("k", 1), lambda: generate("a")),
                                         second.once(("k", 1), lambda: generate("a")),
                                         second.once(("k", 2), lambda: generate("b"))))

    (a1, new1), (a2, new2), (b, new_b) = asyncio.run(both())
    assert made == ["a", "b"] and a1 == a2 and b.task == "b"
    assert sorted([new1, new2]) == [False, True] and new_b
    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the directory would go: no sharing, no error
    checklist, generated = asyncio.run(SharedChecklists(blocked / "run").once("k", lambda: generate("c")))
    assert checklist.task == "c" and generated
