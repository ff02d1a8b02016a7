"""Questions that carry a check are decided by code: no judge request, a measured explanation, a normal verdict;
pinned checklists with checks (a scripted judge counts the requests it gets)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError
from support import CHECKS_TASK as TASK
from support import MIXED_CHECKLIST as MIXED
from support import make_project, report_of

from pytest_bineval.api import evaluate
from pytest_bineval.models import Checklist, Question, Verdict
from pytest_bineval.testing import ScriptedModel


def test_checked_questions_never_reach_the_judge(fake: ScriptedModel, cache_dir: Path) -> None:
    checklist = Checklist.model_validate(MIXED)
    output = 'The library opens in 2027. It has 3 floors. Come visit!'
    result = evaluate(output, checklist, model=fake.model, cache_dir=str(cache_dir))
    assert [r.question for r in fake.requests] == ["Does the response describe the library?"]
    assert result.usage.llm_calls == 1
    by_id = {v.question_id: v for v in result.verdicts}
    assert (by_id["format-1"].answer, by_id["format-1"].explanation) == ("no", "3 sentences; the limit is 2")
    assert by_id["format-2"].answer == "no"
    assert by_id["format-2"].explanation.startswith("not valid JSON: Expecting value")
    assert [v.decided_by for v in result.verdicts] == ["code", "code", "judge"]
    assert result.scores == {"format": 0.0, "relevance": 1.0}  # scored like any verdict
    assert {v.question_id for v in result.failed} == {"format-1", "format-2"}


def test_a_check_round_trips_and_judge_verdicts_serialize_as_before() -> None:
    checklist = Checklist.model_validate(MIXED)
    again = Checklist.model_validate_json(checklist.model_dump_json())
    assert again.questions[0].check == {"kind": "max_sentences", "value": 2}
    assert "check" not in checklist.questions[2].model_dump()  # unset: written as before
    plain = Verdict(question_id="q", dimension="d", question="?", answer="yes")
    assert "decided_by" not in plain.model_dump()
    coded = plain.model_copy(update={"decided_by": "code"})
    assert Verdict.model_validate_json(coded.model_dump_json()).decided_by == "code"


def test_a_question_with_an_unknown_check_kind_is_rejected() -> None:
    with pytest.raises(ValidationError, match="unknown check kind 'max_sentence'"):
        Question(id="q", dimension="d", text="?", check={"kind": "max_sentence", "value": 2})


PINNED_TEST = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="{task}", dimensions=[{{"format": "The response has the asked form."}},
                                                 {{"relevance": "It answers the task."}}])
def test_pinned():
    assert_passes({output!r}, threshold=0.5)
'''


def _pin(pytester: pytest.Pytester, checklist: dict[str, object]) -> Path:
    pin = pytester.path / "__bineval__" / "test_pin" / "test_pinned.json"
    pin.parent.mkdir(parents=True, exist_ok=True)
    pin.write_text(json.dumps({"format": 2, "checklists": [{**checklist, "tests": ["test_pinned"]}]}))
    return pin


def test_a_pin_with_checks_asks_the_judge_only_the_judged_question(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    _pin(pytester, MIXED)
    pytester.makepyfile(test_pin=PINNED_TEST.format(task=TASK, output='{"name": "Central", "floors": 3}'))
    result = pytester.runpytest("--bineval-strict", "--bineval-report=report.json", "--bineval-cache=off",
                                "--bineval-explain=all")
    result.assert_outcomes(passed=1)
    (ev,) = report_of(pytester).evaluations
    assert ev.checklist_status == "pinned"
    assert [(v.question_id, v.answer, v.decided_by) for v in ev.verdicts] == [
        ("format-1", "yes", "code"), ("format-2", "yes", "code"), ("relevance-1", "yes", "judge")]
    assert ev.verdicts[0].explanation == "1 sentence; the limit is 2"
    assert ev.verdicts[1].explanation == "valid JSON (dict)"
    # --bineval-explain=all: the judged question costs an answer and an explanation request; the checks nothing
    assert ev.usage.llm_calls == 2


def test_a_failing_check_is_a_reason_of_the_failure(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    _pin(pytester, MIXED)
    pytester.makepyfile(test_pin=PINNED_TEST.format(task=TASK, output="One. Two. Three. Not JSON at all."))
    result = pytester.runpytest("--bineval-strict", "--bineval-cache=off", "--color=no")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Does the response have at most 2 sentences?*", "*4 sentences; the limit is 2*"])


def test_an_unknown_check_kind_in_a_pin_is_a_pin_error_naming_the_field(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    bad = json.loads(json.dumps(MIXED))
    bad["questions"][1]["check"] = {"kind": "valid_json"}
    _pin(pytester, bad)
    pytester.makepyfile(test_pin=PINNED_TEST.format(task=TASK, output="{}"))
    result = pytester.runpytest("--bineval-strict", "--bineval-cache=off")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*test_pinned.json: checklists[[]0[]]: invalid field(s) questions.1.check: "
                                 "Value error, unknown check kind 'valid_json'; the catalogue has: *"])


# A pattern that backtracks without end in the regex engine: C(n, 11) ways to split "1," * n + "!" (n = 60: 3e11).
HOSTILE_CHECK = {"kind": "regex", "pattern": "^(.*?,){11}P", "mode": "absent"}


def test_a_check_past_its_bound_is_an_error_verdict_never_a_pass(fake: ScriptedModel, cache_dir: Path) -> None:
    checklist = Checklist.model_validate({**MIXED, "questions": [
        {**MIXED["questions"][0], "check": HOSTILE_CHECK}, *MIXED["questions"][1:]]})  # type: ignore[dict-item]
    result = evaluate("1," * 60 + "!", checklist, model=fake.model, cache_dir=str(cache_dir), timeout=0.5,
                      retries=0)
    hostile = result.verdicts[0]
    assert (hostile.answer, hostile.decided_by) == ("error", "code")
    assert "did not finish within 0.5 s on the response (121 characters)" in (hostile.error or "")
    assert "--bineval-timeout" in (hostile.error or "")
    assert [v.answer for v in result.verdicts[1:]] == ["no", "yes"]  # the other questions are answered
    assert result.errors == [hostile]


def test_a_hostile_pattern_in_a_pin_ends_within_the_bound_with_a_report(pytester: pytest.Pytester) -> None:
    """The probe's case: a pinned check that never ends stopped the run, which wrote no report or JUnit. Now the
    question is an error at its bound (--bineval-timeout 1, retries 0: a 2 s evaluation), the test errors, the
    others run, and every file is written (a subprocess with a time limit, so a hang fails this test instead of
    stalling the suite)."""
    make_project(pytester)
    hostile = json.loads(json.dumps(MIXED))
    hostile["questions"][0]["check"] = HOSTILE_CHECK
    _pin(pytester, hostile)
    pytester.makepyfile(test_pin=PINNED_TEST.format(task=TASK, output="1," * 60 + "!") + """
def test_other():
    pass
""")
    result = pytester.runpytest_subprocess("--bineval-strict", "--bineval-cache=off", "--bineval-timeout=1",
                                           "--bineval-retries=0", "--bineval-report=report.json",
                                           "--junitxml=junit.xml", "-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*did not finish within 1 s on the response (121 characters)*"])
    (ev,) = report_of(pytester).evaluations
    first = ev.verdicts[0]
    assert (first.question_id, first.answer, first.decided_by) == ("format-1", "error", "code")
    junit = (pytester.path / "junit.xml").read_text()
    assert 'errors="1"' in junit and "did not finish within 1 s" in junit
