"""Helpers shared by the test modules (none imports another test module): the scripted project of the plugin
tests (on :func:`pytest_bineval.testing.project.scripted_project`) and the hand-written checklist of the
real-judge tests."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_bineval.models import Checklist, Question, Verdict
from pytest_bineval.optimize import AlignItem
from pytest_bineval.report.document import ReportDocument
from pytest_bineval.report.record import DimensionResult, EvaluationRecord, Outcome
from pytest_bineval.testing import scripted
from pytest_bineval.testing.project import scripted_project

# A hand-written checklist for the tests that run the real embedded judge (no generation call): the 135M
# model's own checklists are generic, and a pinned hand-written one keeps those runs short and reproducible.
REAL_CHECKLIST: dict[str, Any] = {
    "task": "Summarize the article in one sentence.",
    "dimensions": {"consistency": "The summary states only facts from the article."},
    "requirements": ["The summary states only facts from the article."],
    "questions": [
        {"id": "consistency-1", "dimension": "consistency", "text": "Does the summary name the city mentioned in "
         "the article?", "no_example": "", "requirement": ""},
        {"id": "consistency-2", "dimension": "consistency", "text": "Is every number in the summary also in the "
         "article?", "no_example": "", "requirement": ""},
        {"id": "consistency-3", "dimension": "consistency", "text": "Does the summary say when the bridge "
         "opened?", "no_example": "", "requirement": ""},
    ],
    "model": "hand-written",
    "prompt_version": "1",
}


def real_judge_project(pytester: pytest.Pytester, test: str, suite: str) -> None:
    """A project for the real embedded judge: ``suite`` as ``test_real.py``, its test ``test`` pinned to
    :data:`REAL_CHECKLIST` (run it with ``--bineval-strict``: nothing is generated)."""
    pin = pytester.path / "__bineval__" / "test_real" / f"{test}.json"
    pin.parent.mkdir(parents=True)
    pin.write_text(json.dumps({"format": 1, "checklists": [REAL_CHECKLIST]}))
    pytester.makepyfile(test_real=suite)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


# The fake judge says "no" to every question whose text is listed in NO, raises for those in BOOM,
# and answers "no" to everything when the judged prompt does not carry the task in TASK_MUST_CONTAIN.
ANSWER = '''
def answer(req):
    if req.question in BOOM:
        return RuntimeError("provider exploded: 503")
    if TASK_MUST_CONTAIN and TASK_MUST_CONTAIN not in req.user:
        return "no"
    return "no" if req.question in NO else "yes"
'''

Q = "Does the response meet {} check {}?"

# pytest-xdist with two workers, for a pytester run (see the ``workers`` fixture in conftest.py).
XDIST = ["-p", "xdist", "-n", "2"]


def make_project(pytester: pytest.Pytester, *, no: tuple[str, ...] = (), boom: tuple[str, ...] = (),
                 task_must_contain: str = "", ini: str = "", rules: dict[str, str] | None = None) -> None:
    """The plugin tests' project: a scripted judge ``pfake/judge`` (see ANSWER) and the ini, with ``ini`` lines."""
    scripted_project(pytester, provider="pfake", rule=ANSWER, rules=rules, ini=ini,
                     prelude=f"NO = {set(no)!r}\nBOOM = {set(boom)!r}\nTASK_MUST_CONTAIN = {task_must_contain!r}")


def report_of(pytester: pytest.Pytester, name: str = "report.json") -> ReportDocument:
    """The run's --bineval-report, read back through ReportDocument.load (the typed round trip)."""
    return ReportDocument.load(pytester.path / name)


PASS_AND_FAIL = '''
import pytest

from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize the article.")
def test_good():
    ev = assert_passes("A fine summary.", dimension="fluency", source="An article.")
    assert ev.scores["fluency"] == 1.0

@pytest.mark.bineval(task="Summarize the article.")
def test_bad():
    assert_passes("A wrong summary.", dimension=["consistency", "fluency"], source="An article.")
'''


# The checks' tests: a task, and a checklist whose format questions code answers (a relevance one is judged).
CHECKS_TASK = "Describe the library in at most two sentences, as JSON."

MIXED_CHECKLIST = {
    "task": CHECKS_TASK,
    "dimensions": {"format": "The response has the asked form.", "relevance": "It answers the task."},
    "questions": [
        {"id": "format-1", "dimension": "format", "text": "Does the response have at most 2 sentences?",
         "check": {"kind": "max_sentences", "value": 2}},
        {"id": "format-2", "dimension": "format", "text": "Is the response valid JSON?", "check": {"kind": "json"}},
        {"id": "relevance-1", "dimension": "relevance", "text": "Does the response describe the library?"},
    ],
    "model": "hand-written",
    "prompt_version": "1",
}


