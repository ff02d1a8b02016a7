"""A failing ``assert_passes`` shows the user's line and bineval's message, not the event loop that ran it:
``assert_passes`` runs its coroutine with ``asyncio.run`` (or in a thread when a loop is running), whose frames
(``asyncio/runners.py``, ``base_events.py``: ~50 lines under ``--tb=long``) came before the error and read as a
crash. Checked under pytest's ``--tb`` styles, sync and async, below threshold and a judge error."""

from __future__ import annotations

import asyncio
import re

import pytest

from pytest_bineval.testing import scripted_project

RULE = '''
import json

def requirements(req):
    if "GEN-BOOM" in req.user:
        return RuntimeError("generator down")
    return json.dumps({"requirements": ["The response is well written."]})

def answer(req):
    if "boom" in req.user:
        return RuntimeError("provider exploded: 503")
    return "no"
'''

TESTS = '''
import asyncio
import pytest
from pytest_bineval import assert_passes, assert_passes_async

pytestmark = pytest.mark.bineval(task="Summarize the article.")

def test_sync():
    assert_passes("A wrong summary.", dimension="fluency", source="An article.")

def test_judge_error():
    assert_passes("boom", dimension="fluency", source="An article.")

@pytest.mark.asyncio
async def test_async():
    await assert_passes_async("A wrong summary.", dimension="fluency", source="An article.")

@pytest.mark.asyncio
async def test_sync_call_in_a_running_loop():
    assert_passes("A wrong summary.", dimension="fluency", source="An article.")

@pytest.mark.bineval(task="GEN-BOOM")
def test_bineval_checklist(bineval_checklist):
    pass
'''

LOOP_FRAMES = ("asyncio/runners.py", "asyncio/base_events.py", "concurrent/futures", "run_until_complete",
               "in run_sync", "engine.py", "threading.py")


@pytest.mark.parametrize("tb", ["auto", "long", "short"])
def test_a_failing_assertion_shows_the_users_line_and_the_message_only(pytester: pytest.Pytester, tb: str) -> None:
    scripted_project(pytester, provider="tbfake", rule=RULE, rules={"requirements": "requirements"})
    pytester.makepyfile(test_tb=TESTS)
    result = pytester.runpytest("--bineval-cache=off", "--bineval-retries=0", f"--tb={tb}", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=3, errors=2)
    text = result.stdout.str()
    failures = text[text.index("= ERRORS ="):text.index("bineval summary")]
    for frame in LOOP_FRAMES:
        assert frame not in failures, (frame, failures)
    assert "pytest_bineval/" not in failures  # no frame of the plugin: hidden, or not there
    source = pytester.path.joinpath("test_tb.py").read_text().splitlines()
    for name in ("test_sync", "test_judge_error", "test_async", "test_sync_call_in_a_running_loop"):
        line = next(n for n, text in enumerate(source, 1) if re.match(rf"(async )?def {name}\(", text)) + 1
        if tb == "short":  # the user's line, then the message
            result.stdout.fnmatch_lines([f"test_tb.py:{line}: in {name}", "    *assert_passes*",
                                         "E   *Bineval*Error: *"])
        else:
            result.stdout.fnmatch_lines([">       *assert_passes*", "E   *Bineval*Error: *", "*",
                                         f"test_tb.py:{line}: Bineval*Error"])
    result.stdout.fnmatch_lines(["E   *BinevalJudgeError: bineval: the judge (tbfake/judge) failed on 2 question(s)*"])
    # once per failing test in its traceback (the short summary's FAILED lines, shown whole when CI is set, aside)
    assert len([line for line in text.splitlines() if not line.startswith("FAILED ")
                and "BinevalAssertionError: bineval: output scored below threshold" in line]) == 3


def test_an_error_from_inside_the_engine_keeps_the_frames_that_say_where() -> None:
    """Only the frames that ran the coroutine go: those from the coroutine to the raise stay (a bug shows where)."""
    from pytest_bineval.assertions import _from_coroutine
    from pytest_bineval.engine import run_sync

    def deep() -> None:
        raise ValueError("here")

    async def main() -> None:
        await asyncio.sleep(0)
        deep()

    try:
        run_sync(main())
    except ValueError as exc:
        names = []
        tb = _from_coroutine(exc.__traceback__, main)
        while tb is not None:
            names.append(tb.tb_frame.f_code.co_name)
            tb = tb.tb_next
    assert names == ["main", "deep"]

    async def not_run() -> None:
        pass
    try:
        run_sync(main())
    except ValueError as exc:  # a coroutine not in the traceback: unchanged
        assert _from_coroutine(exc.__traceback__, not_run) is exc.__traceback__
