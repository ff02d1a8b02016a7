"""``--bineval-pr-comment PATH``: the run as the markdown body of one pull-request comment.

Most important first: the headline states the outcome (:mod:`.verdict`: the cases confirmed regressed, each
dimension's suite-level verdict, flips not settled, threshold failures); then how what judged the run differs from
what judged the baseline, if it does; each regressed case with its parameters, its flipped questions and their
re-asks, and its two outputs side by side (collapsed); the suite per dimension; the flips not settled and the
judge's noise; score changes; the unstable questions, the judge errors, and what the run cost.
The body is a pure function of the finished
:class:`~pytest_bineval.report.document.ReportDocument` and holds no timestamp or duration, so a sticky-comment action
(``marocchino/sticky-pull-request-comment``) updates one comment in place and a run that changes nothing leaves
it as it is. Model text is escaped (:func:`~pytest_bineval.outputs.github.md`): an explanation cannot add markdown,
HTML or ``@mentions``; each table stops at :data:`ROWS` rows and says how many more the report holds.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..files import write_text_atomic
from ..untrusted import show_controls
from .bounded import Section, fit

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..report.comparison import EvaluationDiff, QuestionChange, RegressionReport, SuiteDimension
    from ..report.document import ReportDocument
    from ..report.record import SourceDocument

ROWS = 30  # rows per table
LIMIT = 60_000  # characters of the body at most: a GitHub comment holds 65,536 (the margin: a bot's own header)
WHERE = ("the JSON report (`--bineval-report`), the HTML report (`--bineval-html`) and the job summary "
         "(`--bineval-github`)")
# the sections cut to fit LIMIT, the first first: per-test detail, long outputs and flip lists before what decides
_SCORES, _NOISE, _SOURCES, _OUTPUTS, _UNSTABLE, _ERRORS, _CALIBRATION, _UNSETTLED, _SUITE, _CASE_TABLE = range(10)


def md(text: str) -> str:
    """Model text on one line, shown as itself (:func:`~pytest_bineval.outputs.github.md`), and no ``@mention``:
    a comment notifies whom it mentions."""
    from .github import md  # the renderers load when the run is over: registering this output costs nothing

    return md(text).replace("@", "&#64;")


def _fmt(score: float | None) -> str:
    return "n/a" if score is None else f"{score:.2f}"


def _delta(delta: float | None) -> str:
    return "n/a" if delta is None else f"{delta:+.2f}"


def _n(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else plural or word + 's'}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows[:ROWS]]
    if len(rows) > ROWS:
        lines.append(f"\n…and {len(rows) - ROWS} more in the JSON report (`--bineval-report`).")
    return lines


def _code(text: str) -> str:
    """A test id or key as inline code in a table cell (backticks in it cannot end the span: they become quotes; a
    ``|`` is escaped, as GFM splits a row at every unescaped ``|``, in a code span too, and shows ``\\|`` as ``|``)."""
    return "`" + " ".join(text.replace("`", "'").replace("|", "\\|").split()) + "`"


OUTPUT_IN_COMMENT = 1500  # characters of each output shown side by side in the comment


def _html(text: str) -> str:
    """Model text inside HTML (a ``<pre>``): escaped, no ``@mention``, bidirectional controls shown."""
    import html

    from ..untrusted import show_controls

    return html.escape(show_controls(text), quote=True).replace("@", "&#64;")


def _clip(text: str | None) -> str:
    if text is None:
        return "(not in the report)"
    if len(text) <= OUTPUT_IN_COMMENT:
        return text
    return text[:OUTPUT_IN_COMMENT] + f"… [{len(text) - OUTPUT_IN_COMMENT} more characters in the JSON report]"


def _outputs(d: EvaluationDiff) -> list[str]:
    """The baseline's output and this run's, side by side, collapsed."""
    return ["<details><summary>Outputs: the baseline's and this run's</summary>", "",
            "<table><tr><th>baseline</th><th>now</th></tr><tr>"
            f"<td><pre>{_html(_clip(d.baseline_output))}</pre></td><td><pre>{_html(_clip(d.output))}</pre></td>"
            "</tr></table>", "", "</details>"]


def _reasked(c: QuestionChange) -> str:
    f = c.flip
    if f is None or not (f.new or f.baseline):
        return "-"
    return f"now {' '.join(f.new) or '-'} / baseline {' '.join(f.baseline) or '-'}"


def _case(d: EvaluationDiff) -> list[Section]:
    """A regressed case: its parameters (never cut), its flipped questions with their re-asks, and its outputs
    (cut sooner)."""
    from .terminal import FLIP_LABELS

    out = ["", f"#### {_code(d.key)}", "", f"Since the baseline: {md(d.inputs)}.", ""]
    if d.params:
        out += [f"- `{md(k)}` = {md(v)}" for k, v in d.params.items()]
        out.append("")
    table = _table(["dimension", "question", "answer", "re-asked", "verdict", "explanation now"], [
        [md(c.dimension), md(c.asked), f"{c.before} → {c.after}", _reasked(c),
         FLIP_LABELS[c.flip.status] if c.flip is not None else "-", md(c.explanation) or "-"] for c in d.flips()])
    return [Section(out), Section(table, "the regressed cases' flipped questions", _CASE_TABLE),
            Section(["", *_outputs(d)], "the regressed cases' outputs", _OUTPUTS)]


def _suite(diff: RegressionReport) -> list[str]:
    from ..report.comparison import p_text

    def drop(s: SuiteDimension) -> str:
        if s.verdict == "regressed":
            return "-"
        return "none possible" if s.detectable is None else f"{s.detectable * 100:.0f} points"

    rows = [[md(s.name), f"**{s.verdict}**" if s.verdict == "regressed" else s.verdict, str(s.evaluations),
             _fmt(s.before), _fmt(s.after), _delta(s.change), p_text(s.p_adjusted), drop(s)] for s in diff.suite]
    return ["", "### The suite, per dimension", "",
            "Did the suite get worse? A one-sided sign-flip test over the evaluations on their paired score "
            "changes (repeats and questions of one evaluation count once), adjusted for the dimensions (Holm) and "
            f"for the gate's two questions (x2), against alpha = {diff.alpha:g}. *Uninformative*: the suite could "
            "miss a drop of 10 points (the smallest drop it detects 80% of the time is larger).", "",
            *_table(["dimension", "verdict", "evaluations", "baseline", "now", "change", "p (adjusted)",
                     "detectable drop"], rows)]

DIFFS = 5  # source text diffs shown (collapsed)
DIFF_CHARS = 2000  # characters of each


def _fence(text: str) -> str:
    """``text`` in a fenced code block whose fence no run of backticks in it can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}diff\n{text}\n{fence}"