# The alignment tests (bineval align): a hand-written checklist of two questions and two outputs to judge.
ALIGN_QUESTIONS = ("Does the response name the city?", "Is every number in the response also in the input?")
ALIGN_CHECKLIST = Checklist(
    task="Summarize the article in one sentence.",
    dimensions={"consistency": "Only facts from the article."},
    questions=[Question(id="c-1", dimension="consistency", text=ALIGN_QUESTIONS[0]),
               Question(id="c-2", dimension="consistency", text=ALIGN_QUESTIONS[1])],
    model="hand-written",
)
ALIGN_ITEMS = [AlignItem(output="Lyon opened a bridge.", source="Lyon opened a bridge on Monday."),
               AlignItem(output="A bridge was opened.", source="Lyon opened a bridge on Monday.")]


# A conftest's pytest_bineval_finished: what it saw, one line per call, in finished.txt beside the project.
FINISHED_HOOK = """

def pytest_bineval_finished(config, document):
    worker = hasattr(config, "workerinput")
    line = f"{worker} {len(document.evaluations)} {document.totals.evaluations} {sorted(document.failed_tests)}"
    with open(config.rootpath / "finished.txt", "a") as fh:
        fh.write(line + "\\n")
"""


def with_finished_hook(pytester: pytest.Pytester) -> None:
    """Add :data:`FINISHED_HOOK` to the project's conftest.py."""
    conftest = pytester.path / "conftest.py"
    conftest.write_text(conftest.read_text() + FINISHED_HOOK)


# Logprobs of the scripted fake judge (a prefilled answer's token and its alternatives), for the answer-first tests.
def logprobs_entry(token: str, *alternatives: tuple[Any, Any]) -> dict[str, Any]:
    """A logprobs entry for ``token`` whose top alternatives are (token, probability) pairs (written as given
    when the probability is not a float: for malformed entries)."""
    top = [{"token": t, "logprob": math.log(p) if isinstance(p, float) else p} for t, p in alternatives]
    return {"token": token, "logprob": top[0]["logprob"] if top else 0.0, "top_logprobs": top}


def scripted_logprobs(monkeypatch: pytest.MonkeyPatch, entries: dict[str, Any]) -> None:
    """The fake's logprobs at the prefilled answer position: ``entries[token]`` for the token it wrote."""
    def logprobs(text: str, skip: int = 0) -> list[Any]:
        token = text[skip:]
        return [entries[token]] if token in entries else []

    monkeypatch.setattr(scripted, "_fake_logprobs", logprobs)


