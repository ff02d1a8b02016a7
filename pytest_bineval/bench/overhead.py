"""``bineval bench overhead``: the CPU one test costs on a hosted judge, beside the floor of its requests.

In one run and one process tree, against an instant fake OpenAI-compatible server on 127.0.0.1
(:class:`~pytest_bineval.testing.faults.FaultServer`, a new one per run, answering every question "yes"), the same
``--tests`` parametrized tests each make ``--questions`` chat-completion requests (the judge's own prompts: the
floors post the messages pytest-bineval sends, rendered beforehand), run as:

- **httpx** (the floor): a plain pytest test (``-p no:bineval``) posting them at once (``asyncio.gather``) with one
  ``httpx.AsyncClient`` and one event loop kept for the module, each reply decoded;
- **litellm**: the same with ``litellm.acompletion`` (not streamed), what a plain litellm call costs;
- **pytest-bineval**, ``--bineval-stream auto`` and ``off``: ``assert_passes`` with a pinned checklist of those
  questions, ``--bineval-cache off`` (every question is a request), each test's output its own (as in a suite: no
  per-text memo serves another test).

Each is a fresh ``python -m pytest`` process. Its **CPU per test** is the process's CPU time (user + system, all its
threads) from the end of its first test to the end of its last, over the tests in between: what every further
test costs once the process is warm (the first test's one-time work, such as importing litellm, and the process's
start-up fall out; the start-up, first test included, is shown apart, from the OS's accounting of the finished
process). The figure is the median over ``--rounds`` rounds, the variants interleaved within each round; the
ratios are to the httpx floor of the same run. The server's requests are counted and checked against the tests'
(none lost, none extra beyond a probe), and the machine's load average is printed before and after.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..testing.faults import FaultServer, Received, Reply, completion

__all__ = ["VARIANTS", "Variant", "measure_overhead", "render_overhead"]

VERDICT = json.dumps({"answer": "yes", "explanation": "The response does it."})
TASK = "Summarize the article in one sentence."
SOURCE = ("The town council voted 7-2 on Monday to build a new public library by 2027. The library will replace the "
          "old reading room on Main Street, which closed in 2019 after a fire. The mayor said the project will cost "
          "4.5 million dollars, paid from a state grant and the town's own budget.")
OUTPUT = "The council approved a new library, to open by 2027 and cost 4.5 million dollars."


@dataclass(frozen=True)
class Variant:
    name: str  # the key in the JSON result
    label: str  # the table's row
    plugin: bool  # pytest-bineval loaded (else -p no:bineval)
    stream: str = "auto"


VARIANTS = (
    Variant("httpx", "a plain pytest test posting them at once with one `httpx.AsyncClient` (the floor)",
            plugin=False),
    Variant("litellm", "the same with `litellm.acompletion` (not streamed)", plugin=False),
    Variant("bineval-stream", "pytest-bineval, `--bineval-stream auto` (one streamed request per question)",
            plugin=True, stream="auto"),
    Variant("bineval-two", "pytest-bineval, `--bineval-stream off`", plugin=True, stream="off"),
)

# A floor's test module: its set-up (``{setup}``: a client) and ``ask(body)`` (one request, its reply checked), then the
# same 8 requests at once per test on one event loop kept for the module.
_FLOOR = '''
import asyncio
import json
import os

import pytest
{setup}
REQUESTS = json.loads({requests!r})
loop = asyncio.new_event_loop()


{ask}


async def ask_all():
    await asyncio.gather(*(ask(body) for body in REQUESTS))


@pytest.mark.parametrize("i", range({tests}))
def test_floor(i):
    loop.run_until_complete(ask_all())
'''

_HTTPX_SETUP = '''
import httpx

client = httpx.AsyncClient(timeout=60)
'''
_HTTPX_ASK = '''async def ask(body):
    reply = await client.post({url!r}, json=body, headers={{"Authorization": "Bearer sk-overhead"}})
    assert json.loads(reply.content)["choices"][0]["message"]["content"]'''

_LITELLM_SETUP = '''
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
import litellm
'''
_LITELLM_ASK = '''async def ask(body):
    reply = await litellm.acompletion(model="openai/" + body["model"], messages=body["messages"],
                                      max_tokens=body["max_tokens"], temperature=body["temperature"],
                                      api_base={base!r}, api_key="sk-overhead")
    assert reply.choices[0].message.content'''

_CONFTEST = '''
import json
import time

_cpu = []


def pytest_runtest_logfinish(nodeid, location):
    _cpu.append(time.process_time())


def pytest_sessionfinish(session):
    with open("cpu.json", "w") as out:
        json.dump({"after_first": _cpu[0] if _cpu else None, "after_last": _cpu[-1] if _cpu else None,
                   "tests": len(_cpu)}, out)
'''

_BINEVAL = '''
import pytest
from pytest_bineval import Checklist, Question, assert_passes

CHECKLIST = Checklist(task={task!r}, dimensions={{"consistency": "States only facts of the article."}}, questions=[
    Question(id=f"consistency-{{i}}", dimension="consistency", text=text) for i, text in enumerate({questions!r}, 1)])


@pytest.mark.parametrize("i", range({tests}))
def test_summary(i):
    assert_passes(f"{{OUTPUT}} (summary {{i}})", checklist=CHECKLIST, source=SOURCE)


OUTPUT, SOURCE = {output!r}, {source!r}
'''


def questions(n: int) -> list[str]:
    return [f"Does the summary keep fact {i} of the article (its number, its place, its people)?"
            for i in range(1, n + 1)]


def floor_requests(n: int) -> list[dict[str, Any]]:
    """The chat-completion bodies the floors post per test: the judge's messages of each question (as
    pytest-bineval renders them), ``max_tokens`` as the judge asks for an answer and its explanation."""
    from ..judge import EXPLANATION_MAX_TOKENS, judge_messages, streamed_messages
    from ..models import Question

    return [{"model": "overhead", "temperature": 0.0, "max_tokens": EXPLANATION_MAX_TOKENS + 16,
             "messages": streamed_messages(judge_messages(TASK, SOURCE, OUTPUT, Question(
                 id=f"c-{i}", dimension="consistency", text=text)))}
            for i, text in enumerate(questions(n), 1)]


def write_project(root: Path, variant: Variant, tests: int, n_questions: int, base_url: str) -> Path:
    """A project of ``tests`` tests for ``variant`` in ``root`` (emptied first); its test file."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    ini = ["[pytest]", "asyncio_default_fixture_loop_scope = function"]
    if variant.plugin:
        ini += ["bineval_model = openai/overhead", f"bineval_api_base = {base_url}", "bineval_cache = off",
                "bineval_github = off", f"bineval_stream = {variant.stream}"]
    (root / "pytest.ini").write_text("\n".join(ini) + "\n", encoding="utf-8")
    requests = json.dumps(floor_requests(n_questions))
    if variant.name == "httpx":
        text = _FLOOR.format(setup=_HTTPX_SETUP, ask=_HTTPX_ASK.format(url=f"{base_url}/chat/completions"),
                             requests=requests, tests=tests)
    elif variant.name == "litellm":
        text = _FLOOR.format(setup=_LITELLM_SETUP, ask=_LITELLM_ASK.format(base=base_url), requests=requests,
                             tests=tests)
    else:
        text = _BINEVAL.format(task=TASK, questions=questions(n_questions), tests=tests, output=OUTPUT,
                               source=SOURCE)
    path = root / "test_overhead.py"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    (root / "conftest.py").write_text(textwrap.dedent(_CONFTEST), encoding="utf-8")
    return path