def _sources(diff: RegressionReport) -> list[str]:
    """The evaluations whose source changed: the documents removed, added and changed, and (collapsed) the text
    diff of the first :data:`DIFFS`. A flip there is about another source, not the judge's noise."""
    changed = [d for d in diff.compared if d.source_change.changed_source]
    if not changed:
        return []
    changed.sort(key=lambda d: (not d.changes, d.key))  # those whose answers changed first

    def docs(ds: list[SourceDocument]) -> str:
        return "<br>".join(md(d.heading) for d in ds) or "-"

    out = ["", "### Source changes", "",
           f"{_n(len(changed), 'evaluation')} judged against another source than in the baseline (documents by id, "
           "else title, else text): a flip on the same output there is about the source, not the judge's noise.", ""]
    out += _table(["test", "answers changed", "removed", "added", "changed"],
                  [[_code(d.key), str(len(d.changes)), docs(d.source_change.removed), docs(d.source_change.added),
                    docs(d.source_change.changed) + (" (reordered)" if d.source_change.reordered else "")]
                   for d in changed])
    for d in [d for d in changed if d.source_change.text_diff][:DIFFS]:
        text = show_controls(d.source_change.text_diff)
        if len(text) > DIFF_CHARS:
            text = text[:DIFF_CHARS] + "\n… (clipped)"
        key = html.escape(" ".join(show_controls(d.key).split())).replace("@", "&#64;")  # raw HTML: no markdown
        out += ["", f"<details><summary>source diff of {key}</summary>", "", _fence(text), "", "</details>"]
    return out


