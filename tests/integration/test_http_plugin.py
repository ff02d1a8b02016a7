"""What a user sees through pytest and the ``bineval`` command when the judge is a server: JUnit errors, pin
errors, secrets redacted everywhere they could leak, and nothing from litellm on stdout/stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_bineval.testing.faults import FaultServer, Received, Reply, completion, error_body

pytest_plugins = ["pytester"]

INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"


@pytest.fixture(autouse=True, scope="module")
def _litellm_imported_once() -> None:
    """pytester's in-process runs drop modules first imported during a run: import litellm up front."""
    from pytest_bineval.llm.client import import_litellm

    import_litellm()


# -- JUnit: a judge error is an <error>, not a <failure> -----------------------------------------------------------

RAISING_JUDGE = '''
from pytest_bineval.testing import ScriptedModel

def answer(req):
    return RuntimeError("provider exploded") if req.question.endswith("check 2?") else "yes"

FAKE = ScriptedModel(provider="jfake", answers=answer).register()
'''
JUDGED = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize the article.")
def test_judged():
    assert_passes("a summary", dimension="fluency", threshold=0.0)

def test_plain():
    pass
'''


def test_judge_error_is_a_junit_error(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makeconftest(RAISING_JUDGE)
    pytester.makepyfile(test_judged=JUDGED)
    args = ["--bineval-model=jfake/judge", "--bineval-retries=0", "--junitxml=junit.xml"]
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1, errors=1)
    suite = ET.parse(pytester.path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("errors"), suite.get("failures")) == ("1", "0")
    case = next(c for c in suite.iter("testcase") if c.get("name") == "test_judged")
    error = case.find("error")
    assert error is not None and case.find("failure") is None
    assert "provider exploded" in (error.get("message") or "") + (error.text or "")


# -- pins: a malformed pin file is a test ERROR naming the file and the field, never a pass -----------------------

PINNED_TEST = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize it.", dimensions=["consistency"])
def test_pinned():
    assert_passes("x", source="src", threshold=0.0)
'''
GOOD_PIN: dict[str, Any] = {
    "task": "Summarize it.",
    "dimensions": {"consistency": "The response states only facts from the input."},
    "questions": [
        {"id": "consistency-1", "dimension": "consistency", "text": "Is every claim supported?"},
        {"id": "consistency-2", "dimension": "consistency", "text": "Are the numbers right?"},
    ],
}


def _misspelled(pin: dict[str, Any]) -> dict[str, Any]:
    bad = json.loads(json.dumps(pin))
    bad["questions"][1]["dimension"] = "consistancy"
    return {"format": 2, "checklists": [bad]}


@pytest.mark.parametrize(("body", "field", "message"), [
    (_misspelled(GOOD_PIN), "checklists[[]0[]].questions[[]1[]].dimension",
     "'consistancy' is not one of the checklist's dimensions ('consistency')"),
    ({"format": 2, "checklists": [{**GOOD_PIN, "questions": []}]}, "checklists[[]0[]].questions",
     "is empty: a pinned checklist needs at least one question"),
    ({"format": 2, "pins": [GOOD_PIN]}, "field 'checklists'", "is missing or not a list"),
], ids=["unknown dimension", "empty question list", "no checklists key"])
def test_malformed_pin_is_a_test_error_naming_file_and_field(pytester: pytest.Pytester, body: dict[str, Any],
                                                             field: str, message: str) -> None:
    pytester.makeini(INI)
    pytester.makeconftest(RAISING_JUDGE)
    pytester.makepyfile(test_pin=PINNED_TEST)
    pin = pytester.path / "__bineval__" / "test_pin" / "test_pinned.json"
    pin.parent.mkdir(parents=True)
    pin.write_text(json.dumps(body))
    result = pytester.runpytest("--bineval-model=jfake/judge")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*PinError: pinned checklist file {pin}*{field}*{message}*"])
    assert "passed" not in result.stdout.str().splitlines()[-1]


# -- secrets: a server that echoes the key -------------------------------------------------------------------------

