"""Bidirectional controls in model text (issue 20): the terminal (the failing test's section, the summary, the
optimize section), the GitHub job summary and the workflow-command annotations show each one visibly, as
``<U+202E>``, so a question or an explanation cannot display in another order than it is written."""

from __future__ import annotations

import json

import pytest

from pytest_bineval.outputs.github import command, md
from pytest_bineval.outputs.terminal import optimize_lines
from pytest_bineval.report.document import OptimizeOutcome
from pytest_bineval.untrusted import BIDI_CONTROLS, inert, one_line, show_controls

pytest_plugins = ["pytester"]

# Each control the brief names, and the Arabic letter mark: every one reorders or embeds text.
CONTROLS = ["\u202e", "\u202a", "\u202b", "\u202c", "\u202d", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e",
            "\u200f", "\u061c"]


def bidi_free(text: str) -> bool:
    return not any(c in text for c in BIDI_CONTROLS)


@pytest.mark.parametrize("control", CONTROLS, ids=[f"U+{ord(c):04X}" for c in CONTROLS])
def test_every_bidi_control_is_shown_visibly(control: str) -> None:
    text = f"the answer is {control}on{control}"
    shown = f"the answer is <U+{ord(control):04X}>on<U+{ord(control):04X}>"
    assert show_controls(text) == shown
    assert inert(text) == shown
    assert one_line(text + "\nmore") == shown + " \u23ce more"
    assert md(text) == shown.replace("<", "&lt;").replace(">", "&gt;")
    assert command("error", text, title=text) == f"::error title={shown}::{shown}"


def test_ordinary_text_is_unchanged() -> None:
    assert show_controls("A plain question? Ja, naïve, 日本語, עברית.") == "A plain question? Ja, naïve, 日本語, עברית."


def test_optimize_section_shows_controls_in_lessons_and_edits() -> None:
    outcome = OptimizeOutcome(prompt="prompts/p.md", status="updated", message="done \u202eok",
                              lessons=[{"status": "kept", "text": "say \u2066no\u2069", "rejected_edit": "x\u200fy"}])
    lines = [text for text, _ in optimize_lines([outcome])]
    assert all(bidi_free(line) for line in lines), lines
    assert any("say <U+2066>no<U+2069>" in line for line in lines)
    assert any("x<U+200F>y" in line for line in lines)


SPOOF = "fine \u202eon si rewsna eht\u202c \u2066x\u2069 \u200f"

CONFTEST = f'''
import json
from pytest_bineval.testing import ScriptedModel

SPOOF = {SPOOF!r}

def answer(req):
    if "check 2" in req.question:
        return RuntimeError("provider said " + SPOOF)
    return json.dumps({{"answer": "no", "explanation": SPOOF}})

def questions(req):
    return json.dumps({{"questions": [
        {{"requirement": "r", "question": f"Does it meet check {{i}} " + SPOOF + "?", "no_example": ""}}
        for i in (1, 2)]}})

FAKE = ScriptedModel(provider="bidifake", answers=answer, rules={{"questions": questions}}).register()
'''


def test_terminal_summary_and_annotations_show_bidi_controls(pytester: pytest.Pytester,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nbineval_model = bidifake/judge\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_spoof='''
        import pytest
        from pytest_bineval import assert_passes

        @pytest.mark.bineval(task="Summarize the article.")
        def test_spoofed():
            assert_passes("A summary.", dimension="fluency", source="An article.")
    ''')
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = pytester.runpytest("--bineval-cache=off", "--bineval-retries=0", "--bineval-report=r.json")
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert bidi_free(out), [line for line in out.splitlines() if not bidi_free(line)]
    # the failure message and the test's section (questions, explanations, causes), the summary, the annotation
    assert out.count("fine <U+202E>on si rewsna eht<U+202C> <U+2066>x<U+2069> <U+200F>") >= 4
    annotations = [line for line in out.splitlines() if line.startswith("::error file=")]
    assert len(annotations) == 1 and "<U+202E>" in annotations[0]
    text = summary.read_text(encoding="utf-8")
    assert bidi_free(text)
    assert "&lt;U+202E&gt;" in text
    # the JSON report keeps the text as the model wrote it: it is data, not a display
    assert "\u202e" in json.dumps(json.loads((pytester.path / "r.json").read_text(encoding="utf-8")),
                                  ensure_ascii=False)
