"""``bineval bench rubrics``: criteria written for each question, compared with a reference rubric.

For a rubric set (HealthBench-style JSONL: a prompt, a list of rubric items with points) and each strategy
(``qworld``, ``qworld-lite``, ``bineval``), criteria are generated for each prompt and a judge decides, one
yes/no call per criterion, which criteria of one list are covered by the other list (the paper's protocol):

- **coverage**: the share of reference criteria covered by at least one generated criterion (also weighted
  by the reference's positive points);
- **uniqueness**: the share of generated criteria that match no reference criterion (new checks, or noise:
  the judge does not tell which; the paper's human study does).

The judge is the configured judge model with ``bench/prompts/criteria_match.md``; every call is cached.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine import Engine
from ..errors import BinevalError, CallError, UsageError
from ..jsonl import get_field, iter_records
from ..llm.client import LLMClient
from ..llm.local import is_embedded
from ..models import STRATEGIES, Checklist, Usage
from ..prompting import delimit, load_prompt
from ..qworld import DEFAULT_TASK
from ..settings import settings_from_args

RUBRICS = "rubrics"


@dataclass(frozen=True)
class RubricCriterion:
    text: str
    points: float = 1.0


@dataclass(frozen=True)
class RubricItem:
    id: str
    question: str
    rubric: tuple[RubricCriterion, ...]


def prompt_text(value: Any, where: str) -> str:
    """A prompt as text: a string, or a conversation (``[{"role", "content"}]``; one user turn -> its text)."""
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, list) and value and all(isinstance(m, Mapping) and "content" in m for m in value):
        if len(value) == 1:
            return str(value[0]["content"]).strip()
        return "\n\n".join(f"{m.get('role', 'user')}: {str(m['content']).strip()}" for m in value)
    raise ValueError(f"{where}: the prompt must be a text or a list of {{role, content}} messages")


def _criterion(raw: Any, where: str) -> RubricCriterion:
    if isinstance(raw, str) and raw.strip():
        return RubricCriterion(raw.strip())
    if isinstance(raw, Mapping):
        text = next((raw[k] for k in ("criterion", "text", "question") if isinstance(raw.get(k), str)), "")
        points = raw.get("points", 1)
        if text.strip() and isinstance(points, (int, float)) and not isinstance(points, bool):
            return RubricCriterion(text.strip(), float(points))
    raise ValueError(f"{where}: a rubric item is a text or {{\"criterion\": text, \"points\": number}}, not {raw!r}")


def load_rubrics(path: str | Path, prompt_key: str = "prompt", rubric_key: str = "rubrics",
                 id_key: str = "prompt_id", limit: int | None = None) -> list[RubricItem]:
    """The items of a rubric file (JSONL, or a ``.json`` list); errors name the line and the key."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise FileNotFoundError(f"rubric file not found: {file}")
    items = []
    for number, where, record in iter_records(file, limit):
        rubric = get_field(record, rubric_key, where)
        if not isinstance(rubric, list) or not rubric:
            raise ValueError(f"{where}: {rubric_key!r} must be a non-empty list of rubric items")
        ident = record.get(id_key, number)
        items.append(RubricItem(str(ident), prompt_text(get_field(record, prompt_key, where), where),
                                tuple(_criterion(r, f"{where}, {rubric_key}[{i}]") for i, r in enumerate(rubric))))
    if not items:
        raise ValueError(f"{file}: no rubric item")
    return items


MATCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "enum": ["yes", "no"]},
        "match": {"type": "string", "maxLength": 12},
        "explanation": {"type": "string", "maxLength": 200},
    },
    "required": ["answer", "match", "explanation"],
    "additionalProperties": False,
}


def _match(obj: dict[str, Any]) -> tuple[bool, str]:
    answer = str(obj.get("answer", "")).strip().lower()
    if answer not in ("yes", "no"):
        raise ValueError(f'"answer" must be "yes" or "no", not {obj.get("answer")!r}')
    return answer == "yes", str(obj.get("match") or "").strip()


@dataclass
class Decision:
    criterion: str
    covered: bool | None  # None: the judge gave no usable answer
    match: str = ""
    error: str = ""


