"""Terminal output, pure functions of records: the section under a failing test, the end-of-run summary,
the ``--bineval-optimize`` section. rich renders tables to a string that goes through pytest's terminal
reporter (so ``--color`` and ``NO_COLOR`` apply).
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from ..record import EvaluationRecord, OptimizeOutcome, Totals

Line = tuple[str, dict[str, bool]]


def _fmt(score: float | None) -> str:
    return "n/a" if score is None else f"{score:.2f}"


def score_line(rec: EvaluationRecord) -> str:
    """``consistency 0.43 < 0.80, fluency 1.00 >= 0.70`` (``error`` when a question got no answer)."""
    parts = []
    for d in rec.dimensions:
        op = ">=" if d.outcome == "passed" else "<"
        note = " (judge error)" if d.outcome == "error" else ""
        parts.append(f"{d.name} {_fmt(d.score)} {op} {d.threshold:.2f}{note}")
    return ", ".join(parts)


def render_test_section(records: Sequence[EvaluationRecord], *, color: bool, width: int = 100) -> str:
    """The ``bineval`` section under a failing test: a table of its questions, failing first."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=color, no_color=not color, width=max(60, width),
                      color_system="standard" if color else None, highlight=False)
    for rec in records:
        console.print(f"task: {rec.task}", markup=False)
        console.print(f"judge: {rec.model}   checklist: {rec.checklist_status}   outcome: {rec.outcome}", markup=False)
        console.print(f"scores: {score_line(rec)}", markup=False)
        table = Table(show_lines=False, expand=True)
        table.add_column("dimension", no_wrap=True)
        table.add_column("question", ratio=3)
        table.add_column("answer", no_wrap=True)
        table.add_column("explanation", ratio=3)
        styles = {"yes": "green", "no": "red", "error": "bold magenta"}
        for v in rec.checked():
            why = v.error if v.answer == "error" else v.explanation
            table.add_row(Text(v.dimension), Text(v.question), Text(v.answer, style=styles[v.answer]), Text(why or ""))
        console.print(table)
    return buf.getvalue().rstrip("\n")


def summary_lines(records: Sequence[EvaluationRecord], tot: Totals) -> list[Line]:
    """(text, markup) lines of the end-of-run summary."""
    lines: list[Line] = []
    for rec in records:
        markup = {"green": True} if rec.outcome == "passed" else {"red": True, "bold": True}
        label = {"passed": "PASS", "failed": "BELOW THRESHOLD", "error": "JUDGE ERROR"}[rec.outcome]
        lines.append((f"{label} {rec.key}: {score_line(rec)}", markup))
        if rec.outcome != "passed":
            for v in rec.checked():
                if v.answer == "no":
                    lines.append((f"    [{v.dimension}] {v.question}", {}))
                    lines.append((f"        -> no: {v.explanation or '(no explanation)'}", {}))
                elif v.answer == "error":
                    lines.append((f"    [{v.dimension}] {v.question}", {}))
                    lines.append((f"        -> judge error: {v.error}", {"red": True}))
    cost = "unknown" if tot.cost_usd is None else f"${tot.cost_usd:.4f}"
    lines.append((
        f"evaluations: {tot.evaluations} ({tot.passed} passed, {tot.failed} below threshold, "
        f"{tot.errors} judge error), questions: {tot.questions}, judge errors: {tot.judge_errors}, "
        f"LLM calls: {tot.llm_calls}, cache hits: {tot.cache_hits}, "
        f"tokens: {tot.prompt_tokens} prompt + {tot.completion_tokens} completion, cost: {cost}",
        {"bold": True},
    ))
    if tot.unpinned_checklists:
        lines.append((
            f"unpinned checklists: {tot.unpinned_checklists} "
            "(review and pin them with --bineval-update-checklists)", {"yellow": True},
        ))
    if tot.pinned_checklists_written:
        lines.append((f"pinned checklists written: {tot.pinned_checklists_written}", {"yellow": True}))
    return lines


def optimize_lines(results: Sequence[OptimizeOutcome]) -> list[Line]:
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
    lines: list[Line] = []
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