KEY = "sk-test-ECHOKEY-1234567890abcdef"
SERVICE_TOKEN = "tok-SERVICE-SECRET-9876"


def _echo(req: Received, index: int) -> Reply:
    sent = req.headers.get("authorization", "").removeprefix("Bearer ")
    user = " ".join(str(m["content"]) for m in req.body.get("messages", []) if m["role"] == "user")
    if "Is the key kept secret?" in user:
        return Reply(401, error_body(f"Incorrect API key provided: {sent}", "invalid_request_error"))
    explanation = f"The response quotes the key {sent} and api_key={sent}."
    return Reply(200, completion(json.dumps({"answer": "no", "explanation": explanation})))


ECHO_TEST = '''
import os
from pytest_bineval import Checklist, Question, assert_passes

CHECKLIST = Checklist(task="Answer.", dimensions={"fluency": "F"}, questions=[
    Question(id="fluency-1", dimension="fluency", text="Is the answer fluent?"),
    Question(id="fluency-2", dimension="fluency", text="Is the key kept secret?")])
ONE = Checklist(task="Answer.", dimensions={"fluency": "F"}, questions=[
    Question(id="fluency-1", dimension="fluency", text="Is the answer fluent?")])
TOKEN = os.environ["MY_SERVICE_TOKEN"]

def test_error():
    assert_passes("my token is " + TOKEN, checklist=CHECKLIST)

def test_failure():
    assert_passes("my token is " + TOKEN, checklist=ONE, source="key " + os.environ["OPENAI_API_KEY"])
'''


