"""Conversations under test through pytester and the real outputs, with a scripted judge: assert_passes, the async
twin and the bineval fixture take message lists; a per-turn failure names its turn in the terminal section, the
summary, the JSON report, the PR comment and the HTML transcript; tool checks cost no request; a pinned checklist
keeps its scopes; a baseline comparison over conversations matches turns and says when a conversation changed
length. In-process; under ``-p xdist -n 2`` once, for what the controller does with what its workers kept (the gate
re-asks a turn of a conversation). A conversation's records through a worker (the failing turn in every output) are
tests/plugin/test_xdist.py's project of every feature."""

from __future__ import annotations

import json

import pytest
from support import XDIST

from pytest_bineval.report.document import ReportDocument
from pytest_bineval.testing.project import scripted_project

pytest_plugins = ["pytester"]

# The judge says no to "Is the reply polite?" about the turns listed in rude.txt (none when it is missing), and
# about a turn whose reply is "Whatever." (what the assistant says at turn 7 when curt.txt exists). Every ask of a
# turn is logged (asked.jsonl: the turn named, the turns the judge read, the last one's reply): the gate's re-asks
# too, made by the process that compares (the pytest-xdist controller).
RULE = '''
import json, pathlib, re

HERE = pathlib.Path(__file__).parent

def answer(req):
    path = HERE / "rude.txt"
    rude = path.read_text().split() if path.exists() else []
    turn = re.search(r"\\(Answer about turn (\\d+),", req.user)
    if turn:
        turns = re.findall(r'<turn n="(\\d+)"', req.output)
        last = req.output.rsplit('<turn n=', 1)[-1]
        with open(HERE / "asked.jsonl", "a") as log:
            log.write(json.dumps({"turn": int(turn.group(1)), "read": [int(t) for t in turns],
                                  "whatever": "Whatever." in last}) + "\\n")
    if req.question == "Is the reply polite?" and turn and (turn.group(1) in rude or (
            turn.group(1) == "7" and "Whatever." in req.output)):
        return "no"
    return "yes"
'''

SUITE = '''
import json, pathlib

import pytest
from pytest_bineval import BinevalAssertionError, Checklist, Conversation, assert_passes, assert_passes_async

HERE = pathlib.Path(__file__).parent
CHECKLIST = Checklist(
    task="Answer the customer's questions about their orders in a support chat, looking orders up with the tool.",
    dimensions={"tone": "The assistant is polite.", "tools": "The assistant uses the right tools."},
    questions=[
        {"id": "tone-1", "dimension": "tone", "text": "Is the reply polite?", "scope": "each_turn"},
        {"id": "tone-2", "dimension": "tone", "text": "Does the conversation end with the customer helped?"},
        {"id": "tools-1", "dimension": "tools", "text": "Does the assistant look the order up?",
         "check": {"kind": "tool_called", "name": "lookup_order", "arguments": {"order_id": "A-1043"}}},
        {"id": "tools-2", "dimension": "tools", "text": "Does the assistant avoid refunds?",
         "check": {"kind": "tool_not_called", "name": "refund"}},
    ])


def chat(extra_turns=0):
    messages = [
        {"role": "system", "content": "You are the support assistant of a bookshop."},
        {"role": "user", "content": "Hi, where is my order A-1043?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "lookup_order", "arguments": '{"order_id": "A-1043"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "shipped"}'},
        {"role": "assistant", "content": "It shipped <script>alert(1)</script> yesterday."},
        {"role": "user", "content": "Thanks!"},
        {"role": "assistant", "content": "Whatever." if (HERE / "curt.txt").exists() else "You're welcome!"},
    ]
    for i in range(extra_turns // 2):
        messages += [{"role": "user", "content": f"One more thing ({i})."}, {"role": "assistant", "content": "Sure."}]
    return messages


EXTRA = int((HERE / "extra.txt").read_text()) if (HERE / "extra.txt").exists() else 0


@pytest.mark.parametrize("shop", ["books", "games"])
def test_support_chat(shop):
    ev = assert_passes(chat(EXTRA), checklist=CHECKLIST, threshold=1.0)
    assert sorted(v.turn for v in ev.verdicts if v.question_id == "tone-1") == [3, 5, 7] + [
        9 + 2 * i for i in range(EXTRA // 2)]


def test_agent_tools_cost_no_request():
    ev = assert_passes(Conversation(chat()), checklist=CHECKLIST.select(["tools"]), threshold=1.0)
    assert ev.usage.llm_calls == 0 and [v.decided_by for v in ev.verdicts] == ["code", "code"]


def test_the_fixture_and_the_async_twin_take_messages(bineval):
    import asyncio

    ev = bineval.evaluate(chat(), CHECKLIST, dimensions=["tools"])
    assert [v.answer for v in ev.verdicts] == ["yes", "yes"]
    ev = asyncio.run(assert_passes_async(chat(), checklist=CHECKLIST.select(["tools"])))
    assert ev.overall == 1.0
'''


