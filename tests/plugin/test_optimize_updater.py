"""The updater's edits in the self-update loop, with a scripted optimizer: an edit that copies the updater's own
prompt (its worked example, its key names, a placeholder value) is discarded, counted and said, and the lesson is
appended instead; an edit whose passage is not in the prompt is refused with the reason; both in the terminal
report, the JSON report, the history and ``bineval align``'s output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import LEARNING_ANSWER, LEARNING_TESTS, NEWS_LINE, NEWS_PROMPT

from pytest_bineval import Checklist, Question, Settings
from pytest_bineval.cli import main
from pytest_bineval.engine import Engine, run_sync
from pytest_bineval.models import Verdict
from pytest_bineval.optimize import PromptOptimizer, append_lesson, history_path
from pytest_bineval.report.record import DimensionResult, EvaluationRecord
from pytest_bineval.testing import ScriptedModel
from pytest_bineval.testing.project import scripted_project

pytest_plugins = ["pytester"]

PROMPT = NEWS_PROMPT
LINE = NEWS_LINE
Q_NUM = "Is every number in the response also in the input?"
LESSON = f"Make sure that: {Q_NUM}"  # the scripted note-taker's lesson


def failing_record(test: str = "t::a") -> EvaluationRecord:
    verdicts = [Verdict(question_id="q0", dimension="consistency", question=Q_NUM, answer="no", explanation="x"),
                Verdict(question_id="q1", dimension="consistency", question="Q2", answer="yes", explanation="")]
    return EvaluationRecord(
        test=test, task="Summarize the article.", prompt="gen.md", model="fake/judge", checklist_status="pinned",
        dimensions=[DimensionResult(name="consistency", score=None, threshold=0.8, outcome="failed")],
        overall=0.5, outcome="failed", verdicts=verdicts, output=f"output of {test}", source=f"article of {test}",
    )


@pytest.fixture
def engine(tmp_path: Path) -> Any:
    fake = ScriptedModel(provider="upfake").register()
    eng = Engine(Settings(model=fake.model, cache="off", cache_dir=str(tmp_path / "cache")))
    yield eng, fake
    eng.close()


def step_with_edit(engine: Any, tmp_path: Path, edit: dict[str, str]) -> tuple[Any, str]:
    """One optimizer step whose updater replies ``edit``: (the outcome, the prompt file's text after it)."""
    eng, fake = engine
    fake.rules["prompt_edit"] = lambda req: json.dumps(edit)
    path = tmp_path / "gen.md"
    path.write_text(PROMPT)
    result = run_sync(PromptOptimizer(eng).step("gen.md", path, [failing_record()]))
    return result, path.read_text()


def test_an_edit_that_writes_a_placeholder_value_over_a_real_sentence_is_discarded(engine: Any,
                                                                                   tmp_path: Path) -> None:
    """The real session's reply shape: without the check, "the rewritten passage" would replace the sentence."""
    result, text = step_with_edit(engine, tmp_path, {"find": LINE, "replace": "the rewritten passage"})
    (entry,) = result.lessons
    assert entry["status"] == "appended" and "rejected_edit" not in entry
    assert entry["discarded_edit"] == ("its 'replace' 'the rewritten passage' is a placeholder: it describes a "
                                       "passage instead of being one")
    assert entry["edit"] == {"find": LINE, "replace": "the rewritten passage"}  # kept for review
    assert text == append_lesson(PROMPT, LESSON) and LINE in text and "rewritten" not in text


def test_a_copy_of_the_worked_example_is_discarded(engine: Any, tmp_path: Path) -> None:
    result, text = step_with_edit(engine, tmp_path, {
        "find": "Suggest one trip for the family.",
        "replace": "Suggest one trip for the family. Give the price of the trip."})
    (entry,) = result.lessons
    assert "words of the updater's own prompt" in entry["discarded_edit"]
    assert text == append_lesson(PROMPT, LESSON) and "trip" not in text


def test_the_example_lesson_written_into_a_real_sentence_is_discarded(engine: Any, tmp_path: Path) -> None:
    result, text = step_with_edit(engine, tmp_path, {"find": LINE, "replace": f"{LINE} Give the price of the trip."})
    (entry,) = result.lessons
    assert "copies words of the updater's own prompt ('give the price of the'" in entry["discarded_edit"]
    assert text == append_lesson(PROMPT, LESSON) and "trip" not in text


def test_an_edit_whose_passage_is_not_in_the_prompt_is_refused_with_the_reason(engine: Any, tmp_path: Path) -> None:
    result, text = step_with_edit(engine, tmp_path, {"find": "You are a sports editor.", "replace": "Be brief."})
    (entry,) = result.lessons
    assert entry["status"] == "appended" and "discarded_edit" not in entry
    assert entry["rejected_edit"] == ("passage not found in the prompt: 'You are a sports editor.' is not a "
                                      "substring of it (an edit must copy its passage from the prompt character "
                                      "for character)")
    assert text == append_lesson(PROMPT, LESSON)


def test_a_real_edit_is_still_applied(engine: Any, tmp_path: Path) -> None:
    result, text = step_with_edit(engine, tmp_path, {"find": LINE, "replace": f"{LINE} Copy every number."})
    (entry,) = result.lessons
    assert entry["status"] == "applied" and "discarded_edit" not in entry and "rejected_edit" not in entry
    assert text == PROMPT.replace(LINE, f"{LINE} Copy every number.")


# -- the loop's report ---------------------------------------------------------------------------------------

ANSWER = LEARNING_ANSWER
TESTS = LEARNING_TESTS
EXAMPLE_COPY = ('lambda req: \'{"find": "Suggest one trip for the family.", "replace": "Suggest one trip for the '
                'family. Give the price of the trip."}\'')


def project(pytester: pytest.Pytester, edit_rule: str) -> Path:
    scripted_project(pytester, provider="pufake", rule=ANSWER, ini="bineval_cache = off", rules={
        "lesson": "lambda req: '{\"lesson\": \"Copy every number exactly.\"}'", "prompt_edit": edit_rule})
    pytester.makepyfile(test_gen=TESTS)
    prompt = pytester.path / "prompts" / "gen.md"
    prompt.parent.mkdir()
    prompt.write_text(PROMPT)
    return prompt


def test_the_optimizer_report_counts_and_says_the_discarded_edits(pytester: pytest.Pytester) -> None:
    prompt = project(pytester, EXAMPLE_COPY)
    result = pytester.runpytest("--color=no", "--bineval-optimize", "--bineval-report=report.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "UPDATED prompts/gen.md: 1 of 1 iteration(s) kept; *",
        "    updater edits discarded (words of its own prompt, not an edit; the lesson was appended): 1",
        "    lesson [appended] Copy every number exactly.",
        "        edit discarded: its 'find' 'Suggest one trip for the family.' is words of the updater's own prompt, "
        "not text of the prompt edited",
    ])
    assert prompt.read_text() == append_lesson(PROMPT, "Copy every number exactly.")
    (done,) = json.loads((pytester.path / "report.json").read_text())["optimize"]
    (lesson,) = done["lessons"]
    assert lesson["status"] == "appended" and "words of the updater's own prompt" in lesson["discarded_edit"]
    (it,) = json.loads(history_path(prompt).read_text())["iterations"]
    assert it["edits_discarded"] == 1


