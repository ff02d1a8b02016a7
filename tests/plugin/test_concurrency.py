"""pytest-bineval under concurrency, through pytester and the real terminal output: pytest-xdist workers pinning
the checklist of one task, and ``assert_passes`` called from threads a test starts."""

from __future__ import annotations

import json

import pytest

from pytest_bineval.report.document import ReportDocument

pytest_plugins = ["pytester"]


# A checklist writer that writes new questions at every call (a name of its process and a counter in each
# question's text), so that two workers, or two generations in one worker, never write the same checklist; the
# judge says "no" to the questions that contain a text listed in NO.
CONFTEST = '''
import itertools, json, uuid
from pytest_bineval.testing import ScriptedModel

WRITER = uuid.uuid4().hex[:8]  # this process (this run, in-process)
CALLS = itertools.count(1)
NO = {no!r}

def questions(req):
    n = next(CALLS)
    return json.dumps({{"questions": [
        {{"requirement": f"{{req.dimension}} requirement {{i}}",
          "question": f"Does the response meet {{req.dimension}} check {{i}} (writer {{WRITER}}, call {{n}})?",
          "no_example": "A response that fails."}}
        for i in (1, 2)
    ]}})

def answer(req):
    return "no" if any(part in req.question for part in NO) else "yes"

FAKE = ScriptedModel(provider="cfake", answers=answer, rules={{"questions": questions}}).register()
'''
INI = """
[pytest]
bineval_model = cfake/judge
asyncio_default_fixture_loop_scope = function
"""


def project(pytester: pytest.Pytester, *, no: tuple[str, ...] = ()) -> None:
    pytester.makeconftest(CONFTEST.format(no=set(no)))
    pytester.makeini(INI)


def report_of(pytester: pytest.Pytester) -> ReportDocument:
    return ReportDocument.load(pytester.path / "report.json")


# -- pytest-xdist workers pinning one task's checklist -------------------------------------------------------------
SHARED_TASK = '''
import time
import pytest
from pytest_bineval import assert_passes

@pytest.mark.parametrize("i", range(8))
@pytest.mark.bineval(task="Summarize the article.")
def test_case(i):
    time.sleep(0.05)  # both workers run some of the cases
    assert_passes(f"summary {i}", dimension="fluency")
'''


def test_xdist_workers_judge_every_test_of_a_pin_with_the_pinned_checklist(pytester: pytest.Pytester) -> None:
    """Bug: each worker wrote its own checklist of the task and the last write won, listing every test under it,
    so the tests of the other worker had been judged with questions the pin does not have."""
    project(pytester)
    pytester.makepyfile(test_shared=SHARED_TASK)
    result = pytester.runpytest("-p", "xdist", "-n", "2", "--bineval-update-checklists",
                                "--bineval-cache=off", "--bineval-report=report.json")
    result.assert_outcomes(passed=8)
    result.stdout.fnmatch_lines(["pinned checklists written: 1"])
    report = report_of(pytester)
    evaluations = report.evaluations
    assert len(evaluations) == 8
    # each worker that started before the pin was written generated a checklist (2 requests each); a worker that
    # started later adopted the pin: which happens depends on the scheduling, what every test was judged with not
    generated = report.checklists.generated
    assert generated in (1, 2) and report.totals.llm_calls == 8 * 2 + 2 * generated
    data = json.loads((pytester.path / "__bineval__" / "test_shared" / "test_case.json").read_text())
    (pinned,) = data["checklists"]
    assert pinned["tests"] == [f"test_case[{i}]" for i in range(8)]
    pinned_questions = [q["text"] for q in pinned["questions"]]
    for e in evaluations:
        assert [q.text for q in e.questions] == pinned_questions, e.test
        assert [v.question for v in e.verdicts] == pinned_questions, e.test
    # what the run pinned is marked in the project's cache directory, not in a shared temporary directory
    assert len(list((pytester.path / ".bineval_cache" / "pins-written").iterdir())) == 1
    # the pin is used as written: --bineval-strict passes without writing any checklist
    pytester.runpytest("--bineval-strict", "--bineval-cache=off").assert_outcomes(passed=8)


