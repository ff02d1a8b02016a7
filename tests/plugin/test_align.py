"""Evaluator prompts of your own (``--bineval-judge-prompt``) and their cross-model alignment
(``bineval align``): scripted reference/target judges through litellm, and the real embedded model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import ALIGN_CHECKLIST as CHECKLIST
from support import ALIGN_ITEMS as ITEMS
from support import ALIGN_QUESTIONS

from pytest_bineval import Evaluation, Settings, Verdict
from pytest_bineval.cli import main
from pytest_bineval.engine import Engine
from pytest_bineval.optimize import EvaluatorAligner, agreement, history_path, load_items, run_align
from pytest_bineval.prompting import load_judge_prompt, packaged_judge_prompt
from pytest_bineval.testing import ScriptedModel
from pytest_bineval.testing.project import scripted_project

pytest_plugins = ["pytester"]

Q1, Q2 = ALIGN_QUESTIONS

JUDGE = """## system
You are a strict evaluator. Answer one yes/no question about a response.
Reply with a JSON object: {"answer": "yes" or "no", "explanation": "..."}.

## user
<input>
{{source}}
</input>

<response>
{{output}}
</response>

Question: {{question}}
"""


def ev(*answers: str) -> Evaluation:
    return Evaluation(task="t", model="m", dimensions=["d"], verdicts=[
        Verdict(question_id=f"q{i}", dimension="d", question=f"Q{i}?", answer=a,  # type: ignore[arg-type]
                explanation="", error="boom" if a == "error" else None)
        for i, a in enumerate(answers)])


def test_agreement_counts_questions_both_answered() -> None:
    share, compared, found = agreement([ev("yes", "no", "yes"), ev("no", "error")],
                                       [ev("yes", "yes", "yes"), ev("no", "no")])
    assert compared == 4 and share == pytest.approx(0.75)  # the error pair is left out
    assert [(d.item, d.question, d.reference.answer, d.target.answer) for d in found] == [(0, "Q1?", "no", "yes")]


def test_judge_prompt_files_are_checked(tmp_path: Path) -> None:
    good = tmp_path / "judge.md"
    good.write_text(JUDGE)
    assert load_judge_prompt(str(good)).turns[0][0] == "system"
    (tmp_path / "packaged.md").write_text(packaged_judge_prompt())
    load_judge_prompt(str(tmp_path / "packaged.md"))
    bad = tmp_path / "bad.md"
    bad.write_text(JUDGE.replace("{{question}}", "{{query}}"))
    with pytest.raises(ValueError, match=r"needs \{\{question\}\}; unknown \{\{query\}\}"):
        load_judge_prompt(str(bad))
    with pytest.raises(ValueError, match="cannot read the judge prompt"):
        load_judge_prompt(str(tmp_path / "missing.md"))
    sectionless = tmp_path / "plain.md"
    sectionless.write_text("Answer {{question}} about {{output}}.")
    with pytest.raises(ValueError, match="must start with '## system'"):
        load_judge_prompt(str(sectionless))


def test_the_judge_uses_a_prompt_of_your_own(tmp_path: Path) -> None:
    fake = ScriptedModel(provider="jpfake").register()
    path = tmp_path / "judge.md"
    path.write_text(JUDGE.replace("strict evaluator", "lenient grader"))
    engine = Engine(Settings(model=fake.model, cache="off", judge_prompt=str(path)))
    try:
        result = engine.evaluate("Lyon opened a bridge.", CHECKLIST, "Lyon opened a bridge on Monday.")
    finally:
        engine.close()
    assert [v.answer for v in result.verdicts] == ["yes", "yes"]
    systems = {r.messages[0]["content"] for r in fake.requests}
    assert systems == {"You are a lenient grader. Answer one yes/no question about a response.\n"
                       'Reply with a JSON object: {"answer": "yes" or "no", "explanation": "..."}.'}
    assert "<response>\nLyon opened a bridge.\n</response>" in fake.requests[0].user


def aligned_pair(*, learns: bool) -> tuple[ScriptedModel, ScriptedModel]:
    """A reference that says yes to everything, and a target that says no to Q1 -- until its prompt
    holds the lesson about Q1 (``learns``)."""
    reference = ScriptedModel(provider="refake").register()

    def target_answer(req: Any) -> str:
        if req.question == Q1 and not (learns and f"Make sure that: {Q1}" in req.messages[0]["content"]):
            return "no"
        return "yes"

    return reference, ScriptedModel(provider="tgfake", answers=target_answer).register()


def align_judge_prompt(path: Path, reference: ScriptedModel, target: ScriptedModel) -> list[Any]:
    """Up to 3 alignment iterations of the prompt file ``path`` (written from JUDGE)."""
    path.write_text(JUDGE)
    engine = Engine(Settings(cache="off"))
    try:
        aligner = EvaluatorAligner(engine, reference=reference.model, target=target.model)
        return run_align(aligner, path, ITEMS, CHECKLIST, iterations=3, write=True)
    finally:
        engine.close()


def test_alignment_rewrites_the_prompt_when_agreement_rises(tmp_path: Path) -> None:
    reference, target = aligned_pair(learns=True)
    path = tmp_path / "judge.md"
    result = align_judge_prompt(path, reference, target)[-1]
    assert result.status == "no disagreements"  # the second iteration: nothing left to learn
    history = json.loads(history_path(path, "align").read_text())
    (it,) = history["iterations"]
    assert it["agreement_before"] == 0.5 and it["agreement_after"] == 1.0
    assert it["before"] == JUDGE and it["after"] == path.read_text()
    assert f"Make sure that: {Q1}" in path.read_text().split("## user")[0]
    assert [e["status"] for e in history["lessons"]] == ["applied"]
    assert reference.calls_of("lesson") == 1 and reference.calls_of("prompt_edit") == 1  # the optimizer


def test_an_edit_without_gain_is_discarded(tmp_path: Path) -> None:
    reference, target = aligned_pair(learns=False)
    path = tmp_path / "judge.md"
    (result,) = align_judge_prompt(path, reference, target)
    assert result.status == "unchanged" and "0.500 -> 0.500" in result.message and "discarded" in result.message
    assert path.read_text() == JUDGE
    history = json.loads(history_path(path, "align").read_text())
    assert history["iterations"] == [] and [e["status"] for e in history["lessons"]] == ["no gain"]


def test_align_command_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reference, target = aligned_pair(learns=True)
    data = tmp_path / "outputs.jsonl"
    data.write_text("".join(json.dumps({"article": i.source, "summary": {"text": i.output}}) + "\n" for i in ITEMS))
    checklist = tmp_path / "checklist.json"
    checklist.write_text(CHECKLIST.model_dump_json())
    prompt = tmp_path / "prompts" / "judge.md"
    code = main(["align", "--data", str(data), "--source-key", "article", "--output-key", "summary.text",
                 "--checklist", str(checklist), "--reference", reference.model, "--model", target.model,
                 "--prompt", str(prompt), "--cache", "off"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "created" in err and "from the packaged judge prompt" in err
    assert "iteration 1: UPDATED: agreement with the reference 0.500 -> 1.000: the prompt is rewritten" in out
    assert f"--bineval-judge-prompt {prompt}" in out
    assert f"Make sure that: {Q1}" in prompt.read_text()
    load_judge_prompt(str(prompt))  # still a valid evaluator prompt


def test_align_reports_bad_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "outputs.jsonl"
    data.write_text('{"summary": "x"}\n{"text": "y"}\n')
    with pytest.raises(ValueError, match=r"line 2: missing key 'summary'"):
        load_items(data, "summary")
    checklist = tmp_path / "checklist.json"
    checklist.write_text(CHECKLIST.model_dump_json())
    code = main(["align", "--data", str(data), "--output-key", "summary", "--checklist", str(checklist),
                 "--reference", "x/y", "--prompt", str(tmp_path / "j.md"), "--dry-run"])
    assert code == 2 and "missing key 'summary'" in capsys.readouterr().err
    assert not (tmp_path / "j.md").exists()


def test_plugin_option_judge_prompt(pytester: pytest.Pytester) -> None:
    scripted_project(pytester, provider="pjfake", ini="bineval_cache = off", rule='''
def answer(req):
    return "yes" if "LENIENT" in req.messages[0]["content"] else "no"
''')
    (pytester.path / "judge.md").write_text(JUDGE.replace("strict evaluator", "LENIENT evaluator"))
    pytester.makepyfile('''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize.")
def test_it():
    assert_passes("A summary.", dimension="fluency", source="An article.")
''')
    pytester.runpytest().assert_outcomes(failed=1)
    pytester.runpytest("--bineval-judge-prompt=judge.md").assert_outcomes(passed=1)
    (pytester.path / "bad.md").write_text("## system\nx\n\n## user\n{{output}}\n")
    bad = pytester.runpytest("--bineval-judge-prompt=bad.md")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--bineval-judge-prompt: judge prompt *bad.md: needs {{question}}*"])
