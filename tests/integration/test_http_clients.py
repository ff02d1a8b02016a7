"""The hosted path's HTTP clients over real HTTP (127.0.0.1): one client per base URL and event loop, reused by every
request and closed at the end; the CA bundle loaded once and only for https://; one event loop per engine and
thread for sync callers, any loop for async ones (pytest-asyncio); impossible usage from the provider; a
structured-output form learned in one run remembered in the next (issues 32 and 33)."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest

from pytest_bineval import Checklist, Question, Settings
from pytest_bineval.bench.reliability import VERDICT_YES
from pytest_bineval.engine import Engine
from pytest_bineval.errors import BudgetReachedError
from pytest_bineval.llm.accounting import BinevalUsageWarning
from pytest_bineval.llm.http import HttpClients
from pytest_bineval.testing.faults import FaultServer, Received, Reply, anthropic_message, completion, error_body


def checklist(n: int) -> Checklist:
    return Checklist(task="T", dimensions={"consistency": "D"},
                     questions=[Question(id=f"consistency-{i}", dimension="consistency", text=f"Is check {i} met?")
                                for i in range(1, n + 1)])


def _yes(req: Received, index: int) -> Reply:
    return Reply(200, completion(VERDICT_YES))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_one_client_per_base_and_loop_reused_by_every_request_and_closed_at_the_end() -> None:
    with FaultServer(_yes) as server:
        engine = Engine(Settings(model="openai/fault", api_base=server.base_url, cache="off", concurrency=2,
                                 stream="off"))
        for output in ("a", "b", "c"):
            assert [v.answer for v in engine.evaluate(output, checklist(2)).verdicts] == ["yes", "yes"]
        assert engine.http.made["httpx"] == 1 and engine.http.open_clients() == 1
        # keep-alive: 6 requests over at most 2 connections (2 questions asked at once)
        assert server.requests == 6 and server.connections <= 2
        client = next(iter(engine.http._clients.values()))
        engine.close()
        assert engine.http.open_clients() == 0 and client.is_closed
        # a closed engine opens what it needs again
        assert [v.answer for v in engine.evaluate("d", checklist(1)).verdicts] == ["yes"]
        engine.close()
    assert engine.http.made.get("ssl", 0) == 0  # http://: the CA bundle was never loaded


def test_a_client_per_thread_loop_each_closed_at_the_end() -> None:
    with FaultServer(_yes) as server:
        engine = Engine(Settings(model="openai/fault", api_base=server.base_url, cache="off", stream="off"))
        answers: list[str] = []

        def work() -> None:
            for output in ("a", "b"):
                answers.extend(v.answer for v in engine.evaluate(output, checklist(1)).verdicts)

        threads = [threading.Thread(target=work) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert answers == ["yes"] * 4 and engine.http.made["httpx"] == 2 and engine.http.open_clients() == 2
        engine.close()
        assert engine.http.open_clients() == 0


def test_the_ca_bundle_is_loaded_once_and_only_for_https(monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[Any] = []
    original = ssl.SSLContext.load_verify_locations

    def counted(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append(args)
        original(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    pool = HttpClients()

    async def post(base: str) -> str:
        async with pool.scope(), pool.http(base) as http:
            try:
                response = await http.post(f"{base}/chat/completions", json={})
            except Exception as exc:  # nothing listens on the https port: the TLS side was made all the same
                return type(exc).__name__
            return str(response.status_code)

    with FaultServer(_yes) as server:
        for _ in range(3):
            assert asyncio.run(post(server.base_url)) == "200"
    assert loads == [] and pool.made.get("ssl", 0) == 0
    https = f"https://127.0.0.1:{_closed_port()}/v1"
    for _ in range(3):  # three loops, three clients: one SSL context
        assert asyncio.run(post(https)) == "ConnectError"
    assert pool.made["ssl"] == 1 and len(loads) == 1 and pool.made["httpx"] == 6


def test_outside_a_scope_a_client_serves_one_request_and_is_closed() -> None:
    pool = HttpClients()

    async def twice(base: str) -> list[Any]:
        clients = []
        for _ in range(2):
            async with pool.http(base) as http:
                clients.append(http)
                await http.post(f"{base}/chat/completions", json={})
        return clients

    with FaultServer(_yes) as server:
        first, second = asyncio.run(twice(server.base_url))
    assert first is not second and first.is_closed and second.is_closed and pool.open_clients() == 0


@pytest.mark.asyncio
async def test_aevaluate_on_pytest_asyncios_loop_closes_its_clients() -> None:
    with FaultServer(_yes) as server:
        engine = Engine(Settings(model="openai/fault", api_base=server.base_url, cache="off", stream="off"))
        one, two = await asyncio.gather(engine.aevaluate("a", checklist(2)), engine.aevaluate("b", checklist(2)))
        assert [v.answer for v in [*one.verdicts, *two.verdicts]] == ["yes"] * 4
        assert engine.http.made["httpx"] == 1 and engine.http.open_clients() == 0  # shared, then closed
        # sync code inside the running loop: another thread's loop, its client closed with it
        assert [v.answer for v in engine.evaluate("c", checklist(1)).verdicts] == ["yes"]
        assert engine.http.open_clients() == 0
        engine.close()


def test_the_engine_keeps_one_event_loop_per_thread() -> None:
    engine = Engine(Settings(cache="off"))

    async def loop_id() -> int:
        return id(asyncio.get_running_loop())

    first, second = engine.run(loop_id()), engine.run(loop_id())
    assert first == second and len(engine._runners) == 1
    engine.close()
    assert engine._runners == {}
    engine.run(loop_id())  # a closed engine makes a new loop
    assert len(engine._runners) == 1
    engine.close()


# -- impossible usage (issue 33, item 3) ------------------------------------------------------------------------

def _lying(usage: dict[str, Any]) -> Any:
    def respond(req: Received, index: int) -> Reply:
        return Reply(200, {**completion(VERDICT_YES), "usage": usage})
    return respond


@pytest.mark.parametrize("stream", ["auto", "off"])
@pytest.mark.parametrize("usage", [{"prompt_tokens": -20_000_000, "completion_tokens": 5, "total_tokens": 0},
                                   {"prompt_tokens": 10**30, "completion_tokens": 10**30, "total_tokens": 0},
                                   {"prompt_tokens": 12.5, "completion_tokens": 3, "total_tokens": 15.5}],
                         ids=["negative", "absurd", "fractional"])
def test_impossible_usage_is_counted_as_unknown_and_said_once(stream: str, usage: dict[str, Any]) -> None:
    with FaultServer(_lying(usage)) as server, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # explain=all: the streamed replies are read to their end, usage chunk included
        engine = Engine(Settings(model="openai/fault", api_base=server.base_url, cache="off", stream=stream,
                                 explain="all"))
        result = engine.evaluate("x", checklist(3))
        engine.close()
    u = result.usage
    assert [v.answer for v in result.verdicts] == ["yes"] * 3 and u.llm_calls == server.requests
    assert 0 < u.prompt_tokens < 10_000 and 0 <= u.completion_tokens < 10_000  # estimated, never negative
    assert u.estimated_requests == server.requests and u.cost_usd is None
    said = [w for w in caught if issubclass(w.category, BinevalUsageWarning)]
    assert len(said) == 1 and "openai/fault reported impossible usage" in str(said[0].message)


def test_a_token_budget_is_not_spent_backwards() -> None:
    with FaultServer(_lying({"prompt_tokens": -20_000_000, "completion_tokens": 5})) as server, \
            warnings.catch_warnings():
        warnings.simplefilter("ignore", BinevalUsageWarning)
        engine = Engine(Settings(model="openai/fault", api_base=server.base_url, cache="off", stream="off",
                                 budget="1000tok"))
        with pytest.raises(BudgetReachedError):
            for output in map(str, range(50)):
                engine.evaluate(output, checklist(2))
        assert 1000 <= engine.usage.prompt_tokens + engine.usage.completion_tokens < 5000
        engine.close()


def test_anthropic_message_start_with_negative_usage(monkeypatch: pytest.MonkeyPatch) -> None:
    """litellm holds Anthropic's message_start usage until the end of a stream closed early: a negative prompt
    count there is not added either."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-real")

    def respond(req: Received, index: int) -> Reply:
        return Reply(200, anthropic_message('{"answer": "yes", "explanation": "x"}', model="claude-haiku-4-5",
                                            input_tokens=-20_000_000, output_tokens=6))

    with FaultServer(respond, paths=("/v1/messages",)) as server, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        engine = Engine(Settings(model="anthropic/claude-haiku-4-5", api_base=server.root_url, cache="off",
                                 concurrency=1))
        result = engine.evaluate("The bridge opened in 1932.", checklist(2))
        engine.close()
    u = result.usage
    assert [v.answer for v in result.verdicts] == ["yes", "yes"] and server.streamed == 2
    assert 0 < u.prompt_tokens < 10_000 and u.cost_usd is None
    assert sum(issubclass(w.category, BinevalUsageWarning) for w in caught) == 1


