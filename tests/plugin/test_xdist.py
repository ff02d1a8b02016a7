"""What crosses pytest-xdist, end to end: one project that uses every feature of a run (a conversation and a baseline
comparison among them) gives the same report, summary and outputs under ``-n 2`` as in one process; the merge (one
summary, one report and page, the finished hook once, on the controller); a worker that never sends its ledger
(Ctrl-C, a crash): what it finished still counts. Its tests' teardown reports carry their records and the worker's
running counts; the controller keeps them until the worker's ledger arrives, and uses them when it never does.

The other plugin tests run in one process unless xdist is their subject (a budget's share per worker, workers
pinning one file, the controller's loop or re-asks, shards, SIGTERM): each ledger field's trip through a worker
(serialised, relayed test by test, merged) is the ledger's unit test (tests/unit/test_ledger.py)."""

from __future__ import annotations

import json
import re
import shutil
from typing import Any

import pytest
from support import ANSWERS_FILE_RULE, XDIST, Q, make_project, record, report_of, with_finished_hook

from pytest_bineval.report.document import ReportDocument
from pytest_bineval.testing.project import scripted_project

pytest_plugins = ["pytester"]

# One test per feature; each test has a task of its own, so that no two workers generate or pin the same checklist
# (which worker does is scheduling: tests/plugin/test_concurrency.py) and both runs make the same requests.
EVERY_FEATURE = '''
import pathlib
import pytest
from pytest_bineval import Checklist, assert_passes

@pytest.mark.bineval(task="Task A.", threshold={"fluency": 0.5, "cohrence": 0.5})
def test_confirmed():  # one question flips from ask to ask: re-asked, unstable; a marker's threshold key misspelt
    assert_passes("output a", dimension="fluency")

@pytest.mark.bineval(task="Task B.")
def test_below():  # below its threshold: a failed test
    assert_passes("output b", dimension="consistency", source="An article.")

@pytest.mark.flaky(reruns=1)
@pytest.mark.bineval(task="Task C.")
def test_flaky():  # below, then at its threshold on the re-run: the first attempt's evaluation replaced, counted
    attempts = pathlib.Path("attempts")
    first = not attempts.exists()
    attempts.write_text("x")
    assert_passes("output c", dimension="fluency", threshold=0.9 if first else 0.5)

@pytest.mark.bineval(task="Task D.")
def test_judge_error():  # the provider fails: a judge error, its failed requests counted
    assert_passes("output d", dimension="fluency")

def test_no_task():  # errors before any evaluation: not scored
    assert_passes("output e", dimension="fluency")

@pytest.mark.bineval(task="Task F.", dimensions=[{"brevity": "Short."}])
def test_deselected():  # -k leaves it out: collected, not run; its dimension is defined (no note for the ini key)
    assert_passes("output f")

CHAT = [
    {"role": "user", "content": "Where is my order A-1043?"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
        "name": "lookup_order", "arguments": '{"order_id": "A-1043"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "shipped"}'},
    {"role": "assistant", "content": "It shipped <b>yesterday</b>."},
    {"role": "user", "content": "Thanks!"},
    {"role": "assistant", "content": "You're welcome!"},
]
CHAT_CHECKLIST = Checklist(task="Answer the customer in a support chat.", dimensions={"tone": "Polite."}, questions=[
    {"id": "tone-1", "dimension": "tone", "text": "Is the reply polite?", "scope": "each_turn"},
    {"id": "tone-2", "dimension": "tone", "text": "Does the assistant look the order up?",
     "check": {"kind": "tool_called", "name": "lookup_order"}}])

def test_conversation():  # a conversation, its turn 4 judged impolite: failed, the first step that went wrong named
    assert_passes(CHAT, checklist=CHAT_CHECKLIST, threshold=1.0)
'''
EVERY_ANSWER = {
    f"output a|{Q.format('fluency', 2)}": ["no", "yes", "yes"],
    f"output b|{Q.format('consistency', 1)}": "no",
    f"output c|{Q.format('fluency', 1)}": "no",
    f"output d|{Q.format('fluency', 1)}": "boom",
    "turn 4|Is the reply polite?": "no",
}
# (one retry of the judge error's 503, not the default two: the backoff waits are real seconds)
EVERY_OPTION = ["-p", "rerunfailures", "-k", "not deselected", "--color=no", "--bineval-cache=off",
                "--bineval-retries=1", "--bineval-update-checklists", "test_every.py", "--bineval-confirm=5",
                "--bineval-explain=all",
                "--bineval-threshold=fluncy=0.3", "--bineval-report=report.json", "--bineval-html=report.html",
                "--bineval-pr-comment=comment.md", "--bineval-labels=labels.jsonl", "--bineval-baseline=base.json"]
