"""Terminal output, pure functions of records: the section under a failing test, the end-of-run summary,
the ``--bineval-optimize`` section. rich renders tables to a string that goes through pytest's terminal
reporter (so ``--color`` and ``NO_COLOR`` apply). Model text is inert (:mod:`pytest_bineval.untrusted`), and every
line these functions return has its bidirectional controls shown (``<U+202E>``), test ids and task texts included.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from ..llm.caching import CACHE_MINIMUM_TOKENS
from ..models import Verdict, cost_text
from ..report.comparison import CHANGE_KINDS, EvaluationDiff, QuestionChange, RegressionReport
from ..report.document import ChecklistGeneration, OptimizeOutcome, PinAction, Totals
from ..report.record import ConfirmationSummary, DimensionResult, EvaluationRecord, UnscoredTest, pin_key
from ..untrusted import inert, one_line, show_controls
from .verdict import suite_text

Line = tuple[str, dict[str, bool]]


def _shown(lines: list[Line]) -> list[Line]:
    """``lines`` with their bidirectional controls shown: the last step of every function returning lines."""
    return [(show_controls(text), markup) for text, markup in lines]


def _fmt(score: float | None) -> str:
    return "n/a" if score is None else f"{score:.2f}"


def interval(d: DimensionResult) -> str:
    """``[0.30, 0.90]``: the score's 95% Wilson interval."""
    return "[n/a]" if d.low is None or d.high is None else f"[{d.low:.2f}, {d.high:.2f}]"


def score_line(rec: EvaluationRecord) -> str:
    """``consistency 0.43 < 0.80, fluency 1.00 >= 0.70`` (``error`` when a question got no answer); with repeats
    or the lower-bound gate, each score's 95% interval and what the threshold was compared with;
    ``quality 0.38 points >= 0.35`` for a points-weighted score."""
    parts = []
    for d in rec.dimensions:
        op = ">=" if d.outcome == "passed" else "<"
        kind = " points" if d.score_kind == "points" else ""
        note = ""
        if d.outcome == "error":  # not scored: no comparison with the threshold is claimed
            parts.append(f"{d.name} {_fmt(d.score)}{kind} over the answered questions, threshold {d.threshold:.2f} "
                         "(judge error: not scored)")
            continue
        if rec.gate == "lower-bound":
            parts.append(f"{d.name} {_fmt(d.score)}{kind} {interval(d)} lower bound {_fmt(d.low)} {op} "
                         f"{d.threshold:.2f}{note}")
        elif rec.repeats > 1:
            parts.append(f"{d.name} {_fmt(d.score)}{kind} {interval(d)} {op} {d.threshold:.2f}{note}")
        else:
            parts.append(f"{d.name} {_fmt(d.score)}{kind} {op} {d.threshold:.2f}{note}")
    return ", ".join(parts)


def answer_text(v: Verdict) -> str:
    """``no``, or asked more than once (repeats, confirmation) ``no (1 of 3 yes)``."""
    asks = v.asks
    if len(asks) < 2:
        return v.answer
    return f"{v.answer} ({asks.count('yes')} of {len(asks)} yes)"


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
        if rec.first_failing_turn is not None:
            console.print(first_step_line(rec), markup=False)
        table = Table(show_lines=False, expand=True)
        table.add_column("dimension", no_wrap=True)
        points = rec.points()  # question-specific criteria carry importance points
        if points:
            table.add_column("points", no_wrap=True, justify="right")
        table.add_column("question", ratio=3)
        table.add_column("answer", no_wrap=True)
        table.add_column("explanation", ratio=3)
        styles = {"yes": "green", "no": "red", "error": "bold magenta"}
        for v in rec.checked():
            why = v.error if v.answer == "error" else v.reason() if v.answer == "no" else v.explanation
            cells = [Text(v.dimension)]
            if points:
                p = points.get(v.question_id)
                cells.append(Text("" if p is None else f"{p:+d}"))
            table.add_row(*cells, Text(inert(v.asked)), Text(answer_text(v), style=styles[v.answer]),
                          Text(inert(why or "")))
        console.print(table)
    return show_controls(buf.getvalue().rstrip("\n"))