# -- the structured-output form across runs (issue 33, item 17) ---------------------------------------------------

def _rejects_json_schema(req: Received, index: int) -> Reply:
    if (req.body.get("response_format") or {}).get("type") == "json_schema":
        return Reply(500, error_body("('body', 'response_format', 'type'): Input should be 'text' or 'json_object'"))
    return Reply(200, completion(VERDICT_YES))


@pytest.mark.parametrize("stream", ["auto", "off"])
def test_a_refused_json_schema_costs_one_request_once_not_once_per_run(tmp_path: Path, stream: str) -> None:
    with FaultServer(_rejects_json_schema) as server:
        def run() -> Any:
            engine = Engine(Settings(model="openai/fault", api_base=server.base_url, cache_dir=str(tmp_path),
                                     stream=stream, concurrency=1))
            try:
                return engine.evaluate(f"output {len(server.received)}", checklist(2))
            finally:
                engine.close()

        first = run()
        refused = sum((r.body.get("response_format") or {}).get("type") == "json_schema" for r in server.received)
        assert refused == 1 and first.usage.failed_requests == 1
        before = server.requests
        second = run()  # a new engine, as a new run: the form comes from the cache
        assert second.usage.llm_calls == server.requests - before == 2 and second.usage.failed_requests == 0
        assert all(r.body["response_format"]["type"] == "json_object" for r in server.received[before:])
        assert second.usage.structured_output == {"openai/fault": "json_object"}  # still said in the summary
    other = FaultServer(_rejects_json_schema).start()  # another base URL: learned again
    try:
        engine = Engine(Settings(model="openai/fault", api_base=other.base_url, cache_dir=str(tmp_path),
                                 stream=stream, concurrency=1))
        engine.evaluate("z", checklist(1))
        engine.close()
        assert [(r.body.get("response_format") or {}).get("type") for r in other.received][:1] == ["json_schema"]
    finally:
        other.stop()