# a person's labels of three verdicts: the judge's agreement with them is computed on the controller
EVERY_LABEL = [
    {"test": "test_every.py::test_below", "question": Q.format("consistency", 1), "answer": "yes"},  # judge: no
    {"test": "test_every.py::test_below", "question": Q.format("consistency", 2), "answer": "yes"},
    {"test": "test_every.py::test_confirmed", "question": Q.format("fluency", 1), "answer": "yes"},
]
# the baseline the runs compare with (on the controller, under xdist): test_below's first question was yes (now no:
# a regression), test_judge_error's was yes (now an error), test_no_task was scored (it ran: removed), a test that
# is gone (removed) and test_deselected (collected, not run)
EVERY_BASELINE = ReportDocument(created="2026-11-30T12:00:00+00:00", evaluations=[
    record("test_every.py::test_below", "passed", [("consistency", Q.format("consistency", 1), "yes"),
                                                   ("consistency", Q.format("consistency", 2), "yes")]),
    record("test_every.py::test_judge_error", "passed", [("fluency", Q.format("fluency", 1), "yes")]),
    record("test_every.py::test_no_task", "passed", [("fluency", Q.format("fluency", 1), "yes")]),
    record("test_every.py::test_gone", "passed", [("fluency", Q.format("fluency", 1), "yes")]),
    record("test_every.py::test_deselected", "passed", [("brevity", "Is it short?", "yes")]),
])


def _comparable(doc: ReportDocument) -> dict[str, Any]:
    """The report without what differs from run to run whatever the workers (the time it was written, the seconds
    each usage took), its evaluations in test order (workers finish in any order)."""
    def timeless(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: timeless(v) for k, v in value.items() if k not in ("created", "seconds")}
        return [timeless(v) for v in value] if isinstance(value, list) else value

    data = timeless(json.loads(doc.to_json()))
    data["evaluations"].sort(key=lambda e: (e["test"], e["index"]))
    return data


def _summary(result: pytest.RunResult, section: str = "summary") -> list[str]:
    """The lines of a bineval section (up to pytest's next section), the GitHub stop-commands token masked."""
    start = next(i for i, line in enumerate(result.outlines) if f"= bineval {section} =" in line)
    end = next(i for i, line in enumerate(result.outlines) if i > start and line.startswith("===="))
    return [re.sub(r"\b[0-9a-f]{32}\b", "<token>", line) for line in result.outlines[start:end]]


def _run_every_feature(pytester: pytest.Pytester, workers: list[str],
                       monkeypatch: pytest.MonkeyPatch) -> tuple[pytest.RunResult, dict[str, str]]:
    """The project run from scratch (no pins, no attempts, no outputs), and the files it wrote."""
    for name in ("__bineval__", "attempts", "finished.txt", "summary.md"):
        path = pytester.path / name
        if path.is_dir():
            shutil.rmtree(path)
        path.unlink(missing_ok=True)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "summary.md"))
    result = pytester.runpytest(*workers, *EVERY_OPTION)
    files = {name: (pytester.path / name).read_text(encoding="utf-8")
             for name in ("finished.txt", "summary.md", "comment.md", "report.html")}
    files["report.html"] = files["report.html"].replace(report_of(pytester).created, "<created>")
    return result, files