def _comparison(diff: RegressionReport) -> list[Section]:
    """The sections of the comparison with the baseline: the confirmed regressions case by case, the suite per
    dimension, the flips not settled, the judge's noise, the score changes and the other answer changes."""
    from .terminal import flip_note

    out: list[Section] = []
    cases = diff.regressed_cases()
    head = ["", "### Regressed cases (confirmed)", ""]
    if cases:
        c = diff.confirmation
        how = (f"re-asked about both outputs ({c.asks} asks of each at most, {c.tolerance} against the flip "
               "allowed)" if c is not None else "decided by a check in code")
        out.append(Section([*head, f"A question answered yes in the baseline and no now, {how}, kept its answer:"]))
        for d in cases[:ROWS]:
            out += _case(d)
        if len(cases) > ROWS:
            out.append(Section([f"\n…and {len(cases) - ROWS} more in the JSON report (`--bineval-report`)."]))
    else:
        out.append(Section([*head, "None."]))
    out.append(Section(_suite(diff), "the suite per dimension (its verdicts are in the headline)", _SUITE))
    unsettled = diff.flips("unconfirmed", "pending", "error")
    if unsettled:
        out.append(Section(["", "### Flips not settled", "",
                            "Answered yes in the baseline and no now, and not settled by re-asking: neither a "
                            "regression nor noise until they are.", "",
                            *_table(_FLIP_HEADER, _flip_rows(unsettled, flip_note))], "the flips not settled",
                           _UNSETTLED))
    noise = [(d, c) for d, c in diff.flips("unstable", "same input") if not d.regressed]
    if noise:
        out.append(Section(["", f"<details><summary>The judge's noise: {_n(len(noise), 'flip')} not kept on "
                            "re-asking, or with the same judge input</summary>", "",
                            *_table(_FLIP_HEADER, _flip_rows(noise, flip_note)), "", "</details>"],
                           "the judge's noise", _NOISE))
    changes = sorted(((d, s) for d in diff.compared for s in d.scores if s.delta is not None and abs(s.delta) > 1e-9),
                     key=lambda ds: (ds[1].delta or 0.0, ds[0].key, ds[1].name))
    if changes:
        out.append(Section(["", "### Score changes", "", "Each evaluation's dimension scores that changed (the "
                            "statistics are the suite's, above):", "",
                            *_table(["test", "dimension", "baseline", "now", "change"],
                                    [[_code(d.key), md(s.name), _fmt(s.before), _fmt(s.after), _delta(s.delta)]
                                     for d, s in changes])], "the score changes", _SCORES))
    counts = [(kind, len([x for x in diff.changes(kind) if x[1].flip is None]))
              for kind in ("unstable flip", "fix", "judge error", "recovered")]
    counts.append(("edited question", len(diff.edited_changes())))
    said = [f"{n} {kind}{'es' if kind == 'fix' and n != 1 else 's' if n != 1 else ''}" for kind, n in counts if n]
    if said:
        out.append(Section(["", "Other answer changes: " + ", ".join(said) + "."]))
    out.append(Section(_sources(diff), "the source changes", _SOURCES))
    resized = [(d.key, d.turns_changed) for d in diff.compared if d.turns_changed]
    if resized:
        out.append(Section(["", "Conversations whose turns changed:", "",
                            *[f"- {_code(key)}: {md(text or '')}" for key, text in sorted(resized)]]))
    return out


def _flip_rows(flips: list[tuple[EvaluationDiff, QuestionChange]],
               note: Callable[[QuestionChange], str]) -> list[list[str]]:
    return [[_code(d.key), md(c.dimension), md(c.asked), f"{c.before} → {c.after}", md(d.inputs),
             md(note(c)) or "-"] for d, c in flips]


_FLIP_HEADER = ["test", "dimension", "question", "answer", "output / source", "re-asked"]


def _first_steps(document: ReportDocument) -> list[str]:
    """The section of the conversations that did not pass: the first turn with a failing verdict of each, and its
    first failing question there."""
    rows = []
    for r in sorted(document.evaluations, key=lambda r: r.key):
        turn = r.first_failing_turn
        if r.outcome == "passed" or turn is None:
            continue
        first = next((v for v in r.failing() if v.step == turn), None)
        rows.append([_code(r.key), md(r.turn_label(turn)), md(first.dimension) if first else "-",
                     md(first.question) if first else "-", md(first.reason()) if first else "-"])
    if not rows:
        return []
    return ["", "### Conversations: the first step that went wrong", "",
            "The first turn of each conversation that did not pass with a question answered no there:", "",
            *_table(["test", "turn", "dimension", "question", "explanation"], rows)]