# -- start-up does not eat the first deadline (issue 33, item 13) --------------------------------------------------

FIRST_REQUEST = '''
import json, os, sys
os.environ["ANTHROPIC_API_KEY"] = "test-key-not-real"
from pytest_bineval import Checklist, Question, Settings
from pytest_bineval.engine import Engine
from pytest_bineval.llm import client as client_module

imported = []
original, usage_of = client_module.LLMClient._call, client_module.reply_usage


async def watched(self, request, until=None):  # the request
    before = set(sys.modules)
    try:
        return await original(self, request, until)
    finally:
        imported.append(sorted(set(sys.modules) - before))


def counted(*args, **kwargs):  # what the reply cost (a stream closed early: its tokens counted by a tokenizer)
    before = set(sys.modules)
    try:
        return usage_of(*args, **kwargs)
    finally:
        imported.append(sorted(set(sys.modules) - before))

client_module.LLMClient._call = watched
client_module.reply_usage = counted
model, base, stream = sys.argv[1], sys.argv[2], sys.argv[3]
engine = Engine(Settings(model=model, api_base=base, cache="off", timeout=30, retries=0, concurrency=1,
                         stream=stream))
checklist = Checklist(task="T", dimensions={"d": "D"}, questions=[
    Question(id=f"d-{i}", dimension="d", text=f"Is check {i} met?") for i in (1, 2)])
result = engine.evaluate("x", checklist)
engine.close()
print(json.dumps({"answers": [v.answer for v in result.verdicts], "imported": imported,
                  "litellm": "litellm" in sys.modules}))
'''