def first_step_line(rec: EvaluationRecord) -> str:
    """``first step that went wrong: turn 3 (assistant): [tone] Is the reply polite? -> no: ...``: a conversation's
    first failing turn and its first failing question there."""
    turn = rec.first_failing_turn
    first = next((v for v in rec.failing() if v.step == turn), None)
    what = ("" if first is None
            else f": [{first.dimension}] {one_line(first.question)} -> no: {one_line(first.reason())}")
    return f"first step that went wrong: {rec.turn_label(turn or 0)}{what}"


def prompt_cache_text(tot: Totals) -> str:
    """`` (1500 cached, 200 written to cache)`` after the prompt tokens, or "" when no provider cache was used."""
    parts = [f"{tot.cached_prompt_tokens} cached"] if tot.cached_prompt_tokens else []
    if tot.cache_write_tokens:
        parts.append(f"{tot.cache_write_tokens} written to cache")
    return f" ({', '.join(parts)})" if parts else ""


def estimated_text(tot: Totals) -> str:
    """`` (3 streamed replies estimated)`` after the tokens, or "": replies whose stream was closed after the
    answer (or that came without a usage report) have their tokens estimated from the text sent and received."""
    if not tot.estimated_requests:
        return ""
    return f" ({_n(tot.estimated_requests, 'streamed reply', 'streamed replies')} estimated)"


def budget_line(budget: str, tot: Totals, workers: int = 1) -> Line:
    """How much of the suite the budget let be judged, and what was spent against it; under pytest-xdist, that
    each worker kept its own share (``budget $0.001, $0.0005 per worker (2 workers, each counting its own)``)."""
    from ..budget import parse_budget

    b = parse_budget(budget)
    spent = (cost_text(tot.cost_usd, tot.unpriced_requests) if b.unit == "usd"
             else f"{tot.prompt_tokens + tot.completion_tokens:,} tokens")
    name = f"budget {b.text()}"
    if workers > 1:
        name += f", {b.text(b.amount / workers)} per worker ({workers} workers, each counting its own)"
    if not tot.budget_refused:
        return (f"{name}: {spent} spent; every evaluation was judged", {})
    return (f"{name} reached: {spent} spent; {_n(tot.evaluations, 'evaluation')} judged, "
            f"{tot.budget_refused} refused (their tests are errors: not judged)", {"red": True, "bold": True})