async def covered_by(client: LLMClient, question: str, criteria: Sequence[str], listing: Sequence[tuple[str, str]],
                     concurrency: int) -> tuple[list[Decision], Usage]:
    """For each of ``criteria``: is it covered by ``listing`` ((id, text) pairs)? One judge call each."""
    semaphore = asyncio.Semaphore(max(1, concurrency))
    text = "\n".join(f"{i}: {t}" for i, t in listing)

    async def one(criterion: str) -> tuple[Decision, Usage]:
        messages = load_prompt("criteria_match", "bench/prompts").messages(
            question=delimit(question), criteria=delimit(text), criterion=delimit(criterion))
        async with semaphore:
            try:
                reply = await client.complete_json(messages, schema_name="criteria_match", schema=MATCH_SCHEMA,
                                                   validate=_match, max_tokens=160)
            except CallError as exc:
                return Decision(criterion, None, error=exc.cause), exc.usage or Usage()
        yes, match = reply.value
        return Decision(criterion, yes, match if yes else ""), reply.usage

    results = await asyncio.gather(*(one(c) for c in criteria))
    return [d for d, _ in results], Usage.total(u for _, u in results)


@dataclass
class ItemResult:
    item: str
    strategy: str
    generated: list[str] = field(default_factory=list)
    coverage: list[Decision] = field(default_factory=list)
    uniqueness: list[Decision] = field(default_factory=list)
    reference_points: list[float] = field(default_factory=list)
    generation: Usage = field(default_factory=Usage)
    judging: Usage = field(default_factory=Usage)
    error: str = ""

    def coverage_share(self) -> float | None:
        answered = [d.covered for d in self.coverage if d.covered is not None]
        return sum(answered) / len(answered) if answered else None

    def weighted_coverage(self) -> float | None:
        pairs = [(p, d.covered) for p, d in zip(self.reference_points, self.coverage, strict=True)
                 if p > 0 and d.covered is not None]
        total = sum(p for p, _ in pairs)
        return sum(p for p, c in pairs if c) / total if total else None

    def uniqueness_share(self) -> float | None:
        answered = [not d.covered for d in self.uniqueness if d.covered is not None]
        return sum(answered) / len(answered) if answered else None

    def judge_errors(self) -> int:
        return sum(d.covered is None for d in [*self.coverage, *self.uniqueness])


async def run_rubrics(engine: Engine, items: Sequence[RubricItem], strategies: Sequence[str],
                      task: str = DEFAULT_TASK, quiet: bool = True) -> list[ItemResult]:
    """Generate criteria per item and strategy, then judge coverage and uniqueness against the rubric."""
    judge = engine.client(engine.settings.judge_model)
    concurrency = 1 if is_embedded(engine.settings.judge_model) else engine.settings.concurrency
    task_checklist: Checklist | None = None
    out: list[ItemResult] = []
    for strategy in strategies:
        for item in items:
            result = ItemResult(item.id, strategy, reference_points=[c.points for c in item.rubric])
            before = engine.usage
            try:
                if strategy == "bineval":  # one checklist for the task, the same for every question
                    if task_checklist is None:
                        task_checklist = await engine.achecklist(task)
                    checklist = task_checklist
                else:
                    checklist = await engine.achecklist(task, strategy=strategy, question=item.question)
            except BinevalError as exc:
                result.error = str(exc)[:300]
                out.append(result)
                continue
            result.generation = engine.usage.since(before)
            result.generated = [q.text for q in checklist.questions]
            generated = [(q.id, q.text) for q in checklist.questions]
            reference = [(f"r{i + 1}", c.text) for i, c in enumerate(item.rubric)]
            result.coverage, u1 = await covered_by(judge, item.question, [c.text for c in item.rubric], generated,
                                                   concurrency)
            result.uniqueness, u2 = await covered_by(judge, item.question, result.generated, reference, concurrency)
            result.judging = u1 + u2
            engine.add_usage(result.judging)
            out.append(result)
            if not quiet:
                print(f"  {strategy} / {item.id}: {len(result.generated)} criteria, coverage "
                      f"{_f(result.coverage_share())}, uniqueness {_f(result.uniqueness_share())}", file=sys.stderr)
    return out


