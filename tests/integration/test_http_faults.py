"""The judge over real HTTP (litellm -> 127.0.0.1) against a scripted fault server: every fault is a judge error
with its cause (or InputTooLargeError), never a pass and never a crash; requests are counted honestly; retries
respect Retry-After and the deadline; structured output is negotiated once per model.

The fault matrix runs here with its waits scaled down (the server's Retry-After and hangs, the client's backoff);
the matrix in real time is the reliability benchmark: ``python -m pytest_bineval.bench.reliability``.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from dataclasses import replace
from email.utils import formatdate
from pathlib import Path
from typing import Any

import pytest

from pytest_bineval import BinevalEncodingWarning, Checklist, Question, Settings
from pytest_bineval.bench.reliability import SCENARIOS, VERDICT_YES, Scenario, run_scenario
from pytest_bineval.engine import Engine, run_sync
from pytest_bineval.kinds import StreamMode
from pytest_bineval.llm.negotiation import FormatNegotiator
from pytest_bineval.llm.retry import RetryPolicy, classify, parse_retry_after
from pytest_bineval.report.document import ReportDocument
from pytest_bineval.report.record import Asked, EvaluationRecord
from pytest_bineval.testing import Request, ScriptedModel
from pytest_bineval.testing.faults import Action, FaultServer, Hang, Received, Reply, completion, error_body


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    """litellm's first request in a process loads its provider modules (seconds): not part of any time bound."""
    run_scenario(SCENARIOS[0], timeout=120.0)


# The matrix's waits, scaled: the server's (a Retry-After in seconds, a hang) by SERVER_WAITS, the client's
# exponential backoff by BACKOFF. A Retry-After longer than the timeout is refused without a wait, and one given as
# an HTTP date has whole seconds: both keep their real value.
TIMEOUT = 2.5
SERVER_WAITS = 0.2
BACKOFF = 0.05


def _scaled(action: Action) -> Action:
    if isinstance(action, Hang):
        return Hang(action.seconds * SERVER_WAITS)
    if isinstance(action, Reply):
        return replace(action, headers=tuple(
            (name, f"{float(value) * SERVER_WAITS:g}")
            if name.lower() == "retry-after" and value.isdigit() and float(value) <= TIMEOUT else (name, value)
            for name, value in action.headers))
    return action


# Where the scaled waits still sleep for seconds: a hang (every try waits out the timeout: no request is meant to be
# answered, so a short timeout cannot cut a reply short) and a dated Retry-After (whole seconds: one retry shows it
# is honoured as well as two do).
SHORTER: dict[str, dict[str, float]] = {"hang": {"timeout": 1.0}, "429 Retry-After date": {"retries": 1}}


def fast(scenario: Scenario) -> Scenario:
    """``scenario`` with the server's waits scaled by SERVER_WAITS (and the least time it must take with them)."""
    def respond(req: Received, index: int) -> Action:
        return _scaled(scenario.respond(req, index))

    return replace(scenario, respond=respond,
                   min_seconds=lambda q, r: scenario.min_seconds(q, r) * SERVER_WAITS)


@pytest.fixture
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's backoff between tries, scaled by BACKOFF (its exponent, cap and jitter as they are)."""
    backoff = RetryPolicy.backoff
    monkeypatch.setattr(RetryPolicy, "backoff", lambda self, attempt, rng=None: backoff(self, attempt, rng) * BACKOFF)


def test_the_scaled_waits_are_the_scenarios_waits_scaled() -> None:
    """What the fast matrix changes: a Retry-After in seconds and a hang, by SERVER_WAITS; nothing else."""
    by_name = {s.name: s for s in SCENARIOS}
    req = Received("/v1/chat/completions", {}, {})
    assert fast(by_name["429 Retry-After 1"]).respond(req, 0).headers == (  # type: ignore[union-attr]
        ("retry-after", f"{SERVER_WAITS:g}"),)
    assert fast(by_name["429 Retry-After 20"]).respond(req, 0) == by_name["429 Retry-After 20"].respond(req, 0)
    assert fast(by_name["hang"]).respond(req, 0) == Hang(60.0 * SERVER_WAITS)
    dated = fast(by_name["429 Retry-After date"]).respond(req, 0)
    assert isinstance(dated, Reply) and not dated.headers[0][1].isdigit()  # an HTTP date: as it was
    assert fast(by_name["malformed JSON"]).respond(req, 0) == by_name["malformed JSON"].respond(req, 0)
    assert fast(by_name["429 Retry-After 1"]).min_seconds(2, 2) == pytest.approx(4 * SERVER_WAITS)


