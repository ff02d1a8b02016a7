"""``bineval scale`` (also ``python -m pytest_bineval.bench.scale``): a suite split over shards, against the
bound its judge's latency sets.

It writes a project of ``--tests`` parametrized tests, each judging one output against a fixed checklist of
``--questions`` questions, split into ``--shards`` test files (a plain split, one file per shard), and runs the
shards at once, each as ``pytest -n WORKERS`` (``--workers``), against a fake OpenAI-compatible server on
127.0.0.1 (:class:`~pytest_bineval.testing.faults.FaultServer`) that answers "yes" to every question after
``--latency`` seconds; the reply cache is off, so every question is a request. Then it merges the shards'
reports (``bineval report merge``), renders the merged report as HTML (``bineval report --html``) and opens the
page in headless Chromium (when Playwright and a Chromium are installed).

It reports the wall time of the shards against the bound ``requests x latency / total concurrency`` (total
concurrency: shards x workers x the questions one evaluation asks at once, ``min(questions, concurrency)``), the
CPU the shards' processes and the fake server used, the
memory the records take (per 1,000 records, measured with tracemalloc while the merged report is read), the merged
report's size, and the HTML page's size and load time, with the machine's load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..testing.faults import FaultServer, Received, Reply, completion

CONCURRENCY = 8  # the engine's default --bineval-concurrency: the questions of one evaluation asked at once
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run"]

TEST_FILE = '''
import pytest
from pytest_bineval import Checklist, Question, assert_passes

CHECKLIST = Checklist(task="Summarize the article.", dimensions={{"consistency": "C"}}, questions=[
    Question(id=f"consistency-{{i}}", dimension="consistency", text=f"Does the summary keep fact {{i}} of the article?")
    for i in range(1, {questions} + 1)])

@pytest.mark.parametrize("i", range({start}, {stop}))
def test_summary(i):
    assert_passes(f"summary {{i}}: the bridge opened in 1932.", checklist=CHECKLIST,
                  source=f"article {{i}}: the bridge opened in 1932 after six years of work.")
'''


def _yes_after(latency: float) -> Any:
    def respond(req: Received, index: int) -> Reply:
        if latency:
            time.sleep(latency)
        return Reply(200, completion(json.dumps({"answer": "yes", "explanation": "It does."})))
    return respond


def write_project(root: Path, tests: int, questions: int, shards: int, base_url: str) -> list[Path]:
    """The project: an ini pointing at the fake server, the cache off, and one test file per shard."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pytest.ini").write_text(textwrap.dedent(f"""\
        [pytest]
        asyncio_default_fixture_loop_scope = function
        bineval_model = openai/scale
        bineval_api_base = {base_url}
        bineval_cache = off
        bineval_github = off
        """), encoding="utf-8")
    files = []
    for k in range(shards):
        start, stop = tests * k // shards, tests * (k + 1) // shards
        path = root / f"test_shard_{k + 1}.py"
        path.write_text(TEST_FILE.format(questions=questions, start=start, stop=stop), encoding="utf-8")
        files.append(path)
    return files


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("OPENAI_API_KEY", "sk-scale-bench")  # the fake server accepts any key
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "PYTEST_ADDOPTS"):
        env.pop(name, None)
    return env


def run_shards(root: Path, files: Sequence[Path], workers: int) -> tuple[float, list[Path]]:
    """Every shard at once (``pytest -n workers`` each, plain pytest for one worker); the wall time and the
    shards' report files. RuntimeError naming the shard when one fails or writes no report."""
    procs, reports, logs = [], [], []
    started = time.perf_counter()
    for k, path in enumerate(files, 1):
        report, log = root / f"shard-{k}.json", root / f"shard-{k}.log"
        reports.append(report)
        logs.append(log)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
               "-p", "no:hypothesispytest", path.name, f"--bineval-report={report.name}"]
        if workers > 1:
            cmd += ["-p", "xdist", "-n", str(workers)]
        with log.open("wb") as out:  # a file, not a pipe: a shard's output never waits for a reader
            procs.append(subprocess.Popen(cmd, cwd=root, env=_env(), stdout=out, stderr=subprocess.STDOUT))
    for proc in procs:
        proc.wait()
    wall = time.perf_counter() - started
    for k, (proc, log, report) in enumerate(zip(procs, logs, reports, strict=True), 1):
        if proc.returncode != 0 or not report.is_file():
            tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:])
            raise RuntimeError(f"shard {k} exited {proc.returncode} (report written: {report.is_file()}):\n{tail}")
    return wall, reports


