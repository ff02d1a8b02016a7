"""``bineval qworld``: the measurements behind docs/qworld.md.

- ``bineval qworld similarity --pairs FILE``: how well each duplicate measure (lexical, MiniLM, an embedding
  model of yours, rapidfuzz when installed) separates duplicate criteria from near misses on labelled pairs:
  AUROC, the threshold of best F1, precision/recall at the default threshold, time per pair.
- ``bineval qworld cost --questions FILE``: what writing criteria costs per question (LLM calls, prompt and
  completion tokens, seconds; criteria generated, after the similarity pre-filter, after the review, after
  top-K) for the task checklist (``bineval``), ``qworld-lite`` and ``qworld`` at the widths you name; the
  reply cache is off, so every call is made.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine import Engine, run_sync
from ..errors import BinevalError, UsageError
from ..qworld import DEFAULT_TASK, QworldConfig, parse_widths
from ..settings import Settings, add_setting_arguments, settings_from_args
from ..similarity import DEFAULT_THRESHOLDS, Similarity, make_similarity, opposite

PAPER_TABLE_7 = [
    # method, calls per question, total tokens per question (HealthBench, 100 questions, GPT-4.1)
    ("TICK (1 call)", 1.0, 851),
    ("OpenRubrics (1 call)", 1.0, 2526),
    ("Qworld-skill (1-call distilled)", 1.0, 4320),
    ("Qworld (multi-call)", 56.4, 98124),
    ("EvalAgent", 95.2, 396208),
]


# -- similarity -------------------------------------------------------------------------------------------------
@dataclass
class Pair:
    a: str
    b: str
    duplicate: bool
    kind: str = ""


def load_pairs(path: Path) -> list[Pair]:
    pairs = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            pairs.append(Pair(str(row["a"]), str(row["b"]), bool(row["duplicate"]), str(row.get("kind", ""))))
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{path}:{n}: a pair is {{\"a\": ..., \"b\": ..., \"duplicate\": true|false}} ({exc})") \
                from None
    if not pairs or all(p.duplicate for p in pairs) or not any(p.duplicate for p in pairs):
        raise UsageError(f"{path}: needs duplicate and non-duplicate pairs")
    return pairs


class _RapidFuzz:
    """rapidfuzz's token-set ratio (measured as a candidate when rapidfuzz is installed; not a dependency)."""

    name = "rapidfuzz token_set_ratio"

    def __init__(self) -> None:
        from rapidfuzz import fuzz

        self.threshold = 0.8
        self._fuzz = fuzz

    async def matrix(self, texts: Sequence[str]) -> list[list[float]]:
        return [[self._fuzz.token_set_ratio(a, b) / 100.0 for b in texts] for a in texts]


async def _pair_scores(measure: Similarity, pairs: Sequence[Pair]) -> tuple[list[float], list[float]]:
    """The scores of the labelled pairs, and of the cross pairs: every two texts of different anchors (different
    checks, so not duplicates: the many easy negatives of a real tree). Pairs of opposite polarity score 0, as in
    the pre-filter."""
    texts = list(dict.fromkeys([p.a for p in pairs] + [p.b for p in pairs]))
    index = {t: i for i, t in enumerate(texts)}
    matrix = await measure.matrix(texts)

    def score(a: str, b: str) -> float:
        return 0.0 if opposite(a, b) else matrix[index[a]][index[b]]

    group: dict[str, str] = {}
    for p in pairs:
        group.setdefault(p.a, p.a)
        group.setdefault(p.b, group[p.a])
    cross = [score(a, b) for i, a in enumerate(texts) for b in texts[i + 1:] if group[a] != group[b]]
    return [score(p.a, p.b) for p in pairs], cross