def _yes(req: Received, index: int) -> Reply:
    return Reply(200, completion(VERDICT, model="overhead"))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["OPENAI_API_KEY"] = "sk-overhead"
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "PYTEST_ADDOPTS", "PYTEST_XDIST_AUTO_NUM_WORKERS"):
        env.pop(name, None)
    return env


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Run:
    tests: int
    cpu_s: float  # the whole process, from the OS
    per_test_s: float  # after the first test, per further test
    wall_s: float
    requests_seen: int
    streamed: int  # of them, answered as a stream


def run_once(root: Path, variant: Variant, tests: int, n_questions: int) -> Run:
    """One pytest process of ``variant`` over ``tests`` tests; RuntimeError with its output when a test fails."""
    with FaultServer(_yes) as server:
        path = write_project(root, variant, tests, n_questions, server.base_url)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
               "-p", "no:hypothesispytest", "-p", "no:xdist", path.name]
        if not variant.plugin:
            cmd[4:4] = ["-p", "no:bineval"]
        before = _children_cpu()
        started = time.perf_counter()
        proc = subprocess.run(cmd, cwd=root, env=_env(), capture_output=True, text=True, timeout=3600)
        wall = time.perf_counter() - started
        cpu = _children_cpu() - before
        time.sleep(0.05)
        seen, streamed = server.requests, server.streamed
    if proc.returncode != 0:
        raise RuntimeError(f"{variant.name} ({tests} tests) exited {proc.returncode}:\n"
                           + "\n".join((proc.stdout + proc.stderr).splitlines()[-30:]))
    # a structured-output probe or a stream probe may add a request per process, never more
    expected = tests * n_questions
    if not expected <= seen <= expected + 2:
        raise RuntimeError(f"{variant.name} ({tests} tests): the server saw {seen} requests, expected {expected}")
    # the stream on: every question streamed (a probe aside); off, and the floors: none
    if (streamed < expected - 1) if variant.stream == "auto" and variant.plugin else streamed:
        raise RuntimeError(f"{variant.name}: {streamed} of {seen} requests were streamed")
    marks = json.loads((root / "cpu.json").read_text(encoding="utf-8"))
    if marks["tests"] != tests:
        raise RuntimeError(f"{variant.name}: {marks['tests']} tests ran, not {tests}")
    per_test = (marks["after_last"] - marks["after_first"]) / (tests - 1)
    return Run(tests, cpu, per_test, wall, seen, streamed)