def shared_data_dir() -> Path:
    """The benchmark data: ``$BINEVAL_DATA_DIR``, else ``../shared/data`` beside the repository (never copied in)."""
    env = os.environ.get("BINEVAL_DATA_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared" / "data"


def generate_and_judge(settings: Any, output: str, checklist: Any) -> tuple[Any, Any]:
    """One engine of ``settings``: the checklist of task "T" (fluency) and ``output`` judged with ``checklist``,
    the engine closed afterwards (the cache tests run this twice, to compare what the second run asked)."""
    from pytest_bineval.engine import Engine

    engine = Engine(settings)
    try:
        return engine.checklist("T", ["fluency"]), engine.evaluate(output, checklist)
    finally:
        engine.close()


# The fake judge reads answers.json at each request: {"<output>|<question>", "turn <n>|<question>" (a question
# asked of a conversation's turn n) or "<question>": answer}; an answer is "yes"/"no", "boom" (a provider error), a
# dict (the raw reply) or a list (one item per call, in turn: the repeats of one question get them in order).
ANSWERS_FILE_RULE = '''
import json, pathlib, re, threading

HERE = pathlib.Path(__file__).parent
CALLS = {}
LOCK = threading.Lock()

def answer(req):
    path = HERE / "answers.json"
    table = json.loads(path.read_text()) if path.exists() else {}
    key = req.output + "|" + req.question
    turn = re.search(r"\\(Answer about turn (\\d+),", req.user)
    value = table.get(key, table.get(f"turn {turn.group(1)}|{req.question}" if turn else "",
                                     table.get(req.question, "yes")))
    if isinstance(value, list):
        with LOCK:
            n = CALLS.get(key, 0)
            CALLS[key] = n + 1
        value = value[n % len(value)]
    if value == "boom":
        return RuntimeError("provider exploded: 503")
    if isinstance(value, dict):
        return json.dumps(value)
    return value
'''


# A generator prompt of the optimizer's tests (a news editor's), and its one system line.
NEWS_PROMPT = """## system
You are a news editor. You summarize news articles for a busy reader.

## user
<article>
{{article}}
</article>

Summarize the article above in 2-3 sentences.
"""
NEWS_LINE = "You summarize news articles for a busy reader."


# The optimizer's unit tests: two questions of a summary, and a record of an evaluation as the plugin keeps it.
Q_NUM = "Is every number in the response also in the input?"
Q_LEN = "Is the response at most three sentences long?"


def record(test: str, outcome: Outcome, verdicts: list[tuple[str, str, str]], *, prompt: str | None = "gen.md",
           overall: float | None = None) -> EvaluationRecord:
    """An evaluation record as the plugin keeps it."""
    vs = [Verdict(question_id=f"q{i}", dimension=d, question=q, answer=a, explanation=f"because {q}")  # type: ignore[arg-type]
          for i, (d, q, a) in enumerate(verdicts)]
    yes = sum(v.answer == "yes" for v in vs)
    dims = sorted({d for d, _, _ in verdicts})
    return EvaluationRecord(
        test=test, task="Summarize the article.", prompt=prompt, model="fake/judge", checklist_status="pinned",
        dimensions=[DimensionResult(name=d, score=None, threshold=0.8, outcome=outcome) for d in dims],
        overall=overall if overall is not None else yes / len(vs), outcome=outcome, verdicts=vs,
        output=f"output of {test}", source=f"article of {test}",
    )


# The optimizer's loop tests: a judge rule under which the generator prompt "learns" (once it says "Copy every
# number", the number question passes), and a test file judged with prompts/gen.md.
LEARNING_ANSWER = '''
def answer(req):
    # the generator prompt "learns": once it says "Copy every number", the number question passes
    return "no" if "Does the response meet consistency check 1?" == req.question and "COPY" not in req.user else "yes"
'''
LEARNING_TESTS = '''
from pathlib import Path
import pytest
from pytest_bineval import assert_passes

PROMPT = Path(__file__).parent / "prompts" / "gen.md"

@pytest.mark.bineval(task="Summarize the article.", prompt="prompts/gen.md")
def test_summary():
    made_with = PROMPT.read_text()
    output = "A summary. " + ("COPY" if "Copy every number" in made_with else "")
    assert_passes(output, dimension="consistency", source="An article.", threshold=1.0)
'''


# A support chat in three user turns with an order lookup (assistant turns 3, 5, 7 and 9), and its checklist: a
# question asked of each assistant turn, one about the whole conversation, two tool checks and a per-turn length
# check that turn 5 fails (decided by code: the same on every machine). For the real-judge tests.
SUPPORT_CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are the support assistant of Quire, an online bookshop. Look orders up with "
                                  "the lookup_order tool before you answer about them."},
    {"role": "user", "content": "Hi, where is my order A-1043?"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
        "name": "lookup_order", "arguments": '{"order_id": "A-1043"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "shipped", "carrier": "DPD", "eta": "Friday"}'},
    {"role": "assistant", "content": "Your order A-1043 has shipped with DPD and should arrive on Friday. You can "
                                     "follow the parcel with the tracking link in your confirmation email."},
    {"role": "user", "content": "Can I still change the delivery address?"},
    {"role": "assistant", "content": "Not through us once it has shipped, but DPD lets you redirect it."},
    {"role": "user", "content": "Great, thanks!"},
    {"role": "assistant", "content": "You're welcome. Enjoy your books!"},
]
SUPPORT_CHECKLIST: dict[str, Any] = {
    "task": "Answer the customer's questions about their orders in a support chat, looking orders up with the "
            "lookup_order tool.",
    "dimensions": {"helpfulness": "The assistant answers what the customer asked, politely.",
                   "tools": "The assistant looks orders up before it answers about them."},
    "questions": [
        {"id": "helpfulness-1", "dimension": "helpfulness", "text": "Is the reply polite?", "scope": "each_turn"},
        {"id": "helpfulness-2", "dimension": "helpfulness", "text": "Does the conversation tell the customer where "
         "the order is?"},
        {"id": "helpfulness-3", "dimension": "helpfulness", "text": "Does the reply have at most 15 words?",
         "scope": "each_turn", "check": {"kind": "max_words", "value": 15}},
        {"id": "tools-1", "dimension": "tools", "text": "Does the assistant look the order up?",
         "check": {"kind": "tool_called", "name": "lookup_order", "arguments": {"order_id": "A-1043"}}},
        {"id": "tools-2", "dimension": "tools", "text": "Does the assistant avoid refunding?",
         "check": {"kind": "tool_not_called", "name": "refund_order"}},
    ],
    "model": "hand-written",
}
def terminate_after(pytester: pytest.Pytester, passed: int, *, group: bool, wait: float = 240) -> tuple[int, str]:
    """Run pytest under ``-n 2`` (``-v``, the JSON and HTML reports and JUnit on) in a subprocess, send it SIGTERM
    once the controller has heard of ``passed`` passing tests (to the controller, or to its whole process group as
    a CI runner does), and return its exit code and output. ``wait``: a bound on the wait, not a timing assertion."""
    import signal
    import subprocess
    import sys
    import time

    out = pytester.path / "out.txt"
    with out.open("wb") as log:
        proc = pytester.popen([sys.executable, "-u", "-m", "pytest", "-p", "xdist", "-n", "2", "-v",
                               "--bineval-cache=off", "--bineval-report=report.json", "--bineval-html=report.html",
                               "--junitxml=junit.xml"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

        def heard() -> int:  # -v: "[gw0] [ 16%] PASSED test_x.py::test_y"
            return out.read_text(encoding="utf-8", errors="replace").count(" PASSED ")

        try:
            deadline = time.monotonic() + wait
            while heard() < passed and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            assert proc.poll() is None and heard() == passed, "the run never got that far"
            if group:
                os.killpg(proc.pid, signal.SIGTERM)
            else:
                proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=180)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return proc.returncode, out.read_text(encoding="utf-8", errors="replace")