def summary_lines(records: Sequence[EvaluationRecord], tot: Totals,
                  regressions: RegressionReport | None = None, unscored: Sequence[UnscoredTest] = (), *,
                  checklists: ChecklistGeneration | None = None,
                  confirmation: ConfirmationSummary | None = None, budget: str | None = None,
                  budget_workers: int = 1) -> list[Line]:
    """(text, markup) lines of the end-of-run summary; ``checklists``: what checklist generation spent (part of
    the totals, carried by no record); ``confirmation``: what --bineval-confirm did and cost; ``budget``: the
    run's --bineval-budget."""
    lines: list[Line] = []
    for u in unscored:  # errored before any evaluation: no score, and no pass either
        lines.append((f"NOT SCORED {u.test}: {u.error}: {one_line(u.message)}", {"red": True, "bold": True}))
    for rec in records:
        markup = {"green": True} if rec.outcome == "passed" else {"red": True, "bold": True}
        label = {"passed": "PASS", "failed": "BELOW THRESHOLD", "error": "JUDGE ERROR"}[rec.outcome]
        lines.append((f"{label} {rec.key}: {score_line(rec)}", markup))
        if rec.outcome != "passed":
            points = rec.points()
            for v in rec.checked():
                if v.answer == "no":
                    p = points.get(v.question_id)
                    cost = "" if p is None else (f" (+{p} missed)" if p > 0 else f" ({p} penalty)")
                    lines.append((f"    [{v.dimension}]{cost} {one_line(v.asked)}", {}))
                    lines.append((f"        -> no: {one_line(v.reason())}", {}))
                elif v.answer == "error":
                    lines.append((f"    [{v.dimension}] {one_line(v.asked)}", {}))
                    lines.append((f"        -> judge error: {one_line(v.error)}", {"red": True}))
            if rec.first_failing_turn is not None:
                lines.append((f"    {first_step_line(rec)}", {"red": True}))
    unstable = [(rec, v) for rec in records for v in rec.unstable()]
    if unstable:
        confirmed = [v.confirmation for _, v in unstable if v.confirmation is not None]
        why = (f"the judge's asks gave both answers, and none won at {confirmed[0].level:.0%} confidence"
               if confirmed else "the repeats of the judge gave both answers")
        lines.append((f"unstable questions ({len(unstable)}): {why}", {"yellow": True}))
        for rec, v in unstable:
            lines.append((f"    {rec.key} [{v.dimension}] {one_line(v.asked)}: {answer_text(v)}", {}))
    cost = cost_text(tot.cost_usd, tot.unpriced_requests)
    failed = f" ({tot.failed_requests} failed)" if tot.failed_requests else ""
    if tot.batch_requests:  # --bineval-batch
        failed += f" ({tot.batch_requests} through a batch API, at its batch price)"
    lines.append((
        f"evaluations: {tot.evaluations} ({tot.passed} passed, {tot.failed} below threshold, "
        f"{tot.errors} judge error), questions: {tot.questions}, judge errors: {tot.judge_errors}, "
        f"requests: {tot.llm_calls}{failed}, cache hits: {tot.cache_hits}, "
        f"tokens: {tot.prompt_tokens} prompt{prompt_cache_text(tot)} + {tot.completion_tokens} completion"
        f"{estimated_text(tot)}, cost: {cost}",
        {"bold": True},
    ))
    if confirmation is not None:
        lines.append((confirmation_line(confirmation), {}))
    if checklists is not None and (checklists.usage.llm_calls or checklists.usage.cache_hits):
        spent = checklists.usage
        failed = f" ({spent.failed_requests} failed)" if spent.failed_requests else ""
        cost = cost_text(spent.cost_usd, spent.unpriced_requests)
        lines.append((f"of which checklist generation: {_n(checklists.generated, 'checklist')}, requests: "
                      f"{spent.llm_calls}{failed}, cache hits: {spent.cache_hits}, tokens: {spent.prompt_tokens} "
                      f"prompt + {spent.completion_tokens} completion, cost: {cost}", {}))
    if budget is not None:
        lines.append(budget_line(budget, tot, budget_workers))
    if tot.unscored_tests:
        lines.append((f"tests not scored: {tot.unscored_tests} (errored before any evaluation)",
                      {"red": True, "bold": True}))
    if tot.cache_rejected:
        lines.append((f"reply cache: {_n(tot.cache_rejected, 'entry', 'entries')} not used, unsigned or forged "
                      "(--bineval-cache-key-env): each was asked again (counted above)", {"yellow": True}))
    if tot.rerun_evaluations:
        lines.append((f"re-runs: {_n(tot.rerun_evaluations, 'evaluation')} of earlier attempts replaced by the "
                      "last attempt's (their requests are counted above)", {"yellow": True}))
    for model, count in sorted(tot.below_cache_minimum.items()):
        lines.append((f"prompt caching: {_n(count, 'evaluation')} judged by {model} share a prompt prefix shorter "
                      f"than the provider's minimum of {CACHE_MINIMUM_TOKENS} tokens for caching, so each question "
                      "pays for it in full (a longer source or output is cached)", {"yellow": True}))
    for model, why in sorted(tot.not_streamed.items()):
        lines.append((f"judge {model}: cannot stream its replies ({why}); each explained answer took two "
                      "requests (use --bineval-stream off to skip the attempt)", {"yellow": True}))
    for model, form in sorted(tot.structured_output.items()):
        what = "no response_format at all, JSON asked for in the prompt" if form == "prompt" else form
        lines.append((f"judge {model}: structured output (json_schema) not supported, using {what}",
                      {"yellow": True}))
    if tot.unpinned_checklists:
        stale = min(len({pin_key(r) for r in records if r.checklist_status == "stale"}), tot.unpinned_checklists)
        why = (f", of which {stale} stale since {'its' if stale == 1 else 'their'} task or question text changed"
               if stale else "")
        lines.append((
            f"unpinned checklists: {tot.unpinned_checklists}{why} "
            "(review and pin them with --bineval-update-checklists)", {"yellow": True},
        ))
    if tot.pinned_checklists_written:
        lines.append((f"pinned checklists written: {tot.pinned_checklists_written}", {"yellow": True}))
    if regressions is not None:
        bad = tot.regressed_cases or tot.regressed_dimensions or tot.unsettled_flips
        lines.append((f"vs baseline {regressions.baseline}: {counts_text(regressions, tot)}",
                      {"bold": True, "red": True} if bad else {"bold": True}))
        reason = regressions.fail_reason()
        if regressions.failed and reason:
            lines.append((f"bineval: session failed: {reason}", {"red": True, "bold": True}))
    return _shown(lines)