def measure_overhead(tests: int = 200, n_questions: int = 8, repeats: int = 3,
                     variants: tuple[Variant, ...] = VARIANTS, *, quiet: bool = False) -> dict[str, Any]:
    """Every variant over ``tests`` tests, ``repeats`` rounds; the result as JSON-able data."""
    if tests < 2:
        raise ValueError("--limit must be at least 2 tests")
    load_before = os.getloadavg()
    rounds: dict[str, list[dict[str, float]]] = {v.name: [] for v in variants}
    with tempfile.TemporaryDirectory(prefix="bineval-overhead-") as tmp:
        for r in range(repeats):
            for variant in variants:
                run = run_once(Path(tmp) / variant.name, variant, tests, n_questions)
                rounds[variant.name].append({
                    "cpu_ms_per_test": run.per_test_s * 1000,
                    "startup_cpu_s": run.cpu_s - run.per_test_s * (tests - 1),
                    "cpu_s": run.cpu_s, "wall_s": run.wall_s, "requests": run.requests_seen,
                    "streamed": run.streamed})
                if not quiet:
                    print(f"round {r + 1}/{repeats} {variant.name}: {run.per_test_s * 1000:.1f} ms CPU per test "
                          f"({run.cpu_s:.1f} s CPU, {run.wall_s:.1f} s wall for {tests} tests)", file=sys.stderr)
    load_after = os.getloadavg()
    result: dict[str, Any] = {
        "tests": tests, "questions": n_questions, "repeats": repeats,
        "load_before": load_before, "load_after": load_after, "cpus": os.cpu_count(),
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "variants": {},
    }
    for variant in variants:
        runs = rounds[variant.name]
        result["variants"][variant.name] = {
            "label": variant.label, "rounds": runs,
            "cpu_ms_per_test": statistics.median(r["cpu_ms_per_test"] for r in runs),
            "startup_cpu_s": statistics.median(r["startup_cpu_s"] for r in runs),
            "wall_s": statistics.median(r["wall_s"] for r in runs),
        }
    return result


def render_overhead(r: dict[str, Any]) -> str:
    """The markdown table of a :func:`measure_overhead` result."""
    load = " / ".join(f"{x:.2f}" for x in r["load_before"])
    after = " / ".join(f"{x:.2f}" for x in r["load_after"])
    floor = r["variants"].get("httpx", {}).get("cpu_ms_per_test")
    lines = [
        f"{r['tests']} parametrized tests x {r['questions']} requests, an instant fake OpenAI-compatible server on "
        f"127.0.0.1, reply cache off, medians of {r['repeats']} rounds; "
        f"{r['when']}, {r['machine']}, {r['cpus']} cores; load average (1/5/15 min) {load} before, {after} after",
        "",
        f"| what runs the same {r['questions']} requests per test | CPU ms per test | per request | x the httpx "
        "floor | start-up and first test, CPU s | wall s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for v in r["variants"].values():
        ms = v["cpu_ms_per_test"]
        ratio = f"{ms / floor:.1f}" if floor else "-"
        lines.append(f"| {v['label']} | {ms:.1f} | {ms / r['questions']:.2f} | {ratio} | {v['startup_cpu_s']:.2f} | "
                     f"{v['wall_s']:.1f} |")
    return "\n".join(lines) + "\n"


def cmd_overhead(args: Any) -> int:
    tests = args.limit or 200
    result = measure_overhead(tests, args.questions, args.rounds, quiet=args.quiet)
    text = render_overhead(result)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "overhead.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    (out / "overhead.md").write_text(text, encoding="utf-8")
    print(text, end="")
    return 0
