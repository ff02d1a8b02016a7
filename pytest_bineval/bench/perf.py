"""``bineval perf``: what one evaluation costs on a judge model, per explain mode, against the physical
limit, from the cache, and from a cold start.

For R summaries of a SummEval article (``--article``, default 0, the issue's data) and a fixed checklist of N
questions it measures, per evaluation, after one warm-up evaluation:

- (a0) the request shape before answer-first judging (one JSON verdict with its explanation per question);
- (a) ``explain=all``: every answer explained;
- (b) ``explain=failing`` (the default): every "no" explained, no "yes";
- (c) ``explain=none``: answers only;
- (d) the physical limit (embedded model only): the prompt tokens new to the evaluation (the shared prefix
  minus what the previous evaluation left in the KV cache) plus every question's own tokens at the measured
  prompt-processing rate, plus one decoding step per answer;
- (e) a re-run served from the reply cache.

Then, each in a fresh process: the time from process start to the first verdict (and where it goes), and a
fully cached pytest run of 20 ``assert_passes`` against a plain pytest run of the same 20 tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from ..engine import Engine, Settings, run_sync
from ..errors import DataFileError
from ..models import Checklist, Evaluation, ExplainMode, Question
from ..settings import add_setting_arguments, settings_from_args

#: Settings perf does not take: it runs (a)-(c) without a cache and (e) in a temporary one, measures every explain
#: mode, and generates no checklist. --repeats is perf's own (summaries per variant).
NOT_OPTIONS = ("checklist_model", "cache", "cache_dir", "cache_url", "cache_prefix", "cache_ttl", "cache_key_env",
               "repeats", "explain")

# The first 8 are the benchmark's checklist. How many the embedded model answers "no" depends on the article and the
# judge prompt: with prompts VERSION 6 all eight on SummEval article 0, a mix on others (docs/performance.md). The
# share of "no" decides how much explain=failing saves; the table gives the cost per answer and per explanation.
QUESTIONS: list[tuple[str, str]] = [
    ("consistency", "Does the response avoid claims that contradict the input?"),
    ("relevance", "Does the response state the main event of the input?"),
    ("fluency", "Is the response correctly punctuated?"),
    ("relevance", "Is the response about the same topic as the input?"),
    ("consistency", "Are the numbers and dates in the response the same as in the input?"),
    ("coherence", "Do the sentences of the response follow each other logically?"),
    ("consistency", "Is every statement in the response supported by the input?"),
    ("consistency", "Are the names of people and places in the response the same as in the input?"),
    ("relevance", "Does the response leave out minor details of the input?"),
    ("coherence", "Does the response read as one connected text rather than a list of facts?"),
    ("fluency", "Is the response free of grammatical errors?"),
    ("fluency", "Is the response free of repeated words or phrases?"),
]
TASK = "Summarize the news article in 2-3 sentences for a busy reader."
COLD_ASSERTIONS = 20


def fixed_checklist(n: int) -> Checklist:
    picked = [QUESTIONS[i % len(QUESTIONS)] for i in range(n)]
    questions = [Question(id=f"q{i + 1}", dimension=d, text=t if i < len(QUESTIONS) else f"{t} ({i})")
                 for i, (d, t) in enumerate(picked)]
    dims = {d: d for d, _ in picked}
    return Checklist(task=TASK, dimensions=dims, questions=questions, model="fixed", prompt_version="")


def load_summaries(path: Path, article_index: int, count: int) -> tuple[str, list[str]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    ids = list(dict.fromkeys(r["article_id"] for r in rows))
    if not 0 <= article_index < len(ids):
        raise DataFileError(f"{path}: no article {article_index} (it has articles 0 to {len(ids) - 1})")
    chosen = [r for r in rows if r["article_id"] == ids[article_index]]
    if len(chosen) < count:
        raise DataFileError(f"{path}: article {article_index} has {len(chosen)} summaries, {count} are needed "
                            "(--repeats and one warm-up)")
    return chosen[0]["article"], [r["summary"] for r in chosen[:count]]


def _run(engine: Engine, checklist: Checklist, article: str, summaries: list[str],
         explain: ExplainMode) -> list[Evaluation]:
    return [run_sync(engine.aevaluate(s, checklist, article, explain=explain)) for s in summaries]


def _row(name: str, evals: list[Evaluation], wall: float) -> dict[str, Any]:
    n = len(evals)
    return {
        "variant": name,
        "seconds_per_eval": wall / n,
        "llm_calls_per_eval": sum(e.usage.llm_calls for e in evals) / n,
        "cache_hits_per_eval": sum(e.usage.cache_hits for e in evals) / n,
        "prompt_tokens_per_eval": sum(e.usage.prompt_tokens for e in evals) / n,
        "completion_tokens_per_eval": sum(e.usage.completion_tokens for e in evals) / n,
        "no_per_eval": sum(v.answer == "no" for e in evals for v in e.verdicts) / n,
        "explained_per_eval": sum(bool(v.explanation) for e in evals for v in e.verdicts) / n,
        "errors": sum(len(e.errors) for e in evals),
    }


# The request shape before answer-first judging: one JSON verdict per question, its explanation always written,
# under a JSON-schema grammar on the embedded model (row (a0) of the table).
LEGACY_VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "enum": ["yes", "no"]},
                   "explanation": {"type": "string", "maxLength": 200}},
    "required": ["answer", "explanation"],
    "additionalProperties": False,
}


def _legacy_fields(obj: dict[str, Any]) -> tuple[str, str]:
    answer = str(obj.get("answer", "")).strip().lower()
    if answer not in ("yes", "no"):
        raise ValueError(f'"answer" must be "yes" or "no", not {obj.get("answer")!r}')
    return answer, str(obj.get("explanation") or "")


async def _legacy_evaluate(engine: Engine, checklist: Checklist, article: str, summary: str) -> Evaluation:
    """One evaluation in the request shape before answer-first judging (a JSON verdict with its explanation
    per question, answers and explanations alike), uncached, one question after the other."""
    from ..judge import judge_messages
    from ..models import Usage, Verdict

    client = engine.client(engine.settings.judge_model).uncached()
    verdicts, usage = [], Usage()
    started = time.perf_counter()
    for q in checklist.questions:
        reply = await client.complete_json(judge_messages(checklist.task, article, summary, q),
                                           schema_name="verdict", schema=LEGACY_VERDICT_SCHEMA,
                                           validate=_legacy_fields, max_tokens=160, want_p_yes=True)
        answer, explanation = reply.value
        verdicts.append(Verdict(question_id=q.id, dimension=q.dimension, question=q.text,
                                answer="yes" if answer == "yes" else "no", explanation=explanation,
                                p_yes=reply.p_yes))
        usage += reply.usage
    usage.seconds = time.perf_counter() - started
    return Evaluation(task=checklist.task, model=client.model, dimensions=list(checklist.dimensions),
                      verdicts=verdicts, usage=usage)


def physical_limit(checklist: Checklist, article: str, before: str, summaries: list[str]) -> dict[str, Any]:
    """(d): the embedded model's measured prompt-processing rate and decoding step, and the estimate per
    evaluation: (new prefix tokens + the questions' own tokens) / rate + one decoding step per question.
    ``before``: the summary evaluated just before the first of ``summaries`` (its prefix is in the KV cache)."""
    from ..judge import ANSWER_PREFILL, judge_messages
    from ..llm.providers import embedded_model

    model = embedded_model()

    def prompts(summary: str) -> list[list[int]]:
        return [model.prompt_tokens([*judge_messages(TASK, article, summary, q),
                                     {"role": "assistant", "content": ANSWER_PREFILL, "prefix": True}])
                for q in checklist.questions]

    def common(a: list[int], b: list[int]) -> int:
        n = 0
        for x, y in zip(a, b, strict=False):
            if x != y:
                break
            n += 1
        return n

    previous = prompts(before)
    rate, step = model.speed(previous[0], steps=32)
    estimates, new_prefix, own = [], [], []
    for summary in summaries:
        current = prompts(summary)
        shared = min(common(current[0], p) for p in current[1:]) if len(current) > 1 else len(current[0])
        fresh = shared - min(shared, common(current[0], previous[0]))
        questions = sum(len(p) - shared for p in current)
        estimates.append((fresh + questions) / rate + len(current) * step)
        new_prefix.append(fresh)
        own.append(questions)
        previous = current
    n = len(summaries)
    return {"prefill_tokens_per_second": rate, "decode_seconds_per_token": step,
            "new_prefix_tokens_per_eval": sum(new_prefix) / n, "question_tokens_per_eval": sum(own) / n,
            "seconds_per_eval": sum(estimates) / n}


def measure(settings: Settings, data: Path, questions: int, repeats: int, *, cold: bool = True,
            article_index: int = 0) -> dict[str, Any]:
    """Every figure of the table (see the module doc); ``cold``: also the fresh-process measurements;
    ``article_index``: which SummEval article (in file order) the summaries are about."""
    from ..llm.local import is_embedded

    article, summaries = load_summaries(data, article_index, repeats + 1)
    warmup, summaries = summaries[0], summaries[1:]
    checklist = fixed_checklist(questions)
    rows = []
    load = [os.getloadavg()[0]]
    uncached = Engine(settings.with_overrides(cache="off"))
    run_sync(uncached.aevaluate(warmup, checklist, article, explain="all"))  # load the model, warm caches
    modes: list[tuple[str, ExplainMode]] = [("(a) explain=all", "all"), ("(b) explain=failing (default)", "failing"),
                                             ("(c) explain=none", "none")]
    for name, mode in modes:
        run_sync(uncached.aevaluate(warmup, checklist, article, explain=mode))  # same KV state before each
        started = time.perf_counter()
        evals = _run(uncached, checklist, article, summaries, mode)
        rows.append(_row(name, evals, time.perf_counter() - started))
        load.append(os.getloadavg()[0])
    run_sync(_legacy_evaluate(uncached, checklist, article, warmup))
    started = time.perf_counter()
    evals = [run_sync(_legacy_evaluate(uncached, checklist, article, s)) for s in summaries]
    rows.insert(0, _row("(a0) before answer-first: a JSON verdict with its explanation per question", evals,
                        time.perf_counter() - started))
    load.append(os.getloadavg()[0])
    limit = None
    if is_embedded(settings.judge_model):
        limit = physical_limit(checklist, article, warmup, summaries)
        rows.append({"variant": "(d) physical limit (estimate)", "seconds_per_eval": limit["seconds_per_eval"],
                     "llm_calls_per_eval": None, "cache_hits_per_eval": None,
                     "prompt_tokens_per_eval": limit["new_prefix_tokens_per_eval"] + limit["question_tokens_per_eval"],
                     "completion_tokens_per_eval": float(questions), "no_per_eval": None,
                     "explained_per_eval": 0.0, "errors": 0})
    with tempfile.TemporaryDirectory() as tmp:
        cached = Engine(settings.with_overrides(cache="on", cache_dir=tmp))
        _run(cached, checklist, article, summaries, "failing")
        started = time.perf_counter()
        evals = _run(cached, checklist, article, summaries, "failing")
        rows.append(_row("(e) cached re-run (explain=failing)", evals, time.perf_counter() - started))
        cached.close()
    uncached.close()
    result: dict[str, Any] = {
        "model": settings.judge_model, "questions": questions, "repeats": repeats, "article": article_index,
        "article_chars": len(article),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "rows": rows, "physical_limit": limit, "load_average": load,
    }
    if cold:
        result["cold"] = cold_start(settings, data)
    return result


# -- cold start: fresh processes ---------------------------------------------------------------------------------

FIRST_VERDICT = '''
import json, sys, time
t0 = time.perf_counter()
phases = {}
def mark(name):
    global t0
    now = time.perf_counter(); phases[name] = now - t0; t0 = now
from pytest_bineval import Checklist, Question, evaluate
mark("import pytest_bineval")
spec = json.loads(sys.argv[1])
if spec["phased"]:
    from pytest_bineval.llm._litellm import import_litellm
    import_litellm(); mark("import litellm")
    from pytest_bineval.llm.providers import embedded_model, ensure_provider
    ensure_provider(spec["model"]); mark("provider set up")
    if spec["embedded"]:
        embedded_model()._load(); mark("model load")
checklist = Checklist(task=spec["task"], dimensions={"consistency": "c"},
                      questions=[Question(id="q1", dimension="consistency", text=spec["question"])])
ev = evaluate(spec["summary"], checklist, spec["article"], model=spec["model"], cache="off", explain="failing")
mark("first verdict" if spec["phased"] else "everything to the first verdict")
assert not ev.errors, ev.errors
print(json.dumps({"phases": phases, "at": time.time()}))
'''

CACHED_TESTS = '''
import json, os, sys
import pytest

PLAIN = os.environ.get("BINEVAL_PERF_PLAIN") == "1"
if not PLAIN:
    from pytest_bineval import assert_passes
ITEMS = json.loads(open(os.path.join(os.path.dirname(__file__), "items.json"), encoding="utf-8").read())

@pytest.mark.bineval(task=TASK, dimensions=["consistency"])
@pytest.mark.parametrize("i", range(len(ITEMS)))
def test_summary(i):
    if PLAIN:
        return
    assert_passes(ITEMS[i]["summary"], source=ITEMS[i]["article"], threshold=0.0)

def test_zz_imports():
    with open(os.path.join(os.path.dirname(__file__), "imports.json"), "w", encoding="utf-8") as f:
        json.dump(sorted(m for m in ("litellm", "llama_cpp") if m in sys.modules), f)
'''


def _pytest(project: Path, *args: str, plain: bool = False) -> float:
    env = {**os.environ, "BINEVAL_PERF_PLAIN": "1" if plain else "0"}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=project,
                          env=env, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"pytest failed in {project} ({done.returncode}):\n{done.stdout[-3000:]}\n"
                           f"{done.stderr[-2000:]}")
    return wall


def cold_start(settings: Settings, data: Path) -> dict[str, Any]:
    """Fresh-process figures: process start to first verdict (natural and by phase), and a fully cached run of
    20 assertions vs a plain pytest run of the same tests (best of 3 each)."""
    from ..llm.local import is_embedded

    article, summaries = load_summaries(data, 0, 2)
    spec = {"model": settings.judge_model, "embedded": is_embedded(settings.judge_model), "task": TASK,
            "question": QUESTIONS[0][1], "article": article, "summary": summaries[1]}
    first: dict[str, Any] = {}
    for phased in (False, True):
        started = time.time()
        done = subprocess.run([sys.executable, "-c", FIRST_VERDICT, json.dumps({**spec, "phased": phased})],
                              capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(f"first-verdict run failed:\n{done.stderr[-3000:]}")
        out = json.loads(done.stdout.strip().splitlines()[-1])
        first["phased" if phased else "natural"] = {"process_start_to_first_verdict": out["at"] - started,
                                                    "phases": out["phases"]}
    rows = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines() if line.strip()]
    items = [{"article": r["article"], "summary": r["summary"]} for r in rows[:COLD_ASSERTIONS]]
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "items.json").write_text(json.dumps(items), encoding="utf-8")
        (project / "test_cached.py").write_text(CACHED_TESTS.replace("TASK", repr(TASK)), encoding="utf-8")
        (project / "pytest.ini").write_text(textwrap.dedent(f"""\
            [pytest]
            markers = bineval: pytest-bineval marker
            bineval_model = {settings.judge_model}
            asyncio_default_fixture_loop_scope = function
        """), encoding="utf-8")
        populate = _pytest(project)
        plain = min(_pytest(project, "-p", "no:bineval", plain=True) for _ in range(3))
        cached = min(_pytest(project) for _ in range(3))
        imported = json.loads((project / "imports.json").read_text(encoding="utf-8"))
    return {"first_verdict": first, "assertions": COLD_ASSERTIONS, "populate_seconds": populate,
            "plain_pytest_seconds": plain, "cached_run_seconds": cached, "added_seconds": cached - plain,
            "budget_seconds": 1.0 + 0.02 * COLD_ASSERTIONS, "heavy_modules_imported": imported}


# -- output ------------------------------------------------------------------------------------------------------

def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"model `{result['model']}`, {result['questions']} questions, {result['repeats']} summaries of "
        f"SummEval article {result.get('article', 0)} ({result['article_chars']} characters), {result['machine']}, "
        "load average "
        f"{' / '.join(f'{x:.2f}' for x in result['load_average'])} (before and after each mode)",
        "",
        "| variant | s / evaluation | requests | cache hits | prompt tokens | completion tokens | no answers | "
        "explained | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['variant']} | {r['seconds_per_eval']:.2f} | {_fmt(r['llm_calls_per_eval'], '.1f')} | "
            f"{_fmt(r['cache_hits_per_eval'], '.0f')} | {_fmt(r['prompt_tokens_per_eval'], '.0f')} | "
            f"{_fmt(r['completion_tokens_per_eval'], '.0f')} | {_fmt(r['no_per_eval'], '.1f')} | "
            f"{_fmt(r['explained_per_eval'], '.1f')} | {r['errors']} |"
        )
    by = {r["variant"].split(" ", 1)[0]: r["seconds_per_eval"] for r in result["rows"]}
    lines.append("")
    if "(a)" in by and "(b)" in by:
        versus = f"; (b) / (a0) = {by['(b)'] / by['(a0)']:.2f}" if "(a0)" in by else ""
        lines.append(f"(b) / (a) = {by['(b)'] / by['(a)']:.2f} (goal: at most 0.5){versus}")
    if "(a)" in by and "(c)" in by:
        n = result["questions"]
        per = (by["(a)"] - by["(c)"]) / n
        lines.append(f"answers alone (c): {by['(c)'] / n:.3f} s per question; an explanation adds {per:.3f} s: "
                     f"with k of {n} answers no, (b) / (a) = ({by['(c)']:.2f} + k x {per:.3f}) / {by['(a)']:.2f}, "
                     f"{by['(c)'] / by['(a)']:.2f} at best (every answer yes)")
    if "(c)" in by and "(d)" in by:
        lines.append(f"(c) / (d) = {by['(c)'] / by['(d)']:.2f} (goal: at most 1.5)")
    limit = result.get("physical_limit")
    if limit:
        lines.append(
            f"(d) from {limit['prefill_tokens_per_second']:.0f} prompt tokens/s and "
            f"{limit['decode_seconds_per_token'] * 1000:.1f} ms per decoding step: "
            f"{limit['new_prefix_tokens_per_eval']:.0f} new prefix tokens + {limit['question_tokens_per_eval']:.0f} "
            f"question tokens + {result['questions']} answer steps per evaluation")
    cold = result.get("cold")
    if cold:
        natural = cold["first_verdict"]["natural"]
        phased = cold["first_verdict"]["phased"]
        lines += [
            "",
            "| cold start (fresh process) | seconds |",
            "|---|---:|",
            f"| process start to first verdict | {natural['process_start_to_first_verdict']:.2f} |",
        ]
        for name, secs in phased["phases"].items():
            lines.append(f"| &nbsp;&nbsp;{name} | {secs:.2f} |")
        lines += [
            f"| plain pytest, {cold['assertions']} tests | {cold['plain_pytest_seconds']:.2f} |",
            f"| fully cached run, {cold['assertions']} assert_passes | {cold['cached_run_seconds']:.2f} |",
            f"| added by the plugin (goal: under {cold['budget_seconds']:.2f}) | {cold['added_seconds']:.2f} |",
            "",
            f"heavy modules imported by the cached run: {', '.join(cold['heavy_modules_imported']) or 'none'}",
        ]
    return "\n".join(lines)


def add_perf_parser(sub: Any) -> None:
    p = sub.add_parser("perf", help="time one evaluation per explain mode, the physical limit, cached and cold runs",
                       description=__doc__)
    p.add_argument("--data", default="../shared/data/summeval/summeval.jsonl", help="SummEval JSONL file")
    p.add_argument("--questions", type=int, default=8, help="checklist size N (default: 8)")
    p.add_argument("--repeats", type=int, default=4, help="summaries evaluated per variant (default: 4)")
    p.add_argument("--article", type=int, default=0, metavar="I",
                   help="the SummEval article (0-based, in file order) whose summaries are judged (default: 0)")
    p.add_argument("--no-cold", dest="cold", action="store_false", help="skip the fresh-process measurements")
    p.add_argument("--json", action="store_true", help="print JSON instead of a markdown table")
    # --model, --api-base, --timeout, ...: the engine's Settings, defaults and all
    add_setting_arguments(p.add_argument_group("model"), exclude=NOT_OPTIONS)
    p.set_defaults(func=cmd_perf)


def cmd_perf(args: argparse.Namespace) -> int:
    data = Path(args.data)
    if not data.is_file():
        raise FileNotFoundError(f"SummEval data not found at {data}; pass --data PATH/summeval.jsonl")
    result = measure(settings_from_args(args, exclude=NOT_OPTIONS), data, args.questions, args.repeats, cold=args.cold,
                     article_index=args.article)
    print(json.dumps(result, indent=2) if args.json else markdown(result))
    return 0
