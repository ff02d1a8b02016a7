"""criteria="qworld" through the pytest plugin: markers, pins per question (also under pytest-xdist), the
points score in the terminal and the report; pytester with the scripted fake model."""

from __future__ import annotations

import json

import pytest

from pytest_bineval.report.document import ReportDocument
from pytest_bineval.testing.project import scripted_project

pytest_plugins = ["pytester"]

ANSWER = '''
def answer(req):
    return "no" if req.question in NO else "yes"
'''

ADVICE = '''
import pytest
from pytest_bineval import assert_passes

QUESTIONS = {{
    "flight": "{flight}",
    "deposit": "My landlord kept my whole deposit for cleaning. The flat was spotless. What can I do?",
}}

@pytest.mark.bineval(criteria="qworld", score="points", threshold=0.8)
@pytest.mark.parametrize("case", sorted(QUESTIONS))
def test_advice(case):
    assert_passes("Some advice.", source=QUESTIONS[case])
'''
FLIGHT = "I fly 14 hours with my 2-year-old. How do I keep her calm?"


def make_project(pytester: pytest.Pytester, *, no: tuple[str, ...] = (), ini: str = "") -> None:
    scripted_project(pytester, provider="qfake", prelude=f"NO = {set(no)!r}", rule=ANSWER,
                     ini="bineval_qworld_widths = 1,1,1\n" + ini)


def test_pins_per_question_update_use_and_strict(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.makepyfile(test_advice=ADVICE.format(flight=FLIGHT))
    pin = pytester.path / "__bineval__" / "test_advice" / "test_advice.json"

    result = pytester.runpytest("--bineval-strict")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*--bineval-strict: the checklist of *test_advice[[]deposit[]] is not pinned*"])

    result = pytester.runpytest("--bineval-update-checklists")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["pinned checklists written: 2"])  # one file, one entry per question
    entries = json.loads(pin.read_text())["checklists"]
    assert [(e["question"][:12], e["tests"], e["strategy"]) for e in entries] == [
        ("My landlord ", ["test_advice[deposit]"], "qworld"), ("I fly 14 hou", ["test_advice[flight]"], "qworld")]
    assert all(e["tree"]["nodes"] and e["questions"][0]["points"] for e in entries)
    assert entries[0]["task"] == "Answer the user's question."

    # pinned files are used verbatim: a hand edit shows up, no generation call
    entries[1]["questions"][0]["text"] = "Does the response suggest her usual bedtime routine?"
    pin.write_text(json.dumps({"format": 2, "checklists": entries}, indent=2))
    result = pytester.runpytest("--bineval-strict", "--bineval-report=report.json", "--bineval-cache=off")
    result.assert_outcomes(passed=2)
    report = ReportDocument.load(pytester.path / "report.json")
    flight = next(r for r in report.evaluations if "flight" in r.test)
    assert flight.checklist_status == "pinned" and flight.strategy == "qworld" and flight.score_kind == "points"
    assert flight.dimensions[0].score_kind == "points"
    assert flight.verdicts[0].question == "Does the response suggest her usual bedtime routine?"
    assert report.totals.llm_calls == sum(len(r.verdicts) for r in report.evaluations)  # judge calls only

    # one case's question changed: only that case is stale
    pytester.makepyfile(test_advice=ADVICE.format(flight=FLIGHT + " She hates her seat."))
    result = pytester.runpytest("--bineval-strict")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*test_advice[[]flight[]] is stale (the task or question text changed since it "
                                 "was pinned)*"])
    # the flight case's entry was edited by hand: an update run keeps it (and says so); =all replaces it
    result = pytester.runpytest("--bineval-update-checklists")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["pin kept: __bineval__/test_advice/test_advice.json *: stale (the question text "
                                 "changed), but edited by hand*"])
    assert len(json.loads(pin.read_text())["checklists"]) == 2
    pytester.runpytest("--bineval-update-checklists=all").assert_outcomes(passed=2)
    entries = json.loads(pin.read_text())["checklists"]
    assert len(entries) == 2 and any(e["question"].endswith("She hates her seat.") for e in entries)


