"""--bineval-explain (and the ini key) through pytester: which verdicts are explained, in the report and in the
failure message; a judge that answers neither yes nor no errors the test. The judge's side is unit/test_judge.py."""

from __future__ import annotations

import pytest
from support import logprobs_entry, scripted_logprobs

from pytest_bineval.models import EXPLAIN_MODES
from pytest_bineval.report.document import ReportDocument
from pytest_bineval.testing.project import scripted_project

pytest_plugins = ["pytester"]

PROJECT_ANSWERS = {"Is check 1 met?": "yes", "Is check 2 met?": "no"}


TEST_FILE = '''
import pytest
from pytest_bineval import Checklist, Question, assert_passes

CHECKLIST = Checklist(task="Summarize.", dimensions={"consistency": "c"}, questions=[
    Question(id="consistency-1", dimension="consistency", text="Is check 1 met?"),
    Question(id="consistency-2", dimension="consistency", text="Is check 2 met?")])

def test_judged():
    assert_passes("A summary.", source="An article.", checklist=CHECKLIST, threshold=0.5)
'''


@pytest.mark.parametrize(("where", "mode"), [("default", "failing"), ("option", "all"), ("ini", "none")])
def test_explain_option_ini_and_report(pytester: pytest.Pytester, where: str, mode: str) -> None:
    scripted_project(pytester, provider="efake", answers=PROJECT_ANSWERS,
                     ini=f"bineval_explain = {mode}" if where == "ini" else "")
    pytester.makepyfile(test_e=TEST_FILE)
    args = ["--bineval-report=report.json", "--bineval-cache=off"]
    if where == "option":
        args.append(f"--bineval-explain={mode}")
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1)
    (record,) = ReportDocument.load(pytester.path / "report.json").evaluations
    assert {v.explain for v in record.verdicts} == {mode}
    explained = {v.question for v in record.verdicts if v.explanation}
    assert explained == {"all": {"Is check 1 met?", "Is check 2 met?"}, "failing": {"Is check 2 met?"},
                         "none": set()}[mode]
    assert record.usage.llm_calls == 2 + len(explained)


@pytest.mark.parametrize("mode", EXPLAIN_MODES)
def test_failure_message_explains_every_failing_question(pytester: pytest.Pytester, mode: str) -> None:
    scripted_project(pytester, provider="efake", answers={**PROJECT_ANSWERS, "Is check 1 met?": "no"})
    pytester.makepyfile(test_e=TEST_FILE)
    result = pytester.runpytest("--bineval-cache=off", f"--bineval-explain={mode}")
    result.assert_outcomes(failed=1)
    if mode == "none":  # asked for no explanations: the message says so
        result.stdout.fnmatch_lines(["*[[]consistency[]] Is check 1 met?",
                                     "*-> no: (not explained: explain mode none)"])
    else:
        result.stdout.fnmatch_lines(["*[[]consistency[]] Is check 1 met?", "*-> no: scripted no for: Is check 1 met?",
                                     "*[[]consistency[]] Is check 2 met?", "*-> no: scripted no for: Is check 2 met?"])


def test_a_judge_that_answers_neither_yes_nor_no_errors_the_test(pytester: pytest.Pytester,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The error verdict reaches the test as an error (it could not be scored), never a pass."""
    scripted_logprobs(monkeypatch, {"maybe": logprobs_entry("maybe", ("maybe", 0.9), ("yes", 0.04), ("no", 0.03))})
    scripted_project(pytester, provider="efake", prefill=True, answers={**PROJECT_ANSWERS, "Is check 1 met?": "maybe"})
    pytester.makepyfile(test_e=TEST_FILE.replace("threshold=0.5", "threshold=0.0"))
    result = pytester.runpytest("--bineval-cache=off", "--bineval-explain=none", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*neither yes nor no*'maybe'*"])


def test_bad_explain_option_is_an_argparse_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    result = pytester.runpytest("--bineval-explain=some")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*argument --bineval-explain*invalid choice*"])