@pytest.mark.usefixtures("fast_backoff")
@pytest.mark.parametrize("stream", ["auto", "off"], ids=["streamed", "two-requests"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_fault_matrix(scenario: Scenario, stream: StreamMode) -> None:
    """Outcome (error with cause / InputTooLargeError / the control's answers), requests seen by the server ==
    requests counted == expected, wall time within the evaluation's budget, Retry-After honoured; streamed (one
    request per question, the fault server streaming its chat completions) and on the two-request path."""
    result = run_scenario(fast(scenario), questions=2, stream=stream, **{"retries": 2, "timeout": TIMEOUT,
                                                                         **SHORTER.get(scenario.name, {})})
    assert not result.silent_pass and not result.crashed
    assert result.problems == [], result


def checklist(n: int) -> Checklist:
    return Checklist(task="T", dimensions={"consistency": "D"},
                     questions=[Question(id=f"consistency-{i}", dimension="consistency", text=f"Is check {i} met?")
                                for i in range(1, n + 1)])


def _rejects_json_schema(req: Received, index: int) -> Any:
    fmt = (req.body.get("response_format") or {}).get("type")
    if fmt == "json_schema":
        return Reply(500, error_body("('body', 'response_format', 'type'): Input should be 'text' or 'json_object'"))
    return Reply(200, completion(VERDICT_YES))


def test_negotiation_is_once_per_model_and_remembered_with_concurrency() -> None:
    with FaultServer(_rejects_json_schema) as server:
        engine = Engine(Settings(model="openai/fault", api_base=server.base_url, cache="off", concurrency=4))
        first = engine.evaluate("x", checklist(4))
        assert [v.answer for v in first.verdicts] == ["yes"] * 4
        rejected = sum(r.body["response_format"]["type"] == "json_schema" for r in server.received)
        assert 1 <= rejected <= 4  # the concurrent first requests may all be refused, then all move on together
        assert first.usage.llm_calls == server.requests == 4 + rejected
        assert first.usage.failed_requests == rejected
        assert first.usage.structured_output == {"openai/fault": "json_object"}
        before = server.requests
        second = engine.evaluate("y", checklist(4))  # remembered: no json_schema request any more
        assert server.requests - before == second.usage.llm_calls == 4
        assert {r.body["response_format"]["type"] for r in server.received[before:]} == {"json_object"}
        assert engine.usage.structured_output == {"openai/fault": "json_object"}
        engine.close()


def test_negotiator_moves_concurrent_refusals_on_once() -> None:
    formats = FormatNegotiator()
    assert formats.form("custom/model") == "json_schema"
    assert formats.downgrade("custom/model", "json_schema") == ("json_object", True)
    assert formats.downgrade("custom/model", "json_schema") == ("json_object", False)  # a late refusal
    assert formats.downgrade("custom/model", "json_object") == ("prompt", True)
    assert formats.downgrade("custom/model", "prompt") == (None, False)
    assert formats.downgraded() == {"custom/model": "prompt"}


@pytest.mark.parametrize(("value", "seconds"), [("20", 20.0), ("0", 0.0), ("1.5", 1.5), ("soon", None), ("-3", 0.0)])
def test_retry_after_seconds(value: str, seconds: float | None) -> None:
    assert parse_retry_after(value) == seconds


def test_retry_after_http_date() -> None:
    now = 1_800_000_000.0
    assert parse_retry_after(formatdate(now + 30, usegmt=True), now) == pytest.approx(30.0)
    assert parse_retry_after(formatdate(now - 30, usegmt=True), now) == 0.0  # in the past: retry now


def test_backoff_is_exponential_capped_and_jittered() -> None:
    policy = RetryPolicy(retries=10, timeout=60.0, base=0.5, cap=8.0)
    for attempt in range(10):
        full = min(8.0, 0.5 * 2 ** attempt)
        delays = {policy.backoff(attempt) for _ in range(50)}
        assert all(full * 0.5 <= d <= full for d in delays)
        assert len(delays) > 1  # jittered
    assert policy.wait(0, 5.0, remaining=30.0) == (5.0, "")  # Retry-After honoured as given
    wait, why = policy.wait(0, 90.0, remaining=300.0)
    assert wait is None and "more than the timeout" in why
    wait, why = policy.wait(0, 5.0, remaining=3.0)
    assert wait is None and "beyond this question's deadline" in why
    wait, why = policy.wait(0, 2.5, remaining=3.0)  # a request needs at least 1 s after the wait
    assert wait is None and "beyond this question's deadline" in why


def test_an_evaluation_has_a_total_deadline() -> None:
    """Eight questions that all hang, asked one at a time: the evaluation ends at its deadline
    (timeout * (retries + 1) + 1 s), not after 8 * 3 timeouts."""

    with FaultServer(lambda req, i: Hang(30.0)) as server:
        engine = Engine(Settings(model="openai/fault", api_base=server.base_url, cache="off", concurrency=1,
                                 timeout=1.0, retries=2))
        started = time.monotonic()
        result = engine.evaluate("x", checklist(8))
        took = time.monotonic() - started
        engine.close()
    assert took <= 1.0 * 3 + 1.0 + 1.0
    assert [v.answer for v in result.verdicts] == ["error"] * 8
    assert any("before the question was asked" in (v.error or "") for v in result.verdicts)
    assert result.usage.llm_calls == server.requests <= 4


def test_classify() -> None:
    from pytest_bineval.llm._litellm import import_litellm

    litellm = import_litellm()
    ctx = litellm.BadRequestError(message="Requested tokens (9000) exceed context window of 8192", model="m",
                                  llm_provider="openai")
    assert classify(ctx) == "too_large"
    bad = litellm.BadRequestError(message="temperature too high", model="m", llm_provider="openai")
    assert classify(bad) == "fatal"
    assert classify(litellm.RateLimitError(message="slow", model="m", llm_provider="openai")) == "transient"
    assert classify(asyncio.TimeoutError("no reply")) == "transient"
    assert classify(KeyError("weird")) == "fatal"


# -- encoding and event-loop noise -------------------------------------------------------------------------------

def test_lone_surrogates_are_replaced_and_said(fake: ScriptedModel, cache_dir: Path, tmp_path: Path) -> None:
    output = "A summary with a broken character \udc80 inside."
    for mode in ("off", "on"):
        with pytest.warns(BinevalEncodingWarning, match="2 lone surrogate"):
            engine = Engine(Settings(model=fake.model, cache=mode, cache_dir=str(cache_dir)))  # type: ignore[arg-type]
            result = engine.evaluate(output, checklist(2), "source \ud800")
            engine.close()
        assert [v.answer for v in result.verdicts] == ["yes", "yes"]
    sent = fake.requests[-1].user
    assert "\ufffd" in sent and "\udc80" not in sent
    # the record and the report take it too (the output is kept with the replacement character)
    record = EvaluationRecord.build(Asked(output=output), result, checklist(2).questions,
                                    thresholds={"consistency": 0.5}, status="explicit", test="t")
    assert "\ufffd" in record.output
    ReportDocument(evaluations=[record]).write(tmp_path / "report.json")
    assert "broken character" in (tmp_path / "report.json").read_text(encoding="utf-8")


def _raise_inside() -> None:
    async def boom() -> None:
        raise ValueError("the judge path failed")

    run_sync(boom())


def test_run_sync_exceptions_carry_no_event_loop_context() -> None:
    with pytest.raises(ValueError) as info:
        _raise_inside()
    assert info.value.__context__ is None and info.value.__cause__ is None
    assert "no running event loop" not in "".join(traceback.format_exception(info.value))

    async def inside_a_loop() -> None:  # the thread path
        with pytest.raises(ValueError) as inner:
            _raise_inside()
        assert "no running event loop" not in "".join(traceback.format_exception(inner.value))

    asyncio.run(inside_a_loop())


def test_any_exception_in_the_judge_path_is_an_error_verdict(fake: ScriptedModel, cache_dir: Path) -> None:
    def answer(req: Request) -> Any:
        if "check 1" in req.question:
            return ZeroDivisionError("division by zero inside the provider")
        if "check 2" in req.question:
            return "null"  # JSON, but no object
        return "yes"

    fake.answers = answer
    engine = Engine(Settings(model=fake.model, cache_dir=str(cache_dir), retries=1))
    result = engine.evaluate("x", checklist(3))
    engine.close()
    assert [v.answer for v in result.verdicts] == ["error", "error", "yes"]
    # litellm reports an in-process provider's exception as an APIConnectionError (retried, as transient)
    assert "division by zero inside the provider" in (result.verdicts[0].error or "")
    assert "Traceback" not in (result.verdicts[0].error or "")
    assert "no JSON object" in (result.verdicts[1].error or "")
    assert result.usage.llm_calls == fake.calls_of("verdict") == 2 + 2 + 1
    assert result.usage.failed_requests == 4


# -- the request count reaches the summary, and the negotiation is said once ---------------------------------------

PROJECT = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize the article.")
@pytest.mark.parametrize("i", range(3))
def test_summary(i):
    assert_passes(f"summary {{i}}", dimension="fluency", checklist=CHECKLIST, threshold=0.5)
'''
CHECKLIST = ('from pytest_bineval import Checklist, Question\n'
             'CHECKLIST = Checklist(task="Summarize the article.", dimensions={"fluency": "F"}, questions=['
             'Question(id="fluency-1", dimension="fluency", text="Is it fluent?")])\n')


def test_summary_counts_failed_requests_and_says_the_fallback_once(pytester: pytest.Pytester,
                                                                    workers: list[str]) -> None:
    with FaultServer(_rejects_json_schema) as server:
        pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
        pytester.makepyfile(test_s=CHECKLIST + PROJECT.format())
        args = ["--bineval-model=openai/fault", f"--bineval-api-base={server.base_url}", "--bineval-cache=off",
                "--bineval-report=report.json"]
        result = pytester.runpytest(*workers, *args)
        result.assert_outcomes(passed=3)
        seen = server.requests
    out = result.stdout.str()
    assert out.count("judge openai/fault: structured output (json_schema) not supported, using json_object") == 1
    report = ReportDocument.load(pytester.path / "report.json")
    assert report.totals.llm_calls == seen  # every request the server saw, refused ones included
    assert report.totals.failed_requests == seen - 3
    result.stdout.fnmatch_lines([f"*requests: {seen} ({seen - 3} failed)*"])


def test_failed_requests_of_a_judge_error_are_in_the_summary(pytester: pytest.Pytester) -> None:
    with FaultServer(lambda req, i: Reply(503, error_body("overloaded"))) as server:
        # the ini options this time: bineval_model / bineval_api_base
        pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\nbineval_model = openai/fault\n"
                         f"bineval_api_base = {server.base_url}\n")
        pytester.makepyfile(test_s=CHECKLIST + PROJECT.format())
        result = pytester.runpytest("--bineval-cache=off", "--bineval-retries=1", "--bineval-timeout=5")
        result.assert_outcomes(errors=3)
        assert server.requests == 6
    result.stdout.fnmatch_lines(["*judge errors: 3, requests: 6 (6 failed)*cost: unknown"])
    assert "LLM calls" not in result.stdout.str()


def test_a_stopped_server_is_named_with_the_cause_and_a_hint() -> None:
    """Issue 20, item 11: a port nobody listens on; through litellm, as a real server would be reached."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    base = f"http://127.0.0.1:{port}/v1"
    checklist = Checklist(task="t", dimensions={"d": "d"}, questions=[Question(id="d-1", dimension="d", text="q?")])
    engine = Engine(Settings(model="openai/judge", api_base=base, cache="off", retries=1, timeout=10))
    result = run_sync(engine.aevaluate("out", checklist))
    (verdict,) = result.verdicts
    assert verdict.answer == "error"
    assert verdict.error == f"cannot connect to {base} (connection refused): is the server running?"
    assert "InternalServerError" not in (verdict.error or "") and result.usage.llm_calls == 2  # retried once


def test_a_redirect_to_another_host_is_refused_naming_both_hosts() -> None:
    """Issue 20, item 3: the verdict must not come from a host nobody configured; not retried. A redirect within
    the host is followed."""
    answering = FaultServer(lambda r, i: Reply(200, completion(VERDICT_YES))).start()
    port = answering.base_url.split(":")[2].split("/")[0]
    away = FaultServer(lambda r, i: Reply(307, {}, (("location", f"http://localhost:{port}/v1/chat/completions"),)))
    within = FaultServer(lambda r, i: Reply(308, {}, (("location", f"{answering.base_url}/chat/completions"),)))
    checklist = Checklist(task="t", dimensions={"d": "d"}, questions=[Question(id="d-1", dimension="d", text="q?")])
    try:
        with away, within:
            engine = Engine(Settings(model="openai/judge", api_base=away.base_url, cache="off", retries=2))
            (verdict,) = run_sync(engine.aevaluate("out", checklist)).verdicts
            assert verdict.answer == "error" and answering.received == [] and len(away.received) == 1
            origin = away.base_url.split("/")[2]
            assert verdict.error is not None and verdict.error.startswith(
                f"the API base's host {origin} redirected (HTTP 307) to another host, localhost:{port}: refused")
            engine = Engine(Settings(model="openai/judge", api_base=within.base_url, cache="off", retries=0))
            (verdict,) = run_sync(engine.aevaluate("out", checklist)).verdicts
            assert verdict.answer == "yes" and len(answering.received) == 1
    finally:
        answering.stop()


def test_a_key_sent_over_plain_http_off_this_machine_is_warned_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 20, item 3: http:// to a host that is not this machine carries the key in clear text: one warning per
    base. (The server is on 127.0.0.1, so the test makes loopback count as remote; no other host is reached.)"""
    from pytest_bineval.llm import http

    assert http.is_loopback("127.0.0.1") and http.is_loopback("localhost") and http.is_loopback("::1")
    assert not http.is_loopback("judge.example.com") and not http.is_loopback("10.0.0.5")
    monkeypatch.setattr(http, "_warned", set())
    monkeypatch.setattr(http, "is_loopback", lambda host: False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    checklist = Checklist(task="t", dimensions={"d": "d"}, questions=[
        Question(id=f"d-{i}", dimension="d", text=f"q{i}?") for i in (1, 2)])
    with FaultServer(lambda r, i: Reply(200, completion(VERDICT_YES))) as server, \
            pytest.warns(http.BinevalInsecureKeyWarning, match="clear text to http://127.0.0.1") as caught:
        engine = Engine(Settings(model="openai/judge", api_base=server.base_url, cache="off", retries=0))
        result = run_sync(engine.aevaluate("out", checklist))
        http.warn_plain_http_key(server.base_url.replace("http://", "https://"))  # https: nothing to say
    assert [v.answer for v in result.verdicts] == ["yes", "yes"]
    assert len([w for w in caught if issubclass(w.category, http.BinevalInsecureKeyWarning)]) == 1
    assert server.received[0].headers.get("authorization") == "Bearer sk-test-not-a-real-key"


def _fails_turn_5(req: Received, index: int) -> Any:
    about_5 = any("(Answer about turn 5," in str(m.get("content")) for m in req.body.get("messages", []))
    return Reply(503, error_body("overloaded")) if about_5 else Reply(200, completion(VERDICT_YES))


@pytest.mark.parametrize("stream", ["auto", "off"], ids=["streamed", "two-requests"])
def test_a_conversation_whose_turn_fails_is_an_error_of_that_turn(stream: StreamMode) -> None:
    """A conversation over HTTP: the server fails every ask about turn 5; that turn's verdict is a judge error naming
    its cause (never a pass), the other turns are answered, the checks send nothing, every request is counted."""
    from support import SUPPORT_CHAT, SUPPORT_CHECKLIST

    with FaultServer(_fails_turn_5) as server:
        engine = Engine(Settings(model="openai/fault", api_base=server.base_url, cache="off", retries=1,
                                 timeout=10.0, stream=stream))
        try:
            ev = engine.evaluate(SUPPORT_CHAT, Checklist.model_validate(SUPPORT_CHECKLIST))
        finally:
            engine.close()
        judged = [(v.turn, v.answer) for v in ev.verdicts if v.decided_by == "judge"]
        assert sorted(judged, key=lambda t: t[0] or 0) == [(None, "yes"), (3, "yes"), (5, "error"), (7, "yes"),
                                                          (9, "yes")]
        (error,) = ev.errors
        cause = error.error or ""
        assert error.turn == 5 and "ServiceUnavailableError" in cause and "overloaded" in cause
        assert ev.usage.llm_calls == server.requests and ev.usage.failed_requests == 2  # the ask and its retry
        about_5 = [r for r in server.received
                   if any("(Answer about turn 5," in str(m.get("content")) for m in r.body["messages"])]
        assert len(about_5) == 2 and all('<turn n="6"' not in str(r.body["messages"]) for r in about_5)