def test_points_failure_orders_criteria_by_points(pytester: pytest.Pytester) -> None:
    # the fake's criteria have points 10, 9, ..., 4, 10, ... (ScriptedModel.criterion): the top 5 are four 10s
    # and criterion 2 (9 points); "no" to criterion 2 and criterion 1 (10 points) leaves 30 of 49 points
    make_project(pytester, no=("Does the response cover timing (criterion 2)?",
                               "Does the response cover dosage (criterion 1)?"), ini="bineval_qworld_top_k = 5\n")
    pytester.makepyfile(test_advice=ADVICE.format(flight=FLIGHT))
    result = pytester.runpytest("-k", "flight", "--bineval-report=report.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*quality*+10*Does the response*no*scripted no for:*",  # the section's table has a points column
        "*BELOW THRESHOLD *test_advice[[]flight[]]: quality 0.61 points < 0.80",
    ], consecutive=False)
    result.stdout.fnmatch_lines([
        "*quality: 0.* points (threshold 0.80) FAIL",
        "*failing questions (2):",
        "*[[]quality[]] (+10 missed) Does the response cover dosage (criterion 1)?",
        "*-> no: scripted no for: Does the response cover dosage (criterion 1)?",
        "*[[]quality[]] (+9 missed) Does the response cover timing (criterion 2)?",
    ])
    (record,) = ReportDocument.load(pytester.path / "report.json").evaluations
    assert record.outcome == "failed" and record.score_kind == "points"
    assert sorted(q.points or 0 for q in record.questions) == [9, 10, 10, 10, 10]
    assert record.dimensions[0].score == pytest.approx(30 / 49)


def test_marker_criteria_and_score_are_validated(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.makepyfile('''
        import pytest

        @pytest.mark.bineval(criteria="tree")
        def test_x():
            pass
    ''')
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*@pytest.mark.bineval(criteria='tree'): use one of bineval, qworld, qworld-lite*"])
    pytester.makepyfile('''
        import pytest

        @pytest.mark.bineval(score="median")
        def test_x():
            pass
    ''')
    pytester.runpytest().stderr.fnmatch_lines(["*bineval(score='median'): use one of share, points*"])


def test_points_with_the_lower_bound_gate_is_a_usage_error(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.makepyfile(test_advice=ADVICE.format(flight=FLIGHT))
    result = pytester.runpytest("--bineval-gate", "lower-bound", "-k", "flight")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*score='points' has no such interval*"])


def test_without_source_the_question_is_missing(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.makepyfile('''
        import pytest
        from pytest_bineval import assert_passes

        @pytest.mark.bineval(criteria="qworld-lite")
        def test_x():
            assert_passes("Some advice.")
    ''')
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*criteria='qworld-lite' writes criteria for the question the output answers*"])


def test_xdist_workers_pin_their_questions_into_one_file(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.makepyfile(test_advice=ADVICE.format(flight=FLIGHT))
    result = pytester.runpytest("-p", "xdist", "-n", "2", "--bineval-update-checklists")
    result.assert_outcomes(passed=2)
    pin = pytester.path / "__bineval__" / "test_advice" / "test_advice.json"
    assert len(json.loads(pin.read_text())["checklists"]) == 2
    pytester.runpytest("--bineval-strict").assert_outcomes(passed=2)  # both pinned: nothing is generated


def test_fixtures_with_per_question_criteria(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.makepyfile('''
        import pytest

        def test_service(bineval):
            checklist = bineval.checklist(None, strategy="qworld-lite", question="How do I learn Rust?")
            assert checklist.strategy == "qworld-lite" and checklist.question == "How do I learn Rust?"
            assert all(q.points for q in checklist.questions)

        @pytest.mark.bineval(criteria="qworld")
        def test_task_checklist_fixture(bineval_checklist):
            pass
    ''')
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*bineval_checklist is the task's checklist; with criteria='qworld'*"])
