"""GitHub Actions output, pure functions of records (the plugin object is :mod:`.github_summary`): the markdown
job summary (appended to ``$GITHUB_STEP_SUMMARY``) and workflow commands
(``::error file=...,line=...,title=...::message``) that annotate the ``assert_passes`` line of each failing
assertion, and each regression whose assertion passed.

Everything a model wrote or the test suite named (questions, explanations, test ids) is escaped: in the
summary it cannot add markdown or HTML, in a workflow command it cannot end the command or start another, and
in both its bidirectional controls are written visibly (``<U+202E>``: :func:`~pytest_bineval.untrusted.show_controls`).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from ..models import cost_text
from ..report.comparison import EvaluationDiff, RegressionReport
from ..report.document import Totals
from ..report.record import EvaluationRecord, Location
from ..untrusted import show_controls
from .terminal import flip_note, score_line

if TYPE_CHECKING:
    from ..calibrate import Calibration


# -- workflow commands ---------------------------------------------------------------------------------------
def escape_data(text: str) -> str:
    """The message of a workflow command: ``%``, CR and LF encoded (GitHub's toolkit ``escapeData``)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A property value (``file=``, ``title=``): also ``:`` and ``,`` (GitHub's toolkit ``escapeProperty``)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(name: str, message: str, **properties: str | int | None) -> str:
    """``::name k=v,k=v::message`` with every part escaped and its bidirectional controls shown; properties that
    are None are left out."""
    props = ",".join(f"{k}={escape_property(show_controls(str(v)))}" for k, v in properties.items() if v is not None)
    return f"::{name}{' ' + props if props else ''}::{escape_data(show_controls(message))}"


def repo_path(file: str, rootdir: str, workspace: str | None) -> str:
    """``file`` (relative to the pytest rootdir) relative to the repository checkout (``GITHUB_WORKSPACE``),
    POSIX style; unchanged when there is no workspace or the file is outside it."""
    if not workspace:
        return file
    full = os.path.normpath(os.path.join(rootdir, file))
    rel = os.path.relpath(full, os.path.normpath(workspace))
    if rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel):
        return file
    return rel.replace(os.sep, "/")


def _where(location: Location | None, rootdir: str, workspace: str | None) -> dict[str, str | int | None]:
    if location is None:
        return {}
    return {"file": repo_path(location.file, rootdir, workspace), "line": location.line}


def failing(rec: EvaluationRecord, failed_tests: Collection[str] | None) -> bool:
    """The evaluation failed (below threshold or judge error) and so did its test: a test that expects the
    failure (``pytest.raises(BinevalAssertionError)``) passes, and its evaluation is no news."""
    return rec.outcome != "passed" and (failed_tests is None or rec.test in failed_tests)


def workflow_commands(records: Sequence[EvaluationRecord], regressions: RegressionReport | None, *, rootdir: str,
                      workspace: str | None, failed_tests: Collection[str] | None = None) -> list[str]:
    """``::error`` at each failing assertion (below threshold or judge error) of a failed test, ``::warning`` for
    each other regression against the baseline, and one ``::error`` when the regressions fail the session.
    ``failed_tests``: the ids of the tests that failed (None: every failing assertion counts)."""
    out: list[str] = []
    annotated: set[str] = set()
    for rec in records:
        if not failing(rec, failed_tests):
            continue
        annotated.add(rec.key)
        lines = [score_line(rec)]
        if rec.outcome == "error":
            title = f"bineval: judge error in {rec.key}"
            lines += [f"[{v.dimension}] {v.asked} -> judge error: {v.error}" for v in rec.errors()]
        else:
            title = f"bineval: {rec.key} below threshold"
            lines += [f"[{v.dimension}] {v.asked} -> no: {v.reason()}"
                      for v in rec.failing()]
            if rec.first_failing_turn is not None:
                lines.append(f"first step that went wrong: {rec.turn_label(rec.first_failing_turn)}")
        out.append(command("error", "\n".join(lines), **_where(rec.location, rootdir, workspace), title=title))
    if regressions is not None:
        noise = ("unstable", "same input")  # the judge's noise: said in the summary, not as a regression
        flagged = (regressions.changes("regression") if regressions.fail_on == "any"
                   else [(d, c) for d, c in regressions.flips() if c.flip is not None and c.flip.status not in noise])
        for d, c in flagged:
            if d.key in annotated:
                continue  # its failing assertion has an error annotation already
            note = f" ({flip_note(c)})" if c.flip is not None else ""
            message = f"[{c.dimension}] {c.asked}: yes -> no{note}\nnow: {c.explanation or '(no explanation)'}"
            if c.baseline_explanation:
                message += f"\nwas: {c.baseline_explanation}"
            out.append(command("warning", message, **_where(d.location, rootdir, workspace),
                               title=f"bineval regression in {d.key}"))
        reason = regressions.fail_reason()
        if regressions.failed and reason:
            out.append(command("error", reason, title="bineval: regressions against the baseline"))
    return out


