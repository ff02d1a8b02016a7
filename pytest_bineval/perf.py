"""``bineval perf``: what one evaluation costs on a judge model, and what prefix reuse and the cache save.

For R summaries of one SummEval article and a fixed checklist of N questions it measures, per evaluation:
(a) as built (shared prefix first, question last: the KV cache / provider prompt cache is reused),
(b) with prefix reuse defeated (question first), (c) a cached re-run. Figures go to a markdown table.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from .engine import Engine, Settings, run_sync
from .models import Checklist, Evaluation, Question
from .settings import add_setting_arguments, settings_from_args

#: Settings perf does not take: it runs (a) and (b) without a cache and (c) in a temporary one, and
#: generates no checklist.
NOT_OPTIONS = ("checklist_model", "cache", "cache_dir", "repeats")  # --repeats: perf's own (summaries per variant)

QUESTIONS: list[tuple[str, str]] = [
    ("consistency", "Is every statement in the response supported by the input?"),
    ("consistency", "Are the names of people and places in the response the same as in the input?"),
    ("consistency", "Are the numbers and dates in the response the same as in the input?"),
    ("consistency", "Does the response avoid claims that contradict the input?"),
    ("relevance", "Does the response state the main event of the input?"),
    ("relevance", "Does the response leave out minor details of the input?"),
    ("coherence", "Do the sentences of the response follow each other logically?"),
    ("coherence", "Does the response read as one connected text rather than a list of facts?"),
    ("fluency", "Is the response free of grammatical errors?"),
    ("fluency", "Is the response free of repeated words or phrases?"),
    ("fluency", "Is the response correctly punctuated?"),
    ("relevance", "Is the response about the same topic as the input?"),
]


def fixed_checklist(n: int) -> Checklist:
    picked = [QUESTIONS[i % len(QUESTIONS)] for i in range(n)]
    questions = [Question(id=f"q{i + 1}", dimension=d, text=t if i < len(QUESTIONS) else f"{t} ({i})")
                 for i, (d, t) in enumerate(picked)]
    dims = {d: d for d, _ in picked}
    return Checklist(task="Summarize the news article in 2-3 sentences for a busy reader.",
                     dimensions=dims, questions=questions, model="fixed", prompt_version="")


def load_summaries(path: Path, article_index: int, count: int) -> tuple[str, list[str]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    ids = list(dict.fromkeys(r["article_id"] for r in rows))
    chosen = [r for r in rows if r["article_id"] == ids[article_index]]
    return chosen[0]["article"], [r["summary"] for r in chosen[:count]]


def _run(engine: Engine, checklist: Checklist, article: str, summaries: list[str],
         question_first: bool) -> list[Evaluation]:
    out = []
    for summary in summaries:
        out.append(run_sync(engine.aevaluate(summary, checklist, article, question_first=question_first)))
    return out


def _row(name: str, evals: list[Evaluation], wall: float) -> dict[str, Any]:
    n = len(evals)
    return {
        "variant": name,
        "seconds_per_eval": wall / n,
        "llm_calls_per_eval": sum(e.usage.llm_calls for e in evals) / n,
        "cache_hits_per_eval": sum(e.usage.cache_hits for e in evals) / n,
        "prompt_tokens_per_eval": sum(e.usage.prompt_tokens for e in evals) / n,
        "completion_tokens_per_eval": sum(e.usage.completion_tokens for e in evals) / n,
        "errors": sum(len(e.errors) for e in evals),
    }


def measure(settings: Settings, data: Path, questions: int, repeats: int) -> dict[str, Any]:
    article, summaries = load_summaries(data, 0, repeats + 1)
    warmup, summaries = summaries[0], summaries[1:]
    checklist = fixed_checklist(questions)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        uncached = Engine(replace(settings, cache="off"))
        run_sync(uncached.aevaluate(warmup, checklist.select(None), article))  # load the model, warm caches
        for name, first in (("(a) as built: shared prefix first", False),
                            ("(b) prefix reuse defeated: question first", True)):
            started = time.perf_counter()
            evals = _run(uncached, checklist, article, summaries, first)
            rows.append(_row(name, evals, time.perf_counter() - started))
        cached = Engine(replace(settings, cache="on", cache_dir=tmp))
        _run(cached, checklist, article, summaries, False)
        started = time.perf_counter()
        evals = _run(cached, checklist, article, summaries, False)
        rows.append(_row("(c) cached re-run", evals, time.perf_counter() - started))
        cached.close()
    return {"model": settings.judge_model, "questions": questions, "repeats": repeats,
            "article_chars": len(article), "machine": f"{platform.machine()}, {platform.python_version()}",
            "rows": rows}


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"model `{result['model']}`, {result['questions']} questions, {result['repeats']} summaries of "
        f"SummEval article 0 ({result['article_chars']} characters), {result['machine']}",
        "",
        "| variant | s / evaluation | LLM calls | cache hits | prompt tokens | completion tokens | errors |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['variant']} | {r['seconds_per_eval']:.2f} | {r['llm_calls_per_eval']:.0f} | "
            f"{r['cache_hits_per_eval']:.0f} | {r['prompt_tokens_per_eval']:.0f} | "
            f"{r['completion_tokens_per_eval']:.0f} | {r['errors']} |"
        )
    return "\n".join(lines)


def add_perf_parser(sub: Any) -> None:
    p = sub.add_parser("perf", help="time one evaluation: prefix reuse vs question first vs cached",
                       description=__doc__)
    p.add_argument("--data", default="../shared/data/summeval/summeval.jsonl", help="SummEval JSONL file")
    p.add_argument("--questions", type=int, default=8, help="checklist size N (default: 8)")
    p.add_argument("--repeats", type=int, default=5, help="summaries evaluated per variant (default: 5)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a markdown table")
    # --model, --api-base, --timeout, ...: the engine's Settings, defaults and all
    add_setting_arguments(p.add_argument_group("model"), exclude=NOT_OPTIONS)
    p.set_defaults(func=cmd_perf)


def cmd_perf(args: argparse.Namespace) -> int:
    data = Path(args.data)
    if not data.is_file():
        raise FileNotFoundError(f"SummEval data not found at {data}; pass --data PATH/summeval.jsonl")
    result = measure(settings_from_args(args, exclude=NOT_OPTIONS), data, args.questions, args.repeats)
    print(json.dumps(result, indent=2) if args.json else markdown(result))
    return 0