def test_a_later_update_run_rewrites_the_pin_it_does_not_adopt_it(pytester: pytest.Pytester) -> None:
    """What a run pinned is adopted by that run only: the next --bineval-update-checklists=all run writes its own
    (a bare --bineval-update-checklists keeps a pin that is not missing or stale)."""
    project(pytester)
    pytester.makepyfile(test_shared=SHARED_TASK.replace("range(8)", "range(2)"))
    pin = pytester.path / "__bineval__" / "test_shared" / "test_case.json"
    pytester.runpytest("--bineval-update-checklists", "--bineval-cache=off").assert_outcomes(passed=2)
    first = json.loads(pin.read_text())["checklists"]
    pytester.runpytest("--bineval-update-checklists=all", "--bineval-cache=off").assert_outcomes(passed=2)
    second = json.loads(pin.read_text())["checklists"]
    assert len(first) == len(second) == 1
    assert first[0]["questions"] != second[0]["questions"]
    assert first[0]["tests"] == second[0]["tests"] == ["test_case[0]", "test_case[1]"]


# -- assert_passes in threads the test starts ------------------------------------------------------------------
THREADS = '''
import concurrent.futures, contextvars
import pytest
from pytest_bineval import UsageError, assert_passes

POOL = {}

@pytest.mark.bineval(task="Summarize the article.", threshold=0.5)
def test_threaded():
    def judge(i):
        return assert_passes(f"summary {i}", dimension="consistency")

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        scores = [ev.scores["consistency"] for ev in pool.map(judge, range(2))]
    assert scores == [0.5, 0.5]  # below the default threshold (0.8), not below the marker's

def test_pool_outlives_its_test():
    POOL["pool"] = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    POOL["pool"].submit(lambda: None).result()  # its thread starts in this test and lives on

@pytest.mark.bineval(task="Summarize the article.", threshold=0.5)
def test_thread_of_an_earlier_test():
    pool = POOL.pop("pool")
    with pytest.raises(UsageError, match="started before the running test"):
        pool.submit(assert_passes, "late summary", dimension="consistency").result()
    # given the test's context, the same thread evaluates for this test
    run = contextvars.copy_context().run
    pool.submit(run, assert_passes, "copied summary", dimension="consistency").result()
    pool.shutdown()
'''


def test_assert_passes_in_a_thread_of_the_test_has_its_context(pytester: pytest.Pytester) -> None:
    """Bug: the test's context lived in a ContextVar only, which a new thread does not inherit: in a thread,
    assert_passes ignored the marker and the plugin's settings and its evaluation was in no report."""
    project(pytester, no=("consistency check 1",))
    pytester.makepyfile(test_threads=THREADS)
    result = pytester.runpytest("--color=no", "--bineval-report=report.json")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([
        "*= bineval summary =*",
        "evaluations: 3 (3 passed, 0 below threshold, 0 judge error)*",
    ])
    out = result.stdout.str()
    assert out.count("PASS test_threads.py::test_threaded") == 2
    assert "consistency 0.50 >= 0.50" in out
    evaluations = report_of(pytester).evaluations
    threaded = [e for e in evaluations if e.test == "test_threads.py::test_threaded"]
    assert sorted(e.output for e in threaded) == ["summary 0", "summary 1"]
    assert sorted(e.index for e in threaded) == [0, 1]
    assert all(e.thresholds == {"consistency": 0.5} and e.model == "cfake/judge" for e in threaded)
    assert all(e.task == "Summarize the article." for e in threaded)
    assert all(e.location is not None and e.location.file == "test_threads.py" for e in threaded)  # judge()
    # the thread of an earlier test evaluated for nobody; with the test's context passed along, for the test
    (late,) = [e for e in evaluations if e.test == "test_threads.py::test_thread_of_an_earlier_test"]
    assert late.output == "copied summary" and late.thresholds == {"consistency": 0.5}
    assert len(evaluations) == 3