def project(pytester: pytest.Pytester) -> None:
    scripted_project(pytester, provider="cfake", rule=RULE)
    pytester.makepyfile(test_chat=SUITE)


def run(pytester: pytest.Pytester, xdist: list[str], *args: str) -> pytest.RunResult:
    """A run with no reply cache: the scripted judge's answers of this run, not the last run's (in-process: under
    xdist the workers are processes anyway)."""
    return pytester.runpytest(*xdist, "--bineval-cache=off", *args)


def test_a_per_turn_failure_names_its_turn_in_every_output(pytester: pytest.Pytester) -> None:
    project(pytester)
    (pytester.path / "rude.txt").write_text("5")
    result = run(pytester, [], "--bineval-report=report.json", "--bineval-html=report.html",
                 "--bineval-pr-comment=comment.md", "-rf")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines([
        "E       first step that went wrong: turn 5 (assistant)",  # the failure message
        "E         [[]tone] turn 5 (assistant): Is the reply polite?",
        "*- bineval -*",  # the section under the test
        "first step that went wrong: turn 5 (assistant): [[]tone] Is the reply polite? -> *",
        "*BELOW THRESHOLD test_chat.py::test_support_chat[[]books]: tone 0.75 < 1.00, tools 1.00 >= 1.00",
        "    [[]tone] turn 5 (assistant): Is the reply polite?",
        "        -> no: scripted no for: Is the reply polite?",
        "    first step that went wrong: turn 5 (assistant): [[]tone] Is the reply polite? -> no: *",
    ])
    doc = ReportDocument.load(pytester.path / "report.json")
    failed = [r for r in doc.evaluations if r.outcome == "failed"]
    assert len(failed) == 2 and all(r.first_failing_turn == 5 and len(r.conversation or []) == 7 for r in failed)
    assert {r.first_failing_turn for r in doc.evaluations if r.outcome == "passed"} == {None}
    tools = next(r for r in doc.evaluations if r.test.endswith("test_agent_tools_cost_no_request"))
    assert tools.usage.llm_calls == 0
    comment = (pytester.path / "comment.md").read_text()
    assert "### Conversations: the first step that went wrong" in comment
    assert "| `test_chat.py::test_support_chat[books]` | turn 5 (assistant) | tone | Is the reply polite? |" in comment
    html = (pytester.path / "report.html").read_text()
    assert 'class="turn assistant failing first"' in html and "First step that went wrong" in html
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def asked(pytester: pytest.Pytester) -> list[dict[str, object]]:
    path = pytester.path / "asked.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_baseline_comparison_over_conversations(pytester: pytest.Pytester) -> None:
    project(pytester)
    run(pytester, [], "--bineval-report=base.json").assert_outcomes(passed=4)
    # the same conversations, a judge that now says no about turn 7: a flip with the same input is the judge's noise
    (pytester.path / "rude.txt").write_text("7")
    result = run(pytester, [], "--bineval-baseline=base.json", "--bineval-report=now.json",
                 "--bineval-pr-comment=comment.md")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["UNSTABLE FLIP test_chat.py::test_support_chat[[]books] [[]tone] turn 7 (assistant): "
                                 "Is the reply polite?: yes -> no (same output and source; *"])
    now = ReportDocument.load(pytester.path / "now.json")
    assert now.regressions is not None
    changes = [c for d in now.regressions.compared for c in d.changes]
    assert {(c.kind, c.turn) for c in changes} == {("regression", 7)} and len(changes) == 2
    assert all(c.flip is not None and c.flip.status == "same input" for c in changes)
    assert sum(d.unchanged for d in now.regressions.compared) == 2 * 5 + 2 + 2  # the other turns, the checks
    (tone,) = [s for s in now.regressions.suite if s.name == "tone"]
    assert (tone.evaluations, tone.questions) == (2, 8)  # a conversation is one cluster: its 4 verdicts count once
    (pytester.path / "rude.txt").unlink()
    regressed_at_turn_7(pytester, [])
    (pytester.path / "curt.txt").unlink()
    (pytester.path / "extra.txt").write_text("2")
    result = run(pytester, [], "--bineval-baseline=base.json", "--bineval-pr-comment=comment.md")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["CONVERSATION CHANGED test_chat.py::test_support_chat[[]books]: the conversation "
                                 "gained turns: 9 now, 7 in the baseline; turns 8-9 are new, their verdicts are not "
                                 "compared"])
    assert "Conversations whose turns changed:" in (pytester.path / "comment.md").read_text()