def render(document: ReportDocument, *, limit: int = LIMIT, where: str = WHERE) -> str:
    """The comment body for ``document`` (deterministic: the same document gives the same text): the outcome as
    the headline (:mod:`.verdict`), what judged the run if it differs from the baseline's, the regressed cases,
    the suite per dimension, the flips not settled and the noise, score changes, unstable questions, judge errors
    and what the run cost. At most ``limit`` characters: the least important sections are cut first
    (:mod:`.bounded`), and a note under the headline says which, and ``where`` the full report is."""
    from .verdict import outcome

    t = document.totals
    diff = document.regressions
    parts = outcome(document)
    sections = [Section(["## bineval: " + " · ".join(f"**{md(p.text)}**" if p.bad else md(p.text)
                                                     for p in parts)])]
    out: list[str] = []
    if diff is not None and diff.judged_differently:
        out.append("")
        quoted = [f"> **Judged differently:** {md(line)}; an answer that changed may have changed with the judge."
                  for line in diff.judged_differently]
        out += [part for i, line in enumerate(quoted) for part in ([">", line] if i else [line])]  # one paragraph each
    out.append("")
    out.append(f"{_n(t.evaluations, 'evaluation')}: {t.passed} passed, {t.failed} below threshold, "
               f"{_n(t.errors, 'judge error')}" + (f"; {_n(t.unscored_tests, 'test')} not scored"
                                                  if t.unscored_tests else "") + ".")
    if diff is not None:
        out.append("")
        out.append(f"Compared with `{md(diff.baseline)}` ({md(diff.baseline_generator) or 'unknown version'}): "
                   f"{_n(len(diff.compared), 'evaluation')} compared, {len(diff.added)} added, "
                   f"{len(diff.removed)} removed, {len(diff.not_run)} not run.")
        if diff.failed and (reason := diff.fail_reason()):
            out += ["", f"**The gate failed**: {md(reason)}"]
    sections.append(Section(out))
    if diff is not None:
        sections += _comparison(diff)
    sections.append(Section(_first_steps(document)))
    unstable = sorted(document.unstable, key=lambda u: (u.key, u.dimension, u.question_id, u.turn or 0))
    if unstable:
        out = []
        why = ("Their asks got both answers and no answer won at "
               f"{c.level:.0%} confidence (`--bineval-confirm`): the verdict is a coin toss."
               if (c := document.confirmation) is not None
               else "Their repeats got both answers: the verdict is not reproducible (`--bineval-repeats`).")
        out += ["", "### Unstable questions", "", why, ""]
        out += _table(["test", "dimension", "question", "answers", "agreement"], [
            [_code(u.key), md(u.dimension), md(u.asked), " ".join(u.answers), _fmt(u.agreement)]
            for u in unstable])
        sections.append(Section(out, "the unstable questions", _UNSTABLE))
    errors = sorted((r.key, v.dimension, v.asked, v.error or "") for r in document.evaluations
                     for v in r.errors())
    if errors:
        out = ["", "### Judge errors", "", "Questions the judge gave no answer to: their tests error.", ""]
        out += _table(["test", "dimension", "question", "cause"],
                      [[_code(k), md(dim), md(q), md(cause) or "-"] for k, dim, q, cause in errors])
        sections.append(Section(out, "the judge errors", _ERRORS))
    if document.calibration is not None:
        from ..calibrate import calibration_markdown

        sections.append(Section(["", *calibration_markdown(document.calibration)],
                                "the judge's agreement with the labels", _CALIBRATION))
    out = ["", "### What the run cost", ""]
    cost = "unknown" if t.cost_usd is None else f"${t.cost_usd:.4f}"
    if t.unpriced_requests and t.cost_usd is not None:
        cost = f"at least {cost} ({_n(t.unpriced_requests, 'reply', 'replies')} unpriced)"
    out.append(f"{_n(t.questions, 'question')} judged; {_n(t.llm_calls, 'request')} sent "
               f"({t.failed_requests} failed), {_n(t.cache_hits, 'cache hit')}; "
               f"tokens: {t.prompt_tokens} prompt + {t.completion_tokens} completion; cost: {cost}.")
    if t.batch_requests:
        from .batch import batched_text

        out.append(batched_text(t.batch_requests))
    if diff is not None and (f := diff.confirmation) is not None:
        if f.engine:
            out.append(f"Of which confirming the flips: {_n(f.flips, 'flip')} to confirm, {_n(f.reasks, 'fresh ask')} "
                       f"({_n(f.requests, 'request')} sent, {_n(f.cache_hits, 'cache hit')}).")
        else:
            out.append(f"{_n(f.flips, 'flip')} not re-asked: no judge here (`bineval report --confirm-flips` "
                       "re-asks them).")
    if (c := document.confirmation) is not None:
        out.append(f"Of which confirmation (`--bineval-confirm {c.rounds}`): {c.reasked} of "
                   f"{_n(c.questions, 'question')} re-asked, {_n(c.reasks, 're-ask')} "
                   f"({_n(c.requests, 'request')} sent); {c.asks} asks in all, where `--bineval-repeats "
                   f"{c.rounds + 1}` would make {c.repeats_asks}.")
    sections.append(Section(out))
    return fit(sections, limit, where=where,
               limit_text=f"the size GitHub allows a comment (65,536 characters; this body keeps under {limit:,})")


class PrComment:
    """Writes :func:`render` of the finished document to ``path`` (registered when ``--bineval-pr-comment`` is on;
    the controller only, under pytest-xdist)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def pytest_bineval_finished(self, config: pytest.Config, document: ReportDocument) -> None:
        write_text_atomic(self.path, render(document))


def register(config: pytest.Config) -> None:
    """Register the writer when ``--bineval-pr-comment PATH`` is given (PATH relative to the rootdir)."""
    path = config.getoption("bineval_pr_comment", None) or config.getini("bineval_pr_comment")
    if path and not hasattr(config, "workerinput"):
        config.pluginmanager.register(PrComment(config.rootpath / str(path)), "bineval-pr-comment")