def auroc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Probability that a duplicate pair scores above a non-duplicate one (ties count half)."""
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def prf(scores: Sequence[float], labels: Sequence[bool], threshold: float) -> tuple[float, float, float]:
    tp = sum(s >= threshold and y for s, y in zip(scores, labels, strict=True))
    fp = sum(s >= threshold and not y for s, y in zip(scores, labels, strict=True))
    fn = sum(s < threshold and y for s, y in zip(scores, labels, strict=True))
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


CURVE = (0.5, 0.6, 0.7, 0.8, 0.9)


def measure_similarity(pairs: Sequence[Pair], measures: Sequence[Similarity]) -> list[dict[str, Any]]:
    labels = [p.duplicate for p in pairs]
    rows = []
    for m in measures:
        started = time.perf_counter()
        scores, cross = run_sync(_pair_scores(m, pairs))
        seconds = time.perf_counter() - started
        grid = sorted(set(round(s, 3) for s in scores))
        best = max(grid, key=lambda t: (prf(scores, labels, t)[2], t))
        precise = [t for t in grid if prf(scores, labels, t)[0] >= 0.95 and prf(scores, labels, t)[1] > 0]
        p, r, f = prf(scores, labels, m.threshold)
        kinds: dict[str, list[bool]] = {}
        for pair, s in zip(pairs, scores, strict=True):
            kinds.setdefault(pair.kind or "?", []).append((s >= m.threshold) == pair.duplicate)
        rows.append({
            "measure": m.name, "auroc": auroc(scores, labels), "threshold": m.threshold, "precision": p, "recall": r,
            "f1": f, "best_f1_threshold": best, "best_f1": prf(scores, labels, best)[2],
            "lowest_threshold_precision_95": min(precise) if precise else None,
            "recall_at_precision_95": prf(scores, labels, min(precise))[1] if precise else None,
            "ms_per_pair": 1000 * seconds / len(pairs), "seconds": seconds,
            "cross_pairs": len(cross), "cross_merged": sum(c >= m.threshold for c in cross),
            "curve": {t: (*prf(scores, labels, t)[:2], sum(c >= t for c in cross)) for t in CURVE},
            "accuracy_by_kind": {k: sum(v) / len(v) for k, v in sorted(kinds.items())},
        })
    return rows


def similarity_markdown(rows: Sequence[dict[str, Any]], pairs: Sequence[Pair]) -> str:
    n_dup = sum(p.duplicate for p in pairs)
    lines = [f"{len(pairs)} labelled pairs ({n_dup} duplicates, {len(pairs) - n_dup} not), "
             f"{platform.machine()}, load average {_load()}", "",
             "| measure | AUROC | threshold | precision | recall | F1 | best-F1 threshold (F1) | "
             "lowest threshold with precision >= 0.95 (recall) | ms / pair |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        p95 = ("n/a" if r["lowest_threshold_precision_95"] is None
               else f"{r['lowest_threshold_precision_95']:.2f} ({r['recall_at_precision_95']:.2f})")
        lines.append(f"| {r['measure']} | {r['auroc']:.3f} | {r['threshold']:.2f} | {r['precision']:.2f} | "
                     f"{r['recall']:.2f} | {r['f1']:.2f} | {r['best_f1_threshold']:.2f} ({r['best_f1']:.2f}) | "
                     f"{p95} | {r['ms_per_pair']:.2f} |")
    cross = rows[0]["cross_pairs"] if rows else 0
    lines += ["", f"precision / recall on the labelled pairs, and merges among {cross} cross pairs (texts of different "
              "anchors: distinct checks), by threshold:", "",
              "| measure | " + " | ".join(f"{t:.1f}" for t in CURVE) + " |", "|---|" + "---:|" * len(CURVE)]
    for r in rows:
        lines.append(f"| {r['measure']} | " + " | ".join(
            f"{p:.2f} / {rc:.2f} / {n}" for p, rc, n in (r["curve"][t] for t in CURVE)) + " |")
    kinds = sorted({k for r in rows for k in r["accuracy_by_kind"]})
    lines += ["", "accuracy at the threshold, by kind of pair:", "",
              "| measure | " + " | ".join(kinds) + " |", "|---|" + "---:|" * len(kinds)]
    for r in rows:
        lines.append(f"| {r['measure']} | " + " | ".join(f"{r['accuracy_by_kind'].get(k, 0):.2f}" for k in kinds)
                     + " |")
    return "\n".join(lines)


def _load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover - not on every platform
        return "n/a"


def cmd_similarity(args: argparse.Namespace) -> int:
    pairs = load_pairs(Path(args.pairs))
    measures: list[Similarity] = []
    for spec in args.measure or ["lexical", "minilm", "rapidfuzz"]:
        if spec == "rapidfuzz":
            try:
                measures.append(_RapidFuzz())
            except ImportError:
                print("rapidfuzz is not installed: skipped (pip install rapidfuzz to measure it)")
            continue
        try:
            m = make_similarity(spec, api_base=args.api_base)
        except BinevalError as exc:
            print(f"{spec}: skipped ({exc})")
            continue
        if m is not None:
            measures.append(m)
    if args.repeat_minilm:  # the first MiniLM measurement includes loading the weights
        for m in list(measures):
            if m.name == "minilm":
                run_sync(_pair_scores(m, pairs[:2]))
    rows = measure_similarity(pairs, measures)
    print(json.dumps(rows, indent=2) if args.json else similarity_markdown(rows, pairs))
    return 0


# -- cost -------------------------------------------------------------------------------------------------------
@dataclass
class Variant:
    label: str
    strategy: str
    config: QworldConfig | None = None


@dataclass
class CostRow:
    variant: str
    question: str
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    criteria: int = 0
    failures: int = 0
    error: str = ""


def parse_variant(text: str, top_k: int | None, similarity: str) -> Variant:
    """``bineval``, ``qworld-lite`` or ``qworld:3,3,3`` (the widths)."""
    name, _, widths = text.partition(":")
    if name == "bineval":
        return Variant("bineval (task checklist)", "bineval")
    if name == "qworld-lite":
        return Variant("qworld-lite", "qworld-lite", QworldConfig(top_k=top_k, similarity=similarity))
    if name == "qworld":
        w = parse_widths(widths) if widths else QworldConfig().widths
        return Variant(f"qworld widths {w[0]}/{w[1]}/{w[2]}", "qworld",
                       QworldConfig(widths=w, top_k=top_k, similarity=similarity))
    raise UsageError(f"unknown variant {text!r}: bineval, qworld-lite or qworld:W,W,W")


def load_questions(path: Path, limit: int | None) -> list[dict[str, str]]:
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                row = json.loads(line)
                out.append({"id": str(row.get("id", n)), "question": str(row["question"])})
            except (ValueError, KeyError) as exc:
                raise UsageError(f"{path}:{n}: a question is {{\"id\": ..., \"question\": ...}} ({exc})") from None
    return out[:limit] if limit else out


def measure_cost(settings: Settings, questions: Sequence[dict[str, str]], variants: Sequence[Variant],
                 task: str) -> list[CostRow]:
    rows: list[CostRow] = []
    for v in variants:
        for q in questions:
            engine = Engine(settings.with_overrides(cache="off"))
            row = CostRow(v.label, q["id"])
            started = time.perf_counter()
            try:
                if v.strategy == "bineval":
                    checklist = engine.checklist(task)
                else:
                    checklist = engine.checklist(task, strategy=v.strategy, question=q["question"], qworld=v.config)
                row.criteria = len(checklist.questions)
                if checklist.tree is not None:
                    row.counts = dict(checklist.tree.counts)
                    row.failures = len(checklist.tree.failures)
            except BinevalError as exc:
                row.error = str(exc)[:200]
            row.seconds = time.perf_counter() - started
            u = engine.usage
            row.calls, row.prompt_tokens, row.completion_tokens = u.llm_calls, u.prompt_tokens, u.completion_tokens
            engine.close()
            rows.append(row)
            print(f"  {v.label} / {q['id']}: {row.calls} calls, {row.seconds:.1f} s, {row.criteria} criteria"
                  + (f", ERROR {row.error}" if row.error else ""), flush=True)
    return rows


def _mean(rows: Sequence[CostRow], f: Callable[[CostRow], float]) -> float:
    return sum(f(r) for r in rows) / len(rows) if rows else 0.0


def cost_markdown(rows: Sequence[CostRow], model: str, load_before: str, load_after: str) -> str:
    variants = list(dict.fromkeys(r.variant for r in rows))
    lines = [f"model `{model}`, reply cache off, {platform.machine()} with {os.cpu_count()} cores, load average "
             f"{load_before} before and {load_after} after (1/5/15 min; the machine is shared)", "",
             "Mean per question:", "",
             "| strategy | LLM calls | prompt tokens | completion tokens | total tokens | seconds | criteria "
             "generated | after similarity pre-filter | after review | after top-K | failed calls | errors |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for v in variants:
        rs = [r for r in rows if r.variant == v]
        ok = [r for r in rs if not r.error] or rs
        cells = [v, f"{_mean(ok, lambda r: r.calls):.1f}", f"{_mean(ok, lambda r: r.prompt_tokens):,.0f}",
                 f"{_mean(ok, lambda r: r.completion_tokens):,.0f}",
                 f"{_mean(ok, lambda r: r.prompt_tokens + r.completion_tokens):,.0f}",
                 f"{_mean(ok, lambda r: r.seconds):.1f}"]
        for key in ("criterion_generated", "criterion_after_similarity", "criterion_after_review"):
            present = any(key in r.counts for r in ok)
            values = [float(r.counts.get(key, 0)) for r in ok]
            cells.append(f"{sum(values) / len(values):.1f}" if present and values else "—")
        cells += [f"{_mean(ok, lambda r: r.criteria):.1f}", f"{_mean(ok, lambda r: r.failures):.1f}",
                  f"{sum(bool(r.error) for r in rs)} of {len(rs)}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Per question:", "", "| strategy | question | calls | tokens | seconds | criteria | note |",
              "|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        note = r.error or (f"{r.failures} failed calls" if r.failures else "")
        question, note = (" ".join(text.replace("|", "\\|").split()) for text in (r.question, note))  # one cell each
        lines.append(f"| {r.variant} | {question} | {r.calls} | {r.prompt_tokens + r.completion_tokens:,} | "
                     f"{r.seconds:.1f} | {r.criteria} | {note} |")
    lines += ["", "The paper's Table 7 (HealthBench, 100 questions, GPT-4.1 generator), per question:", "",
              "| method | calls | total tokens |", "|---|---:|---:|"]
    lines += [f"| {name} | {calls:g} | {tokens:,} |" for name, calls, tokens in PAPER_TABLE_7]
    return "\n".join(lines)


def cmd_cost(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    similarity = args.qworld_similarity or "lexical"
    variants = [parse_variant(v, args.qworld_top_k, similarity) for v in args.variant or
                ["bineval", "qworld-lite", "qworld:2,2,2", "qworld"]]
    questions = load_questions(Path(args.questions), args.limit)
    load_before = _load()
    rows = measure_cost(settings, questions, variants, args.task)
    out = cost_markdown(rows, settings.generator_model, load_before, _load())
    if args.json:
        out = json.dumps([r.__dict__ for r in rows], indent=2)
    print(out)
    if args.out:
        from ..files import write_text_atomic

        write_text_atomic(args.out, out + "\n")
    return 0 if not any(r.error for r in rows) else 2


def add_qworld_parser(sub: Any) -> None:
    p = sub.add_parser("qworld", help="measure Qworld: duplicate measures, generation cost")
    qsub = p.add_subparsers(dest="qworld_command", required=True)

    s = qsub.add_parser("similarity", help="how well each duplicate measure separates labelled criterion pairs",
                        description="AUROC, precision/recall at the default threshold, the best-F1 threshold and "
                        f"time per pair for each measure (defaults: {DEFAULT_THRESHOLDS}).")
    s.add_argument("--pairs", default="docs/qworld/duplicate-pairs.jsonl",
                   help="JSONL of {a, b, duplicate, kind} (default: docs/qworld/duplicate-pairs.jsonl)")
    s.add_argument("--measure", action="append", metavar="MEASURE",
                   help="lexical, minilm, rapidfuzz or embedding:<litellm model> (repeatable; default: the first "
                        "three, each skipped when not installed)")
    s.add_argument("--api-base", default=None, help="base URL of the embedding endpoint (embedding:<model>)")
    s.add_argument("--repeat-minilm", action="store_true", help="load MiniLM before timing it")
    s.add_argument("--json", action="store_true", help="JSON instead of markdown")
    s.set_defaults(func=cmd_similarity)

    c = qsub.add_parser("cost", help="what writing criteria costs per question, per strategy (cache off)",
                        description="For each question of --questions and each --variant: LLM calls, tokens, "
                        "seconds and criteria counts per stage, as a markdown table beside the paper's Table 7.")
    c.add_argument("--questions", default="docs/qworld/questions.jsonl",
                   help="JSONL of {id, question} (default: docs/qworld/questions.jsonl)")
    c.add_argument("--variant", action="append", metavar="V",
                   help="bineval | qworld-lite | qworld[:W,W,W] (repeatable; default: bineval, qworld-lite, "
                        "qworld:2,2,2, qworld at the default widths)")
    c.add_argument("--task", default=DEFAULT_TASK, help=f"the task text (default: {DEFAULT_TASK!r})")
    c.add_argument("--limit", type=int, default=None, help="the first N questions")
    c.add_argument("--out", default=None, help="also write the table to this file")
    c.add_argument("--json", action="store_true", help="JSON rows instead of markdown")
    add_setting_arguments(c.add_argument_group("model"),
                          exclude=("cache", "cache_dir", "cache_url", "cache_prefix", "cache_ttl",
                                   "cache_key_env"))
    c.set_defaults(func=cmd_cost)