def pin_lines(actions: Sequence[PinAction]) -> list[Line]:
    """(text, markup) lines of what ``--bineval-update-checklists`` did: one per pin entry created, rewritten,
    given tests (an entry pinned before this run, which more tests now use) or kept because edited by hand (in
    that order, each entry once), then the counts; nothing when the run updated no pin. The tests listed under an
    entry created or rewritten in this run are part of that entry, not counted as added."""
    def entry(a: PinAction) -> tuple[str, tuple[str, ...], str]:
        return a.path, a.dimensions, a.task

    seen: dict[tuple[str, str, tuple[str, ...], str], PinAction] = {}
    for a in actions:
        if a.action != "listed":
            seen.setdefault((a.action, *entry(a)), a)
    unique = list(seen.values())
    written = {entry(a) for a in unique if a.action in ("created", "rewritten")}
    added: dict[tuple[str, tuple[str, ...], str], set[str]] = {}
    for a in actions:
        if a.action == "listed" and entry(a) not in written:
            added.setdefault(entry(a), set()).add(a.test)
    lines: list[Line] = []

    def shown(path: str, dimensions: tuple[str, ...], task: str) -> str:
        task = one_line(task)
        task = task if len(task) <= 60 else task[:57] + "..."
        return f"{path} [{', '.join(dimensions)}] {task!r}"

    labels = {"created": "pin created", "rewritten": "pin rewritten", "kept": "pin kept"}
    for kind in ("created", "rewritten", "listed", "kept"):
        if kind == "listed":
            for key, tests in sorted(added.items()):
                named = ", ".join(sorted(t for t in tests if t)) or _n(len(tests), "test")
                lines.append((f"tests added to pin: {shown(*key)}: {named}", {}))
            continue
        for a in sorted((a for a in unique if a.action == kind), key=entry):
            lines.append((f"{labels[kind]}: {shown(*entry(a))}" + (f": {a.why}" if a.why else ""),
                          {"yellow": True} if kind == "kept" else {}))
    counts = {k: sum(a.action == k for a in unique) for k in ("created", "rewritten", "kept")}
    tests_added = sum(len(t) for t in added.values())
    if any(counts.values()) or added:
        lines.append((f"pins: {counts['created']} created, {counts['rewritten']} rewritten, {counts['kept']} kept "
                      f"because edited by hand, {_n(len(added), 'entry', 'entries')} given more tests"
                      + (f" ({_n(tests_added, 'test')} added)" if added else ""), {"bold": True}))
    return _shown(lines)