def _children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes so far (the shards and their workers)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _own_cpu() -> float:
    """CPU seconds (user + system) of this process so far: during the shards, the fake server's threads."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _children_peak_rss() -> int:
    """Bytes: the peak resident set of the largest finished child process so far (Linux reports kB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024


def _bineval(*args: str, cwd: Path) -> float:
    """``bineval ARGS`` in a fresh process; its wall time (RuntimeError with its output when it fails)."""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest_bineval.cli", *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"bineval {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    return time.perf_counter() - started


def record_memory(path: Path) -> tuple[int, int]:
    """(records, bytes the loaded report holds) of a report file, by tracemalloc."""
    from ..report.document import ReportDocument

    ReportDocument.load(path)  # once before: what the first load builds (validators, caches) is not the records'
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        document = ReportDocument.load(path)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    return len(document.evaluations), held


def find_chromium() -> str | None:
    explicit = os.environ.get("BINEVAL_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


def page_load(page: Path) -> dict[str, Any] | str:
    """The page's load in headless Chromium: navigation to the load event (ms, the browser's own clock), and
    the rows its script laid out; or why it was not measured."""
    chromium = find_chromium()
    if chromium is None:
        return "no Chromium found"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "Playwright is not installed"
    with tempfile.TemporaryDirectory(prefix="bineval-scale-profile-") as profile, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(profile, executable_path=chromium, headless=True,
                                                        args=CHROMIUM_FLAGS)
        try:
            tab = context.new_page()
            started = time.perf_counter()
            tab.goto(page.resolve().as_uri(), timeout=600_000)
            tab.wait_for_load_state("load", timeout=600_000)
            wall_ms = (time.perf_counter() - started) * 1000
            facts: dict[str, Any] = tab.evaluate("""() => {
                const nav = performance.getEntriesByType('navigation')[0];
                return {load_ms: nav.loadEventEnd - nav.startTime,
                        dom_content_loaded_ms: nav.domContentLoadedEventEnd - nav.startTime,
                        rows: document.querySelectorAll('tr.test').length,
                        js: document.documentElement.classList.contains('js')};
            }""")
        finally:
            context.close()
    facts["wall_ms"] = wall_ms
    return facts


def measure(tests: int, questions: int, shards: int, workers: int, latency: float, *, browser: bool = True,
            workdir: Path | None = None) -> dict[str, Any]:
    """The whole measurement (see the module's docstring); ``workdir``: keep the project there (else a temporary
    directory, removed afterwards)."""
    if shards > tests:
        raise ValueError(f"{shards} shards need at least {shards} tests")
    keep = workdir is not None
    root = workdir if workdir is not None else Path(tempfile.mkdtemp(prefix="bineval-scale-"))
    load_before = os.getloadavg()
    try:
        with FaultServer(_yes_after(latency)) as server:
            files = write_project(root, tests, questions, shards, server.base_url)
            cpu_before, server_before = _children_cpu(), _own_cpu()
            wall, reports = run_shards(root, files, workers)
            cpu, server_cpu = _children_cpu() - cpu_before, _own_cpu() - server_before
            peak_rss = _children_peak_rss()
            requests = server.requests
        merged = root / "merged.json"
        merge_s = _bineval("report", "merge", *[r.name for r in reports], "--expect", str(shards), "-o",
                           merged.name, cwd=root)
        page = root / "merged.html"
        html_s = _bineval("report", merged.name, "--html", page.name, "--github", "off", cwd=root)
        records, held = record_memory(merged)
        document = json.loads(merged.read_text(encoding="utf-8"))
        loaded = page_load(page) if browser else "not measured (--no-browser)"
        load_after = os.getloadavg()
        concurrency = shards * workers * min(questions, CONCURRENCY)
        return {
            "tests": tests, "questions": questions, "shards": shards, "workers": workers, "latency_s": latency,
            "requests": requests, "total_concurrency": concurrency, "bound_s": requests * latency / concurrency,
            "wall_s": wall, "shards_cpu_s": cpu, "server_cpu_s": server_cpu,
            "largest_process_peak_rss_bytes": peak_rss, "records": records,
            "totals": document["totals"],
            "partial": document["partial"],
            "memory_per_1000_records_bytes": held * 1000 / records if records else 0.0,
            "merged_report_bytes": merged.stat().st_size, "shard_report_bytes": [r.stat().st_size for r in reports],
            "merge_s": merge_s, "html_s": html_s, "html_bytes": page.stat().st_size, "page": loaded,
            "load_before": load_before, "load_after": load_after, "cpus": os.cpu_count(),
            "machine": f"{platform.machine()}, Python {platform.python_version()}",
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        }
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


def markdown(r: dict[str, Any]) -> str:
    load = " / ".join(f"{x:.2f}" for x in r["load_before"])
    after = " / ".join(f"{x:.2f}" for x in r["load_after"])
    page = r["page"]
    if isinstance(page, dict):
        shown = (f"{page['load_ms']:.0f} ms to the load event ({page['dom_content_loaded_ms']:.0f} ms to "
                 f"DOMContentLoaded; {page['wall_ms']:.0f} ms navigation wall time), {page['rows']} rows laid out")
    else:
        shown = str(page)
    t = r["totals"]
    lines = [
        f"{r['tests']} tests x {r['questions']} questions, {r['shards']} shards x -n {r['workers']}, fake server "
        f"latency {r['latency_s'] * 1000:.0f} ms, reply cache off; {r['when']}, {r['machine']}, {r['cpus']} cores; "
        f"load average (1/5/15 min) {load} before, {after} after",
        "",
        "| measure | value |",
        "|---|---:|",
        f"| requests the server received | {r['requests']} |",
        f"| total concurrency (shards x workers x questions at once) | {r['total_concurrency']} |",
        f"| bound: requests x latency / total concurrency | {r['bound_s']:.1f} s |",
        f"| wall time of the shards (start of the first to end of the last, process start-up included) | "
        f"{r['wall_s']:.1f} s ({r['wall_s'] / r['bound_s']:.2f} x the bound) |" if r["bound_s"] else
        f"| wall time of the shards | {r['wall_s']:.1f} s |",
        f"| CPU time of the shards' processes (user + system) | {r['shards_cpu_s']:.0f} s, "
        f"{r['shards_cpu_s'] / (r['cpus'] or 1):.0f} s over {r['cpus']} cores |",
        f"| CPU time of the fake server meanwhile (the measuring process) | {r.get('server_cpu_s', 0.0):.0f} s |",
        f"| evaluations in the merged report (passed / below / error) | {r['records']} ({t['passed']} / "
        f"{t['failed']} / {t['errors']}) |",
        f"| memory of the records, per 1,000 (the merged report read back) | "
        f"{_mb(r['memory_per_1000_records_bytes'])} |",
        f"| peak resident memory of the largest shard process (a worker or controller; litellm included) | "
        f"{_mb(r['largest_process_peak_rss_bytes'])} |",
        f"| merged report | {_mb(r['merged_report_bytes'])} (shards: "
        f"{', '.join(_mb(b) for b in r['shard_report_bytes'])}) |",
        f"| bineval report merge | {r['merge_s']:.1f} s |",
        f"| bineval report --html | {r['html_s']:.1f} s, {_mb(r['html_bytes'])} |",
        f"| the HTML page in headless Chromium | {shown} |",
    ]
    return "\n".join(lines) + "\n"


def _positive(kind: type[int] | type[float], low: float) -> Any:
    def parse(text: str) -> int | float:
        value = kind(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}")
        return value
    return parse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tests", type=_positive(int, 1), default=2000, help="parametrized tests (default 2000)")
    p.add_argument("--questions", type=_positive(int, 1), default=8, help="questions per checklist (default 8)")
    p.add_argument("--shards", type=_positive(int, 1), default=4, help="shards, run at once (default 4)")
    p.add_argument("--workers", type=_positive(int, 1), default=2,
                   help="pytest-xdist workers per shard (default 2; 1: no xdist)")
    p.add_argument("--latency", type=_positive(float, 0.0), default=0.2,
                   help="seconds the fake server waits before each reply (default 0.2)")
    p.add_argument("--no-browser", dest="browser", action="store_false",
                   help="do not open the HTML page in Chromium")
    p.add_argument("--keep", metavar="DIR", default=None, help="write the project and reports into DIR and keep them")
    p.add_argument("--json", action="store_true", help="print JSON instead of a markdown table")


def cmd_scale(args: argparse.Namespace) -> int:
    result = measure(args.tests, args.questions, args.shards, args.workers, args.latency, browser=args.browser,
                     workdir=None if args.keep is None else Path(args.keep))
    print(json.dumps(result, indent=2) if args.json else markdown(result))
    return 0


def add_scale_parser(sub: Any) -> None:
    p = sub.add_parser("scale", help="a sharded suite against a fake server: wall time vs the latency bound, "
                                     "memory per record, merged report size, HTML load time",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    p.set_defaults(func=cmd_scale)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pytest_bineval.bench.scale", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    return cmd_scale(p.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