def test_the_optimizer_report_says_why_an_edit_was_refused(pytester: pytest.Pytester) -> None:
    project(pytester, 'lambda req: \'{"find": "You are a sports editor.", "replace": "Be brief."}\'')
    result = pytester.runpytest("--color=no", "--bineval-optimize")
    result.stdout.fnmatch_lines([
        "    lesson [appended] Copy every number exactly.",
        "        edit not applied: passage not found in the prompt: 'You are a sports editor.' is not a substring of "
        "it (an edit must copy its passage from the prompt character for character)",
    ])
    assert "updater edits discarded" not in result.stdout.str()


# -- bineval align: the same edits, the same words --------------------------------------------------------------

Q1 = "Does the response name the city?"
JUDGE = """## system
You are a strict evaluator. Answer one yes/no question about a response.

## user
<input>
{{source}}
</input>

<response>
{{output}}
</response>

Question: {{question}}
"""


def test_align_says_the_discarded_edits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reference = ScriptedModel(provider="uprefake").register()
    reference.rules["prompt_edit"] = lambda req: json.dumps({"find": "replace", "replace": "system"})
    target = ScriptedModel(provider="uptgfake", answers=lambda req: "no" if req.question == Q1 else "yes").register()
    checklist = tmp_path / "checklist.json"
    checklist.write_text(Checklist(task="Summarize.", dimensions={"consistency": "Only facts."}, model="hand-written",
                                   questions=[Question(id="c-1", dimension="consistency", text=Q1)]).model_dump_json())
    data = tmp_path / "outputs.jsonl"
    data.write_text(json.dumps({"article": "Lyon opened a bridge.", "summary": "A bridge opened."}) + "\n")
    prompt = tmp_path / "judge.md"
    prompt.write_text(JUDGE)
    code = main(["align", "--data", str(data), "--source-key", "article", "--output-key", "summary",
                 "--checklist", str(checklist), "--reference", reference.model, "--model", target.model,
                 "--prompt", str(prompt), "--cache", "off", "--iterations", "1", "--dry-run"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "    updater edits discarded (words of its own prompt, not an edit; the lesson was appended): 1\n" in out
    assert ("        edit discarded: its 'find' 'replace' is words of the updater's own prompt, not text of the "
            "prompt edited\n") in out