def confirmation_line(c: ConfirmationSummary) -> str:
    """``of which confirmation (--bineval-confirm 2, 95% Wilson interval): 3 of 12 questions re-asked, 5 re-asks
    (5 requests, 0 cache hits), 1 decided, 1 unstable; 17 asks in all, where --bineval-repeats 3 would make 36``"""
    return (f"of which confirmation (--bineval-confirm {c.rounds}, {c.level:.0%} Wilson interval): {c.reasked} of "
            f"{_n(c.questions, 'question')} re-asked, {_n(c.reasks, 're-ask')} ({_n(c.requests, 'request')}, "
            f"{_n(c.cache_hits, 'cache hit')}), {c.decided} decided, {c.unstable} unstable; {c.asks} asks in all, "
            f"where --bineval-repeats {c.rounds + 1} would make {c.repeats_asks}")


def _n(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else plural or word + 's'}"


def counts_text(r: RegressionReport, tot: Totals) -> str:
    """``1 case regressed (confirmed), 2 flips of the judge's noise, ...; 13 evaluations compared, ...``"""
    return (f"{_n(tot.regressed_cases, 'case')} regressed (confirmed), {_n(tot.confirmed_flips, 'confirmed flip')}, "
            f"{_n(tot.noise_flips, 'flip')} of the judge's noise, {_n(tot.unsettled_flips, 'flip')} unsettled, "
            f"{_n(tot.regressed_dimensions, 'dimension')} regressed across the suite; "
            f"{_n(tot.regressions, 'regression')}, {_n(tot.unstable_flips, 'unstable flip')}, "
            f"{_n(tot.fixes, 'fix', 'fixes')}, {_n(tot.new_judge_errors, 'new judge error')}, "
            f"{_n(tot.score_drops, 'score drop')} beyond tolerance {r.tolerance:.2f}; "
            f"{_n(len(r.compared), 'evaluation')} compared, {len(r.added)} added, {len(r.removed)} removed, "
            f"{len(r.not_run)} not run")


def _indented(text: str) -> str:
    """A multi-line text under an indented label: its later lines indented too."""
    return "\n        ".join(inert(text).splitlines() or [""])


def _params(d: EvaluationDiff) -> str:
    return ", ".join(f"{k}={one_line(v)}" for k, v in d.params.items())


def _explained(c: QuestionChange) -> list[Line]:
    lines: list[Line] = []
    if c.repeats or c.baseline_repeats:
        now = " ".join(c.repeats) or c.after
        was = " ".join(c.baseline_repeats) or c.before
        lines.append((f"    answers now: {now}; in the baseline: {was}", {}))
    if c.after == "error":
        lines.append((f"    cause: {_indented(c.explanation or '(unknown)')}", {}))
    elif c.explanation or c.after == "no":  # a yes is not explained under --bineval-explain failing
        lines.append((f"    now: {_indented(c.explanation or '(no explanation)')}", {}))
    if c.baseline_explanation:
        lines.append((f"    was: {_indented(c.baseline_explanation)}", {}))
    return lines


def _reasked(c: QuestionChange) -> str:
    f = c.flip
    if f is None or not (f.new or f.baseline):
        return ""
    return f"re-asked: now {' '.join(f.new) or '-'}; baseline {' '.join(f.baseline) or '-'}"


FLIP_LABELS = {"confirmed": "confirmed", "code check": "a code check", "skipped": "not re-asked: another flip of "
               "the case was confirmed", "unstable": "judge noise", "same input": "judge noise: same input",
               "unconfirmed": "not confirmed", "error": "judge error on re-asking",
               "pending": "not confirmed: not re-asked"}


def flip_note(c: QuestionChange) -> str:
    """``confirmed; re-asked: now no no no; baseline yes yes yes`` -- what re-asking said of a flip."""
    f = c.flip
    if f is None:
        return ""
    parts = [FLIP_LABELS[f.status], _reasked(c), f.reason if f.status in ("unconfirmed", "error") else ""]
    return "; ".join(p for p in parts if p)