def test_no_secret_reaches_terminal_report_junit_or_cache(pytester: pytest.Pytester,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("MY_SERVICE_TOKEN", SERVICE_TOKEN)
    pytester.makeini(INI)
    pytester.makepyfile(test_echo=ECHO_TEST)
    with FaultServer(_echo) as server:
        result = pytester.runpytest("--bineval-model=openai/echo", f"--bineval-api-base={server.base_url}",
                                    "--bineval-retries=0", "--bineval-report=report.json", "--junitxml=junit.xml",
                                    "--bineval-cache-dir=cache", "-rA")
        assert server.received and all(r.headers["authorization"] == f"Bearer {KEY}" for r in server.received)
    result.assert_outcomes(failed=1, errors=1)
    out = result.stdout.str() + result.stderr.str()
    assert "[REDACTED]" in out  # the echoed key was there, and was removed
    places = {"terminal": out.encode(), "report": (pytester.path / "report.json").read_bytes(),
              "junit": (pytester.path / "junit.xml").read_bytes()}
    places.update({str(p): p.read_bytes() for p in (pytester.path / "cache").rglob("*") if p.is_file()})
    assert len(places) > 3
    for where, data in places.items():
        for secret in (KEY, SERVICE_TOKEN, KEY[3:]):
            assert secret.encode() not in data, f"{secret} found in {where}"
    report = json.loads(places["report"])
    failure = next(e for e in report["evaluations"] if e["test"].endswith("test_failure"))
    assert "[REDACTED]" in failure["verdicts"][0]["explanation"]
    assert failure["output"] == "my token is [REDACTED]"


def test_redact_removes_key_shapes_and_env_values(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_bineval.redaction import redact, redact_obj

    monkeypatch.setenv("ACME_API_KEY", "plain-secret-value-42")
    monkeypatch.setenv("SHORT_TOKEN", "abc")  # too short to be told from ordinary text: kept
    text = ("key plain-secret-value-42, Authorization: Bearer abcdefghijk123, api_key=zzz999, "
            '{"api_key": "qqq111"}, sk-proj-AAAAbbbbCCCC1111, AIza' + "x" * 35 + ", abc")
    clean = redact(text)
    for secret in ("plain-secret-value-42", "abcdefghijk123", "zzz999", "qqq111", "sk-proj-AAAA", "AIzaxxx"):
        assert secret not in clean
    assert clean.endswith(", abc")
    assert redact("passed through", ["custom-secret-1"]) == "passed through"
    assert redact_obj({"a": ["custom-secret-1 here"]}, ["custom-secret-1"]) == {"a": ["[REDACTED] here"]}



def test_a_clipped_error_message_keeps_no_part_of_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cause of a failed request is clipped to 300 characters after the secrets are removed, never before:
    a cut inside a key would leave its first characters where the redaction no longer finds them."""
    from pytest_bineval.llm.client import _describe

    key = "proxykey-0123456789abcdefghijklmnopqrstuvwxyz"
    monkeypatch.setenv("MYPROXY_API_KEY", key)

    class AuthenticationError(Exception):
        pass

    cause = _describe(AuthenticationError("x" * 270 + " invalid key " + key))
    assert "proxykey" not in cause and "[REDACTED]" in cause

# -- quiet: nothing from litellm on stdout/stderr; unknown cost is "unknown" ---------------------------------------

def _generation(req: Received, index: int) -> Reply:
    name = ((req.body.get("response_format") or {}).get("json_schema") or {}).get("name")
    if name == "requirements":
        return Reply(200, completion(json.dumps({"requirements": ["The response is short and accurate."]})))
    if name == "questions":
        return Reply(200, completion(json.dumps({"questions": [
            {"requirement": "r", "question": "Is the response short enough?", "no_example": "a long one"}]})))
    return Reply(200, completion(json.dumps({"answer": "yes", "explanation": "It is."})))


BANNERS = ("Provider List", "Give Feedback", "LiteLLM", "litellm.info", "docs.litellm.ai")


def _bineval(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    return subprocess.run([sys.executable, "-m", "pytest_bineval.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


def test_cli_prints_only_json_with_an_unknown_model(tmp_path: Path) -> None:
    with FaultServer(_generation) as server:
        common = ["--model", "openai/my-custom-judge", "--api-base", server.base_url, "--cache", "off"]
        made = _bineval("checklist", "--task", "Summarize the article.", "--dimension", "fluency", *common,
                        cwd=tmp_path)
        assert made.returncode == 0, made.stderr
        checklist = json.loads(made.stdout)  # stdout is the JSON and nothing else
        assert checklist["questions"][0]["text"] == "Is the response short enough?"
        (tmp_path / "c.json").write_text(made.stdout)
        (tmp_path / "out.txt").write_text("A short summary.")
        judged = _bineval("eval", "--checklist", "c.json", "--output", "out.txt", *common, cwd=tmp_path)
    with FaultServer(lambda req, i: Reply(404, error_body("The model `x` does not exist"))) as missing:
        failing = _bineval("eval", "--checklist", "c.json", "--output", "out.txt", "--model", "openai/x",
                           "--api-base", missing.base_url, "--cache", "off", cwd=tmp_path)
    assert judged.returncode == 0, judged.stderr
    data = json.loads(judged.stdout)
    assert data["usage"]["cost_usd"] is None  # unknown, not 0 and not a crash
    assert failing.returncode == 2 and json.loads(failing.stdout)["errors"] == 1
    for proc in (made, judged, failing):
        for banner in BANNERS:
            assert banner not in proc.stdout and banner not in proc.stderr, (banner, proc.stderr)


def test_pytest_output_has_no_litellm_lines(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile('''
        from pytest_bineval import Checklist, Question, assert_passes
        CHECKLIST = Checklist(task="T", dimensions={"fluency": "F"}, questions=[
            Question(id="fluency-1", dimension="fluency", text="Is it fluent?")])

        def test_ok():
            assert_passes("x", checklist=CHECKLIST)

        def test_error():
            assert_passes("y", checklist=CHECKLIST, model="openai/missing")
    ''')
    with FaultServer(lambda req, i: _generation(req, i) if req.body.get("model") != "missing"
                     else Reply(404, error_body("no such model"))) as server:
        result = pytester.runpytest_subprocess("-s", "--bineval-model=openai/judge-x",
                                               f"--bineval-api-base={server.base_url}", "--bineval-cache=off")
    result.assert_outcomes(passed=1, errors=1)
    out = result.stdout.str() + result.stderr.str()
    for banner in BANNERS:
        assert banner not in out, banner
    result.stdout.fnmatch_lines(["*cost: unknown*"])