@pytest.mark.parametrize("stream", ["auto", "off"])
@pytest.mark.parametrize("provider", ["openai-compatible", "anthropic"])
def test_the_first_request_of_a_process_does_no_set_up(tmp_path: Path, provider: str, stream: str) -> None:
    """What a cold process sets up (litellm, its code for the provider, httpx and its event-loop backend, the
    tokenizer) is done before the evaluation's deadline starts to count, never inside a request or the counting of
    its reply (where a short --bineval-timeout on a busy machine made the first evaluation of a run an error): no
    module is imported there. An OpenAI-compatible server litellm does not know never imports litellm."""
    import subprocess
    import sys

    def respond(req: Received, index: int) -> Reply:
        if provider == "anthropic":
            return Reply(200, anthropic_message(VERDICT_YES, model="claude-haiku-4-5"))
        return Reply(200, completion(VERDICT_YES))

    paths = ("/v1/messages",) if provider == "anthropic" else ("/chat/completions",)
    with FaultServer(respond, paths=paths) as server:
        model, base = (("anthropic/claude-haiku-4-5", server.root_url) if provider == "anthropic"
                       else ("openai/fault", server.base_url))
        script = tmp_path / "first.py"
        script.write_text(FIRST_REQUEST, encoding="utf-8")
        proc = subprocess.run([sys.executable, str(script), model, base, stream], capture_output=True, text=True,
                              timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["answers"] == ["yes", "yes"]
    assert result["imported"] and all(not modules for modules in result["imported"]), result["imported"]
    assert result["litellm"] == (provider == "anthropic")


# -- a pytest run: one client for every test of a process, closed at the end of the run ------------------------------

POOLED_TESTS = '''
import pytest
from pytest_bineval import Checklist, Question, assert_passes

CHECKLIST = Checklist(task="T", dimensions={"consistency": "D"}, questions=[
    Question(id=f"consistency-{i}", dimension="consistency", text=f"Is check {i} met?") for i in (1, 2)])


@pytest.mark.parametrize("i", range(10))
def test_summary(i):
    assert_passes(f"summary {i}", checklist=CHECKLIST, source="the article")
'''


@pytest.mark.parametrize("stream", ["auto", "off"])
@pytest.mark.parametrize("workers", [[], ["-p", "xdist", "-n", "2"]], ids=["one process", "xdist -n 2"])
def test_a_run_reuses_one_pool_across_its_tests_and_closes_it_at_the_end(pytester: pytest.Pytester, stream: str,
                                                                          workers: list[str]) -> None:
    """10 parametrized tests x 2 questions: the requests that are not streamed go over at most 2 connections per
    process (the 2 questions asked at once), not one per request or per test; none is left open when the run is
    over."""
    from pytest_bineval.testing.faults import wait_until

    with FaultServer(_yes) as server:
        pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
        pytester.makepyfile(test_pooled=POOLED_TESTS)
        # in this process (one process: so that a client left open at the end of the run would be seen open; under
        # pytest-xdist only the controller runs here, the workers are processes of their own)
        result = pytester.runpytest(
            "--bineval-model=openai/fault", f"--bineval-api-base={server.base_url}", "--bineval-cache=off",
            f"--bineval-stream={stream}", "--bineval-github=off", "-p", "no:randomly", *workers,
            "--bineval-report=report.json")
        result.assert_outcomes(passed=10)
        processes = 2 if workers else 1
        requests = server.requests
        assert 20 <= requests <= 20 + processes  # the questions, and at most a stream probe per process
        # the fake server ends a streamed reply by closing its connection (its body has no length), and a stream
        # the client closes after the answer cannot be reused either: each costs its connection; every other
        # request is served by the pool
        streamed = server.streamed
        if stream == "auto":
            assert streamed >= 20 - processes
        else:
            assert streamed == 0
        assert server.connections - streamed <= 2 * processes, (server.connections, streamed)
        assert wait_until(lambda: server.open_connections == 0, timeout=10), server.open_connections
        report = json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))
        assert report["totals"]["llm_calls"] == requests  # requests counted = requests seen