def _regressed_lines(r: RegressionReport) -> list[Line]:
    """The cases with a confirmed regression: their parameters, their flips and what re-asking said."""
    lines: list[Line] = []
    for d in r.regressed_cases():
        params = f" ({_params(d)})" if d.params else ""
        lines.append((f"REGRESSED {d.key}{params}: {d.inputs}", {"red": True, "bold": True}))
        for c in d.flips():
            lines.append((f"  [{c.dimension}] {one_line(c.asked)}: {c.before} -> {c.after} ({flip_note(c)})",
                          {"red": True} if c.flip is not None and c.flip.regression else {}))
            lines += _explained(c)
    return lines


def _flip_lines(r: RegressionReport) -> list[Line]:
    """The yes -> no flips of the other cases: the unsettled ones, then the judge's noise."""
    lines: list[Line] = []
    for label, statuses, markup in (("NOT CONFIRMED", ("unconfirmed", "pending"), {"red": True, "bold": True}),
                                    ("RE-ASK ERROR", ("error",), {"red": True, "bold": True}),
                                    ("UNSTABLE FLIP", ("unstable", "same input"), {"yellow": True, "bold": True})):
        for d, c in r.flips(*statuses):
            if d.regressed:
                continue  # shown under its case
            counted = r.fail_on == "any" and c.kind == "regression"  # what =any fails on, whatever re-asking said
            lines.append((f"{'REGRESSION' if counted else label} {d.key} [{c.dimension}] {one_line(c.asked)}: "
                          f"{c.before} -> {c.after} ({d.inputs}; {flip_note(c)})",
                          {"red": True, "bold": True} if counted else markup))
            if label != "UNSTABLE FLIP" or counted or c.repeats or c.baseline_repeats:
                lines += _explained(c)
    return lines


def _change_lines(r: RegressionReport) -> list[Line]:
    """The answer changes that are no yes -> no flip (those are :func:`_flip_lines`')."""
    lines: list[Line] = []
    styles: dict[str, dict[str, bool]] = {
        "regression": {"red": True, "bold": True}, "unstable flip": {"yellow": True, "bold": True},
        "judge error": {"red": True, "bold": True}, "fix": {"green": True, "bold": True}, "recovered": {"green": True},
    }
    for kind in CHANGE_KINDS:
        for d, c in r.changes(kind):
            if c.flip is not None:
                continue
            head = (f"{kind.upper()} {d.key} [{c.dimension}] {one_line(c.asked)}: {c.before} -> {c.after} "
                    f"({d.inputs})")
            lines.append((head, styles[kind]))
            lines += _explained(c)
    for d, c in r.edited_changes():  # a small edit of the question: not the same question, so not gated
        lines.append((f"EDITED QUESTION {d.key} [{c.dimension}] {one_line(c.asked)}: {c.before} -> {c.after} "
                      f"(not counted: the baseline asked {one_line(c.edited_from)!r})", {"yellow": True}))
    return lines


def suite_lines(r: RegressionReport) -> list[Line]:
    """One line per dimension: the suite-level question's verdict."""
    styles = {"regressed": {"red": True, "bold": True}, "uninformative": {"yellow": True}}
    return [(f"SUITE {suite_text(s)}", styles.get(s.verdict, {})) for s in r.suite]


def flip_cost_line(r: RegressionReport) -> Line | None:
    """What confirming the flips did and cost."""
    c = r.confirmation
    if c is None:
        return None
    if not c.engine:
        return (f"confirmation of flips: {_n(c.flips, 'flip')} not re-asked (no judge here: bineval report "
                "--confirm-flips re-asks them)", {"yellow": True})
    cost = cost_text(c.cost_usd, 0)
    return (f"confirmation of flips: {_n(c.flips, 'flip')} to confirm by re-asking about both runs (at most "
            f"{c.asks} asks of each, {c.tolerance} against the flip allowed; each flip at level {c.level:.2g}, a "
            "flip of noise "
            f"confirmed with chance <= {c.bound:.2g}): {_n(c.reasks, 'fresh ask')}, {_n(c.requests, 'request')}, "
            f"{_n(c.cache_hits, 'cache hit')}, tokens: {c.prompt_tokens} prompt + {c.completion_tokens} completion, "
            f"cost: {cost}", {})