def test_a_run_under_xdist_finds_what_one_process_finds(pytester: pytest.Pytester,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every feature of a run in one project (re-runs, confirmation, pins written for the path given after the bare
    update option, a judge error, a test not scored, a deselected test, threshold keys that name no dimension, the
    judge against labels, a conversation failing at a turn, every output): ``-n 2`` changes nothing a user sees."""
    pytest.importorskip("pytest_rerunfailures")
    scripted_project(pytester, provider="xfake", rule=ANSWERS_FILE_RULE, ini="bineval_threshold = brevity=0.5")
    (pytester.path / "answers.json").write_text(json.dumps(EVERY_ANSWER))
    (pytester.path / "labels.jsonl").write_text("".join(json.dumps(label) + "\n" for label in EVERY_LABEL))
    with_finished_hook(pytester)
    EVERY_BASELINE.write(pytester.path / "base.json")
    # the path after the bare update option is a test path (not its mode), in the workers too: test_other never runs
    pytester.makepyfile(test_every=EVERY_FEATURE, test_other="def test_other():\n    raise AssertionError\n")

    one, one_files = _run_every_feature(pytester, [], monkeypatch)
    assert one.parseoutcomes() == {"passed": 2, "failed": 2, "errors": 2, "rerun": 1, "deselected": 1}
    one_doc = report_of(pytester)
    two, two_files = _run_every_feature(pytester, XDIST, monkeypatch)
    assert two.parseoutcomes() == {"passed": 2, "failed": 2, "errors": 2, "rerun": 1}  # xdist counts no deselected
    two_doc = report_of(pytester)

    # every feature did something (the comparison below is not of two empty reports)
    t = one_doc.totals
    assert (t.evaluations, t.passed, t.failed, t.errors, t.rerun_evaluations, t.unscored_tests) == (5, 2, 2, 1, 1, 1)
    assert t.pinned_checklists_written == 4 and t.failed_requests > 0 and t.unstable_questions == 1
    assert one_doc.confirmation is not None and one_doc.confirmation.reasked > 0
    assert [(u.test, u.error) for u in one_doc.unscored] == [("test_every.py::test_no_task", "NoTaskError")]
    assert "test_every.py::test_deselected" in (one_doc.collected_tests or [])
    assert "test_every.py::test_deselected" not in (one_doc.ran_tests or [])
    # the option reached the judge (a check that code decides has no explanation)
    assert {v.explain for e in one_doc.evaluations for v in e.verdicts if v.decided_by == "judge"} == {"all"}
    assert sorted(a.action for a in one_doc.pins) == ["created"] * 4
    calibration = one_doc.calibration
    assert calibration is not None and calibration.used == 3 and len(calibration.disagreements) == 1
    notes = [line for line in one.outlines if line.startswith("bineval: ") and "which no assertion" in line]
    assert [n.split("sets a threshold for ")[1].split(",")[0] for n in notes] == ["'fluncy'", "'cohrence'"]
    (chat,) = [e for e in one_doc.evaluations if e.test == "test_every.py::test_conversation"]
    assert (chat.first_failing_turn, len(chat.conversation or [])) == (4, 6)
    assert [(v.turn, v.answer, v.decided_by) for v in chat.verdicts] == [
        (None, "yes", "code"), (2, "yes", "judge"), (4, "no", "judge"), (6, "yes", "judge")]
    assert "turn 4 (assistant)" in one_files["comment.md"] and "&lt;b&gt;yesterday" in one_files["report.html"]
    regressions = one_doc.regressions
    assert regressions is not None and [r.key for r in regressions.not_run] == ["test_every.py::test_deselected"]
    assert [r.key for r in regressions.removed] == ["test_every.py::test_gone", "test_every.py::test_no_task"]
    assert sorted((d.key, c.kind) for d in regressions.compared for c in d.changes) == [
        ("test_every.py::test_below", "regression"), ("test_every.py::test_judge_error", "judge error")]
    assert one_files["finished.txt"].splitlines() == [
        "False 5 5 ['test_every.py::test_below', 'test_every.py::test_conversation', "
        "'test_every.py::test_judge_error', 'test_every.py::test_no_task']"]

    # the same under xdist: the report, the summary's lines, the files written once, on the controller
    assert _comparable(two_doc) == _comparable(one_doc)
    assert two_files == one_files
    assert _summary(two) == _summary(one)
    assert _summary(two, "regressions") == _summary(one, "regressions")
    assert _summary(two, "judge") == _summary(one, "judge")  # the labels' agreement, then GitHub's annotations
    for result in (one, two):
        out = result.stdout.str()
        assert out.count("= bineval summary =") == 1 and out.count("bineval html report: report.html") == 1
        assert out.count("= bineval judge =") == 1
        assert out.count("::error ") == one.stdout.str().count("::error ") > 0  # annotations, once each


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
    result = pytester.runpytest("-p", "xdist", "-n", "1", "--bineval-cache=off", "--bineval-report=report.json")
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