# -- the job summary ---------------------------------------------------------------------------------------
_MD_SPECIAL = "\\`*_[]|~<>&#!"
_HTML = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


def md(text: str) -> str:
    """Text shown as itself in GitHub markdown, on one line (no markdown, no HTML, no table break, no
    bidirectional control: each is shown as ``<U+202E>``)."""
    out = []
    for ch in " ".join(show_controls(str(text)).split()):
        if ch in _HTML:
            out.append(_HTML[ch])
        elif ch in _MD_SPECIAL:
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _fmt(score: float | None) -> str:
    return "n/a" if score is None else f"{score:.2f}"


def _n(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else plural or word + 's'}"


def _test_block(rec: EvaluationRecord, diff: EvaluationDiff | None) -> list[str]:
    state = {"passed": "passed", "failed": "below threshold", "error": "judge error"}[rec.outcome]
    out = [f"### {md(rec.key)}: {state}", ""]
    gate = "lower bound" if rec.gate == "lower-bound" else "score"
    out += [f"| dimension | score | 95% interval | threshold (on the {gate}) | baseline | result |",
            "|---|---:|---:|---:|---:|---|"]
    before = {s.name: s for s in diff.scores} if diff is not None else {}
    for d in rec.dimensions:
        iv = "n/a" if d.low is None or d.high is None else f"{d.low:.2f}-{d.high:.2f}"
        prior = before.get(d.name)
        base = "" if prior is None else _fmt(prior.before)
        if prior is not None and prior.delta is not None and abs(prior.delta) > 1e-9:
            base += f" ({prior.delta:+.2f})"
        result = {"passed": "pass", "failed": "**fail**", "error": "**judge error**"}[d.outcome]
        out.append(f"| {md(d.name)} | {_fmt(d.score)} | {iv} | {d.threshold:.2f} | {base} | {result} |")
    out.append("")
    failing = rec.failing() + rec.errors()
    if failing:
        out.append("Failing questions:" if rec.outcome != "passed" else "Questions answered no:")
        out.append("")
        for v in failing:
            why = f"judge error: {v.error}" if v.answer == "error" else f"no: {v.reason()}"
            out.append(f"- \\[{md(v.dimension)}\\] {md(v.asked)} → {md(why)}")
        out.append("")
        if rec.first_failing_turn is not None:
            out += [f"First step that went wrong: {md(rec.turn_label(rec.first_failing_turn))}.", ""]
    if diff is not None and diff.changes:
        out.append("Changes against the baseline:")
        out.append("")
        for c in diff.changes:
            line = f"- **{c.kind}** \\[{md(c.dimension)}\\] {md(c.asked)}: {c.before} → {c.after}"
            if c.flip is not None:
                line += f" ({md(flip_note(c))})"
            if c.explanation or c.after == "no":  # a yes is not explained under --bineval-explain failing
                line += f"; now: {md(c.explanation or '(no explanation)')}"
            if c.baseline_explanation:
                line += f"; was: {md(c.baseline_explanation)}"
            out.append(line)
        out.append("")
    if diff is not None and (diff.questions_added or diff.questions_removed):
        out.append(f"Checklist changed: {len(diff.questions_added)} question(s) added, "
                   f"{len(diff.questions_removed)} removed.")
        out.append("")
    if diff is not None and diff.turns_changed:
        out += [f"Conversation: {md(diff.turns_changed)}.", ""]
    return out


SUMMARY_LIMIT = 900_000  # bytes (UTF-8) at most: GitHub takes 1 MiB of a step's summary; the rest for other tools
SUMMARY_WHERE = "the JSON report (`--bineval-report`) and the HTML report (`--bineval-html`)"