def regression_lines(r: RegressionReport) -> list[Line]:
    """(text, markup) lines of the ``bineval regressions`` section: first how the judge differs from the
    baseline's, if it does; then the confirmed regressions by case (with their parameters and re-asks), the
    suite-level verdict of each dimension, the unsettled flips, the judge's noise; then the other answer
    changes, score changes, checklist and test changes, and what confirming the flips cost."""
    origin = ", ".join(x for x in (r.baseline_created, r.baseline_generator) if x)
    lines: list[Line] = [(f"JUDGED DIFFERENTLY: {line}; an answer that changed may have changed with the judge",
                          {"yellow": True, "bold": True}) for line in r.judged_differently]
    lines.append((f"baseline: {r.baseline}" + (f" ({origin})" if origin else ""), {}))
    lines += _regressed_lines(r)
    lines += suite_lines(r)
    lines += _flip_lines(r)
    lines += _change_lines(r)
    lines += _source_lines(r)
    drops = {(d.key, s.name) for d, s in r.score_drops()}
    for d in r.compared:
        for s in d.scores:
            if s.delta is None or abs(s.delta) < 1e-9:
                continue
            if (d.key, s.name) in drops:
                lines.append((f"SCORE DROP {d.key}: {s.name} {_fmt(s.before)} -> {_fmt(s.after)} ({s.delta:+.2f}, "
                              f"tolerance {r.tolerance:.2f})", {"yellow": True}))
            else:
                lines.append((f"score change {d.key}: {s.name} {_fmt(s.before)} -> {_fmt(s.after)} "
                              f"({s.delta:+.2f})", {}))
    for d in r.compared:
        if d.turns_changed:
            lines.append((f"CONVERSATION CHANGED {d.key}: {d.turns_changed}", {"yellow": True}))
        for label, refs in (("QUESTIONS ADDED", d.questions_added), ("QUESTIONS REMOVED", d.questions_removed)):
            if refs:
                lines.append((f"{label} {d.key} ({len(refs)}):", {"yellow": True}))
                lines += [(f"    [{q.dimension}] {q.id}"
                           f"{'' if q.turn is None else f' (turn {q.turn})'}: {one_line(q.text)}", {}) for q in refs]
    for e in r.added:
        lines.append((f"TEST ADDED {e.key} ({e.outcome})", {"yellow": True}))
    for e in r.removed:
        lines.append((f"TEST REMOVED {e.key} (was {e.outcome} in the baseline)", {"yellow": True}))
    if r.not_run:
        lines.append((f"tests not run ({len(r.not_run)}): in the baseline, not run this time (deselected, another "
                      "subset, skipped or deleted): " + ", ".join(e.key for e in r.not_run), {}))
    by_text = sum(d.matched_by_text for d in r.compared)
    by_id = sum(d.matched_by_id for d in r.compared)
    replaced = sum(d.replaced for d in r.compared)
    unmatched = r.questions_unmatched()
    if by_text or by_id or unmatched:
        lines.append((f"questions matched by text (id changed): {by_text}, by id (text edited slightly): {by_id}, "
                      f"replaced (same id, other text): {replaced}, not matched (asked in one run only): "
                      f"{unmatched}", {}))
    changed = sum(d.output_changed for d in r.compared)
    lines.append((f"outputs: {changed} changed, {len(r.compared) - changed} unchanged and judged again, of "
                  f"{_n(len(r.compared), 'compared evaluation')}", {}))
    states = [d.source_change.state for d in r.compared]
    if any(s != "same" for s in states):
        unknown = f", {states.count('unknown')} unknown (not recorded in the baseline)" if "unknown" in states else ""
        lines.append((f"sources: {states.count('changed')} changed, {states.count('same')} the same{unknown}", {}))
    cost = flip_cost_line(r)
    if cost is not None:
        lines.append(cost)
    return _shown(lines)