def test_under_xdist_the_controller_re_asks_a_turn_with_the_conversation_its_worker_kept(
        pytester: pytest.Pytester) -> None:
    """The one run of this module under ``-n 2``: the controller compares the merged conversations' records with the
    baseline and re-asks turn 7 of each, up to turn 7, from the conversations its workers sent it."""
    project(pytester)
    run(pytester, [], "--bineval-report=base.json").assert_outcomes(passed=4)  # how it ran is not the subject
    regressed_at_turn_7(pytester, XDIST)


def regressed_at_turn_7(pytester: pytest.Pytester, xdist: list[str]) -> None:
    """The assistant turns curtly at turn 7: the gate re-asks turn 7's question of both conversations up to turn 7."""
    (pytester.path / "curt.txt").write_text("")
    (pytester.path / "asked.jsonl").unlink(missing_ok=True)
    result = run(pytester, xdist, "--bineval-baseline=base.json", "--bineval-report=now.json",
                 "--bineval-fail-on-regression")
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "REGRESSED test_chat.py::test_support_chat[[]books] (shop='books'): output changed",
        "  [[]tone] turn 7 (assistant): Is the reply polite?: yes -> no (confirmed; re-asked: now no no no*; "
        "baseline yes yes yes*)",
    ])
    now = ReportDocument.load(pytester.path / "now.json")
    assert now.regressions is not None and len(now.regressions.regressed_cases()) == 2
    assert now.regressions.confirmation is not None and now.regressions.confirmation.reasks > 0
    about_7 = [a for a in asked(pytester) if a["turn"] == 7]
    first_asks = 2  # one per test (the explanation of a no names no turn again)
    assert len(about_7) == first_asks + now.regressions.confirmation.reasks
    assert all(a["read"] == list(range(1, 8)) for a in about_7)  # the conversation up to and including turn 7
    assert sum(bool(a["whatever"]) for a in about_7) == first_asks + now.regressions.confirmation.reasks // 2


def test_a_pinned_checklist_keeps_its_scopes(pytester: pytest.Pytester) -> None:
    questions = json.dumps({"questions": [
        {"requirement": "polite", "question": "Is the reply polite and friendly?", "no_example": "rude",
         "scope": "each_turn"},
        {"requirement": "solved", "question": "Does the conversation solve the problem?", "no_example": "unsolved"}]})
    scripted_project(pytester, provider="pinfake", answers={}, rules={"questions": f"lambda req: {questions!r}"})
    pytester.makepyfile(test_pinned='''
        import pytest
        from pytest_bineval import assert_passes

        CHAT = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
                {"role": "user", "content": "Bye"}, {"role": "assistant", "content": "Goodbye!"}]

        @pytest.mark.bineval(task="Chat with the customer politely.", dimensions=["relevance"])
        def test_chat():
            ev = assert_passes(CHAT)
            assert [(v.question, v.turn) for v in ev.verdicts] == [
                ("Does the conversation solve the problem?", None), ("Is the reply polite and friendly?", 2),
                ("Is the reply polite and friendly?", 4)]
    ''')
    pytester.runpytest("--bineval-update-checklists").assert_outcomes(passed=1)
    pin = json.loads((pytester.path / "__bineval__" / "test_pinned" / "test_chat.json").read_text())
    assert [q.get("scope") for q in pin["checklists"][0]["questions"]] == ["each_turn", None]
    pytester.runpytest("--bineval-strict").assert_outcomes(passed=1)