def step_summary(records: Sequence[EvaluationRecord], totals: Totals, regressions: RegressionReport | None = None,
                 failed_tests: Collection[str] | None = None, *, partial: str | None = None,
                 calibration: Calibration | None = None, limit: int = SUMMARY_LIMIT) -> str:
    """The markdown job summary: a headline, each failing or regressed evaluation (scores vs thresholds,
    failing questions with explanations, changes against the baseline), the run's totals. ``failed_tests``: as
    for :func:`workflow_commands`. At most ``limit`` bytes: the lists of tests added and removed, the unstable
    questions, then the tests' detail (the last first) are cut to fit (:mod:`.bounded`), and the summary says so."""
    from .bounded import Section, fit

    diffs = {d.key: d for d in regressions.compared} if regressions is not None else {}
    drops = {d.key for d, _ in regressions.score_drops()} if regressions is not None else set()
    noteworthy = ("regression", "unstable flip", "judge error")
    shown = [r for r in records
             if failing(r, failed_tests) or r.key in drops
             or any(c.kind in noteworthy for c in (diffs[r.key].changes if r.key in diffs else []))]
    out = ["## bineval", ""]
    if partial is not None:
        out += [f"**Partial run** ({md(partial)}): only the tests that ran are here; its report is no baseline.", ""]
    for line in regressions.judged_differently if regressions is not None else []:  # before anything else
        out += [f"**Judged differently**: {md(line)}; an answer that changed may have changed with the judge.", ""]
    from .verdict import parts_of

    out += [f"- **{md(p.text)}**" if p.bad else f"- {md(p.text)}" for p in parts_of(regressions, totals)]
    out.append("")
    out.append(f"**{_n(totals.evaluations, 'evaluation')}**: {totals.passed} passed, {totals.failed} below "
               f"threshold, {_n(totals.errors, 'judge error')}.")
    if totals.unscored_tests:
        out.append(f"**{_n(totals.unscored_tests, 'test')} not scored** (errored before any evaluation).")
    if regressions is not None:
        out.append("")
        out.append(f"Against the baseline `{md(regressions.baseline)}`: {_n(totals.regressions, 'regression')}, "
                   f"{_n(totals.unstable_flips, 'unstable flip')}, {_n(totals.fixes, 'fix', 'fixes')}, "
                   f"{_n(totals.new_judge_errors, 'new judge error')}, {_n(totals.score_drops, 'score drop')} "
                   f"beyond tolerance {regressions.tolerance:.2f}; {len(regressions.added)} added, "
                   f"{len(regressions.removed)} removed.")
        reason = regressions.fail_reason()
        if regressions.failed and reason:
            out += ["", f"**Session failed**: {md(reason)}"]
    out.append("")
    sections = [Section(out)]
    sections += [Section(_test_block(rec, diffs.get(rec.key)), "the detail of the failing and changed tests", 2)
                 for rec in sorted(shown, key=lambda r: r.key)]
    if regressions is not None and (regressions.added or regressions.removed):
        sections.append(Section([
            "Tests added: " + (", ".join(md(e.key) for e in regressions.added) or "none") + ".  ",
            "Tests removed: " + (", ".join(md(e.key) for e in regressions.removed) or "none") + ".", ""],
            "the tests added and removed", 0))
    unstable = [(r, v) for r in records for v in r.unstable()]
    if unstable:
        out = []
        why = ("the judge's asks gave both answers, and none won (--bineval-confirm)"
               if any(v.confirmation is not None for _, v in unstable) else "the judge's repeats gave both answers")
        out.append(f"Unstable questions ({why}): {len(unstable)}")
        out.append("")
        out += [f"- {md(r.key)} \\[{md(v.dimension)}\\] {md(v.asked)}: {v.asks.count('yes')} of "
                f"{len(v.asks)} yes" for r, v in unstable]
        out.append("")
        sections.append(Section(out, "the unstable questions", 1))
    if calibration is not None:
        from ..calibrate import calibration_markdown

        sections.append(Section([*calibration_markdown(calibration), ""], "the judge's agreement with the labels", 3))
    cost = cost_text(totals.cost_usd, totals.unpriced_requests)
    out = [
        "### Totals",
        "",
        "| evaluations | questions | requests (failed) | cache hits | tokens (prompt + completion) | cost "
        "| judge errors | unpinned checklists |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {totals.evaluations} | {totals.questions} | {totals.llm_calls} ({totals.failed_requests}) | "
        f"{totals.cache_hits} | "
        f"{totals.prompt_tokens} + {totals.completion_tokens} | {cost} | {totals.judge_errors} | "
        f"{totals.unpinned_checklists} |",
        "",
    ]
    if totals.batch_requests:
        from .batch import batched_text

        out += [batched_text(totals.batch_requests), ""]
    if regressions is not None and (f := regressions.confirmation) is not None:
        out += [f"Of which confirming the flips: {_n(f.flips, 'flip')} to confirm by re-asking about both runs, "
                f"{_n(f.reasks, 'fresh ask')} ({_n(f.requests, 'request')}, {_n(f.cache_hits, 'cache hit')})."
                if f.engine else f"{_n(f.flips, 'flip')} not re-asked: no judge here (bineval report "
                "--confirm-flips re-asks them).", ""]
    sections.append(Section(out))
    return fit(sections, limit, where=SUMMARY_WHERE, size=lambda text: len(text.encode("utf-8")),
               limit_text=f"the size GitHub takes of a job summary (1 MiB; this one keeps under {limit:,} bytes)")


def append_summary(path: str, text: str) -> None:
    """Append to the job summary file (other steps and tools append to it too)."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text if text.endswith("\n") else text + "\n")