def _source_lines(r: RegressionReport) -> list[Line]:
    """``SOURCE CHANGED <key>: 1 document removed: [2] Refund policy``, for each compared evaluation whose answers
    changed on a source that changed: its flips are about another source, not the judge's noise."""
    return [(f"SOURCE CHANGED {d.key}: {one_line(d.source_change.summary())}", {"yellow": True, "bold": True})
            for d in r.compared if d.source_change.changed_source and d.changes]


def _score2(value: object) -> str:
    return "n/a" if not isinstance(value, (int, float)) else f"{float(value):.2f}"


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
        "error": {"red": True, "bold": True}, "cut": {"yellow": True, "bold": True},
        "not run": {"yellow": True, "bold": True},
    }
    lines: list[Line] = []
    for r in results:
        score = "n/a" if r.score is None else f"{r.score:.2f}"
        lines.append((f"{r.status.upper()} {r.prompt}: {one_line(r.message)}", styles.get(r.status, {"bold": True})))
        if r.status in ("updated", "unchanged", "no failures"):
            lines.append((f"    score {score} (share of yes), failing verdicts {r.failures}, "
                          f"{r.chars_before} -> {r.chars_after} characters", {}))
        if r.iterations or r.held_out:
            lines.append((f"    tests: {len(r.train)} train, {len(r.held_out)} held-out", {}))
        for it in r.iterations:
            if "kept" not in it:  # the note-taker and updater made no new prompt: nothing was measured
                lines.append((f"    iteration {it['iteration']}: no candidate (no new lesson for "
                              f"{len(it.get('failing_before', []))} failing question(s))", {}))
                continue
            verdict = "kept" if it.get("kept") else "rolled back"
            lines.append((f"    iteration {it['iteration']}: {verdict}; train {_score2(it.get('train_before'))} -> "
                          f"{_score2(it.get('train_after'))}, held-out {_score2(it.get('held_out_before'))} -> "
                          f"{_score2(it.get('held_out_after'))}, {it.get('chars_before')} -> "
                          f"{it.get('chars_after', it.get('chars_before'))} characters", {}))
        for note in r.notes:
            lines.append((f"    note: {note}", {"yellow": True}))
        rejected = sum(1 for lesson in r.lessons if lesson.get("status") == "not a lesson")
        if rejected:
            lines.append((f"    note-taker replies discarded (not a lesson): {rejected}", {"yellow": True}))
        discarded = sum(1 for lesson in r.lessons if lesson.get("discarded_edit"))
        if discarded:
            lines.append((f"    updater edits discarded (words of its own prompt, not an edit; the lesson was "
                          f"appended): {discarded}", {"yellow": True}))
        for lesson in r.lessons:
            why = f" ({lesson['why']})" if lesson.get("status") == "not a lesson" and lesson.get("why") else ""
            lines.append((f"    lesson [{lesson.get('status')}] {one_line(str(lesson['text']))}{why}", {}))
            if lesson.get("discarded_edit"):
                lines.append((f"        edit discarded: {one_line(lesson['discarded_edit'])}", {}))
            if lesson.get("rejected_edit"):
                lines.append((f"        edit not applied: {one_line(lesson['rejected_edit'])}", {}))
        if r.status in ("updated", "rolled back"):
            lines.append((f"    review with `git diff`; history: {r.history}", {}))
        u = r.usage
        if u.llm_calls or u.cache_hits:  # the optimizer's own requests: not in the bineval summary's totals
            failed = f" ({u.failed_requests} failed)" if u.failed_requests else ""
            lines.append((f"    optimizer requests: {u.llm_calls}{failed}, cache hits: {u.cache_hits}, tokens: "
                          f"{u.prompt_tokens} prompt + {u.completion_tokens} completion, cost: "
                          f"{cost_text(u.cost_usd, u.unpriced_requests)}", {}))
    return _shown(lines)