def _f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def result_document(results: Sequence[ItemResult], items: Sequence[RubricItem], model: str, judge: str,
                    command: str) -> dict[str, Any]:
    summary = []
    for strategy in dict.fromkeys(r.strategy for r in results):
        rs = [r for r in results if r.strategy == strategy]
        ok = [r for r in rs if not r.error]
        summary.append({
            "strategy": strategy, "items": len(rs), "errors": len(rs) - len(ok),
            "criteria_per_item": _mean([float(len(r.generated)) for r in ok]),
            "coverage": _mean([r.coverage_share() for r in ok]),
            "weighted_coverage": _mean([r.weighted_coverage() for r in ok]),
            "uniqueness": _mean([r.uniqueness_share() for r in ok]),
            "judge_errors": sum(r.judge_errors() for r in ok),
            "generation": Usage.total(r.generation for r in ok).model_dump(),
            "judging": Usage.total(r.judging for r in ok).model_dump(),
        })
    return {
        "dataset": RUBRICS, "model": model, "judge": judge, "command": command, "items": len(items),
        "reference_criteria_per_item": _mean([float(len(i.rubric)) for i in items]),
        "summary": summary,
        "results": [{
            "item": r.item, "strategy": r.strategy, "error": r.error, "generated": r.generated,
            "coverage": r.coverage_share(), "weighted_coverage": r.weighted_coverage(),
            "uniqueness": r.uniqueness_share(),
            "coverage_decisions": [d.__dict__ for d in r.coverage],
            "uniqueness_decisions": [d.__dict__ for d in r.uniqueness],
        } for r in results],
    }


def render_markdown(doc: dict[str, Any]) -> str:
    lines = [f"# Criteria against a reference rubric: {doc['items']} items", "",
             f"generator `{doc['model']}`, judge `{doc['judge']}`; reference criteria per item: "
             f"{_f(doc['reference_criteria_per_item'])}", "", f"`{doc['command']}`", "",
             "| strategy | items | criteria / item | coverage | coverage (points-weighted) | uniqueness | "
             "generation calls | judge calls | errors |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in doc["summary"]:
        lines.append(f"| {s['strategy']} | {s['items']} | {_f(s['criteria_per_item'])} | {_f(s['coverage'])} | "
                     f"{_f(s['weighted_coverage'])} | {_f(s['uniqueness'])} | {s['generation']['llm_calls']} | "
                     f"{s['judging']['llm_calls']} | {s['errors']} items, {s['judge_errors']} judge errors |")
    lines += ["", "Coverage: share of the reference criteria that a generated criterion covers. Uniqueness: share "
              "of the generated criteria that no reference criterion covers (new checks or noise). The paper "
              "(HealthBench, 100 questions, GPT-4.1, its Table 7): Qworld 0.92 / 0.79, its one-call variant "
              "0.87 / 0.59."]
    return "\n".join(lines) + "\n"


def add_rubric_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(f"reference rubrics (DATASET = {RUBRICS}; --data FILE, --task, --limit apply)")
    g.add_argument("--prompt-key", default="prompt", metavar="K",
                   help="key of the question: a text or a list of {role, content} messages (default: prompt)")
    g.add_argument("--rubric-key", default="rubrics", metavar="K",
                   help="key of the rubric: a list of {criterion, points} or texts (default: rubrics)")
    g.add_argument("--strategy", action="append", choices=STRATEGIES, metavar="|".join(STRATEGIES),
                   help="criteria generation strategy to compare (repeatable; default: qworld-lite and qworld)")


def cmd_rubrics(args: argparse.Namespace, command: str) -> int:
    from .report import write_results

    if not args.data:
        raise UsageError(f"bineval bench {RUBRICS} needs --data FILE (JSONL of prompts with rubrics)")
    if args.limit is not None and args.limit < 1:
        raise UsageError("--limit must be >= 1")
    items = load_rubrics(args.data, args.prompt_key, args.rubric_key, limit=args.limit)
    settings = settings_from_args(args)
    engine = Engine(settings)
    try:
        results = asyncio.run(run_rubrics(engine, items, args.strategy or ["qworld-lite", "qworld"],
                                          args.task or DEFAULT_TASK, quiet=args.quiet))
    finally:
        engine.close()
    doc = result_document(results, items, settings.generator_model, settings.judge_model, command)
    markdown = render_markdown(doc)
    json_path, md_path = write_results(doc, markdown, args.out)
    sys.stdout.write(markdown)
    print(f"\nwrote {json_path} and {md_path}", file=sys.stderr)
    return 2 if any(r.error for r in results) else 0

