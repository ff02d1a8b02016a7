"""Pure rendering of evaluation records: per-test sections, the end-of-run summary, the JSON report.

A record is the JSON-able dict :meth:`BinevalService.record` makes (so pytest-xdist workers can send it).
rich renders tables to a string that goes through pytest's terminal reporter.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from typing import Any

from .models import Usage

Record = dict[str, Any]
REPORT_FORMAT = 1


def _fmt(score: float | None) -> str:
    return "n/a" if score is None else f"{score:.2f}"


def score_line(rec: Record) -> str:
    """``consistency 0.43 < 0.80, fluency 1.00 >= 0.70``."""
    parts = []
    for dim, limit in rec["thresholds"].items():
        s = rec["scores"].get(dim)
        op = ">=" if s is not None and s >= limit else "<"
        parts.append(f"{dim} {_fmt(s)} {op} {limit:.2f}")
    return ", ".join(parts)


def _ordered_verdicts(rec: Record) -> list[dict[str, Any]]:
    """Verdicts of the checked dimensions, failing (no, error) first."""
    dims = set(rec["thresholds"])
    rank = {"error": 0, "no": 1, "yes": 2}
    vs = [v for v in rec["verdicts"] if v["dimension"] in dims]
    return sorted(vs, key=lambda v: rank.get(v["answer"], 3))


def render_test_section(records: Sequence[Record], *, color: bool, width: int = 100) -> str:
    """The ``bineval`` section under a failing test: a table of its questions, failing first."""
    from rich.console import Console
    from rich.table import Table

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=color, no_color=not color, width=max(60, width),
                      color_system="standard" if color else None, highlight=False)
    for rec in records:
        console.print(f"task: {rec['task']}")
        console.print(f"judge: {rec['model']}   checklist: {rec['checklist_status']}   outcome: {rec['outcome']}")
        console.print(f"scores: {score_line(rec)}")
        table = Table(show_lines=False, expand=True)
        table.add_column("dimension", no_wrap=True)
        table.add_column("question", ratio=3)
        table.add_column("answer", no_wrap=True)
        table.add_column("explanation", ratio=3)
        styles = {"yes": "green", "no": "red", "error": "bold magenta"}
        for v in _ordered_verdicts(rec):
            why = v.get("error") if v["answer"] == "error" else v.get("explanation")
            table.add_row(v["dimension"], v["question"], f"[{styles.get(v['answer'], '')}]{v['answer']}[/]",
                          why or "")
        console.print(table)
    return buf.getvalue().rstrip("\n")


def totals(records: Iterable[Record], usage: Usage, unpinned: int = 0, pins_written: int = 0) -> dict[str, Any]:
    """Run totals; ``usage`` is everything the run's engines spent (checklists and evaluations)."""
    recs = list(records)
    return {
        "evaluations": len(recs),
        "passed": sum(r["outcome"] == "passed" for r in recs),
        "failed": sum(r["outcome"] == "failed" for r in recs),
        "judge_errors": sum(sum(v["answer"] == "error" for v in r["verdicts"]) for r in recs),
        "questions": sum(len(r["verdicts"]) for r in recs),
        "llm_calls": usage.llm_calls,
        "cache_hits": usage.cache_hits,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cost_usd": usage.cost_usd,
        "unpinned_checklists": unpinned,
        "pinned_checklists_written": pins_written,
    }


def summary_lines(records: Sequence[Record], tot: dict[str, Any]) -> list[tuple[str, dict[str, bool]]]:
    """(text, markup) lines of the end-of-run summary."""
    lines: list[tuple[str, dict[str, bool]]] = []
    for rec in records:
        outcome = rec["outcome"]
        markup = {"green": True} if outcome == "passed" else {"red": True, "bold": True}
        label = {"passed": "PASS", "failed": "BELOW THRESHOLD", "error": "JUDGE ERROR"}.get(outcome, outcome.upper())
        lines.append((f"{label} {rec['test']}: {score_line(rec)}", markup))
        if outcome != "passed":
            for v in _ordered_verdicts(rec):
                if v["answer"] == "no":
                    lines.append((f"    [{v['dimension']}] {v['question']}", {}))
                    lines.append((f"        -> no: {v.get('explanation') or '(no explanation)'}", {}))
                elif v["answer"] == "error":
                    lines.append((f"    [{v['dimension']}] {v['question']}", {}))
                    lines.append((f"        -> judge error: {v.get('error')}", {"red": True}))
    cost = "unknown" if tot["cost_usd"] is None else f"${tot['cost_usd']:.4f}"
    lines.append((
        f"evaluations: {tot['evaluations']} ({tot['passed']} passed, {tot['failed']} below threshold), "
        f"questions: {tot['questions']}, judge errors: {tot['judge_errors']}, "
        f"LLM calls: {tot['llm_calls']}, cache hits: {tot['cache_hits']}, "
        f"tokens: {tot['prompt_tokens']} prompt + {tot['completion_tokens']} completion, cost: {cost}",
        {"bold": True},
    ))
    if tot["unpinned_checklists"]:
        lines.append((
            f"unpinned checklists: {tot['unpinned_checklists']} "
            "(review and pin them with --bineval-update-checklists)", {"yellow": True},
        ))
    if tot["pinned_checklists_written"]:
        lines.append((f"pinned checklists written: {tot['pinned_checklists_written']}", {"yellow": True}))
    return lines


def json_report(records: Sequence[Record], tot: dict[str, Any], settings: dict[str, Any],
                optimized: Sequence[Any] | None = None) -> dict[str, Any]:
    """The ``--bineval-report`` document; ``optimized``: what ``--bineval-optimize`` did, per prompt file."""
    report: dict[str, Any] = {"format": REPORT_FORMAT, "settings": settings, "totals": tot,
                              "evaluations": list(records)}
    if optimized is not None:
        report["optimize"] = [
            {"prompt": r.prompt, "status": r.status, "message": r.message, "score": r.score,
             "failures": r.failures, "lessons": r.lessons, "chars_before": r.chars_before,
             "chars_after": r.chars_after, "history": r.history, "usage": r.usage.model_dump(mode="json")}
            for r in optimized
        ]
    return report


def optimize_lines(results: Sequence[Any]) -> list[tuple[str, dict[str, bool]]]:
    """(text, markup) lines of the ``--bineval-optimize`` section: one block per prompt file."""
    if not results:
        return [(
            "no test names its generator prompt: add @pytest.mark.bineval(prompt=\"path/to/prompt\") to the "
            "tests whose outputs that prompt makes, then run again with --bineval-optimize",
            {"yellow": True},
        )]
    styles: dict[str, dict[str, bool]] = {
        "updated": {"green": True, "bold": True}, "rolled back": {"yellow": True, "bold": True},
        "error": {"red": True, "bold": True},
    }
    lines: list[tuple[str, dict[str, bool]]] = []
    for r in results:
        score = "n/a" if r.score is None else f"{r.score:.2f}"
        lines.append((f"{r.status.upper()} {r.prompt}: {r.message}", styles.get(r.status, {"bold": True})))
        if r.status in ("updated", "unchanged", "no failures"):
            lines.append((f"    score {score} (share of yes), failing verdicts {r.failures}, "
                          f"{r.chars_before} -> {r.chars_after} characters", {}))
        for lesson in r.lessons:
            lines.append((f"    lesson [{lesson.get('status')}] {lesson['text']}", {}))
            if lesson.get("rejected_edit"):
                lines.append((f"        edit not applied: {lesson['rejected_edit']}", {}))
        if r.status in ("updated", "rolled back"):
            lines.append((f"    review with `git diff`; history: {r.history}", {}))
    return lines
