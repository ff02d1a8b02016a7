"""``--bineval-pr-comment PATH``: the run as the markdown body of one pull-request comment.

Most important first: how what judged the run differs from what judged the baseline (judge model, judge prompt,
prompts version, checklists), if it does; then the significant regressions (dimensions whose drop is beyond the
tolerance and significant at ``--bineval-alpha``, with their questions answered yes in the baseline and no now),
every other score change with its p-value, the unstable questions, the judge errors, and what the run cost.
The body is a pure function of the finished
:class:`~pytest_bineval.report.document.ReportDocument` and holds no timestamp or duration, so a sticky-comment action
(``marocchino/sticky-pull-request-comment``) updates one comment in place and a run that changes nothing leaves
it as it is. Model text is escaped (:func:`~pytest_bineval.outputs.github.md`): an explanation cannot add markdown,
HTML or ``@mentions``; each table stops at :data:`ROWS` rows and says how many more the report holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..files import write_text_atomic

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..report.comparison import EvaluationDiff, QuestionChange, RegressionReport, ScoreChange
    from ..report.document import ReportDocument

ROWS = 30  # rows per table; a GitHub comment holds at most 65,536 characters


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
    """A test id or key as inline code (backticks in it cannot end the span: they become quotes)."""
    return "`" + " ".join(text.replace("`", "'").split()) + "`"


def _p(p_value: float | None) -> str:
    if p_value is None:
        return "n/a"
    return f"{p_value:.3g}" if p_value >= 0.001 else "< 0.001"


_TEST_NAMES = {"mcnemar": "McNemar", "fisher": "Fisher", "none": "-", "": "-"}


def _score_rows(pairs: list[tuple[EvaluationDiff, ScoreChange]], verdict: Callable[[ScoreChange], str]
                ) -> list[list[str]]:
    return [[_code(d.key), md(s.name), _fmt(s.before), _fmt(s.after), _delta(s.delta), _p(s.p_value),
             _TEST_NAMES.get(s.stat_test, md(s.stat_test)), verdict(s)] for d, s in pairs]


_SCORE_HEADER = ["test", "dimension", "baseline", "now", "change", "p-value", "exact test", "verdict"]


def _flip_rows(flips: list[tuple[EvaluationDiff, QuestionChange]]) -> list[list[str]]:
    return [[_code(d.key), md(c.dimension), md(c.asked), f"{c.before} → {c.after}",
             "changed" if d.output_changed else "same", md(c.explanation) or "-"] for d, c in flips]


_FLIP_HEADER = ["test", "dimension", "question", "answer", "output", "explanation now"]


def _comparison(diff: RegressionReport) -> list[str]:
    """The sections of the comparison with the baseline: significant regressions, then every other score change
    with its p-value, then the other answer changes."""
    out: list[str] = []

    def by_key(ds: tuple[EvaluationDiff, ScoreChange]) -> tuple[str, str]:
        return ds[0].key, ds[1].name

    regressed = sorted(diff.regressed(), key=by_key)
    regressed_keys = {(d.key, s.name) for d, s in regressed}
    flips = sorted(diff.changes("regression"), key=lambda dc: (dc[0].key, dc[1].dimension, dc[1].question_id))
    out += ["", "### Significant regressions", ""]
    if regressed:
        out.append(f"Dimensions whose score fell beyond the tolerance ({diff.tolerance:.2f}) with p < "
                   f"{diff.alpha:g} (an exact test on the paired answers):")
        out.append("")
        out += _table(_SCORE_HEADER, _score_rows(regressed, lambda s: "**regressed**"))
        in_regressed = [(d, c) for d, c in flips if (d.key, c.dimension) in regressed_keys]
        if in_regressed:
            out += ["", "Their questions answered yes in the baseline and no now:", ""]
            out += _table(_FLIP_HEADER, _flip_rows(in_regressed))
    else:
        out.append(f"None: no dimension's drop is beyond the tolerance ({diff.tolerance:.2f}) and significant at "
                   f"{diff.alpha:g}.")
    changes = sorted(((d, s) for d in diff.compared for s in d.scores
                      if s.delta is not None and abs(s.delta) > 1e-9 and (d.key, s.name) not in regressed_keys),
                     key=lambda ds: (ds[1].delta or 0.0, *by_key(ds)))

    def verdict(s: ScoreChange) -> str:
        if (s.delta or 0.0) > 0:
            return "up"
        return "within tolerance" if (s.delta or 0.0) >= -diff.tolerance - 1e-9 else "within noise"

    if changes:
        out += ["", "### Score changes", "",
                f"Not significant at {diff.alpha:g}, or up (McNemar's exact test on the paired answers; Fisher's on "
                "the answer counts with repeats):", ""]
        out += _table(_SCORE_HEADER, _score_rows(changes, verdict))
    others = [(d, c) for d, c in flips if (d.key, c.dimension) not in regressed_keys]
    if others:
        out += ["", "Questions answered yes in the baseline and no now, in dimensions within noise:", ""]
        out += _table(_FLIP_HEADER, _flip_rows(others))
    counts = [(kind, len(diff.changes(kind))) for kind in ("unstable flip", "fix", "judge error", "recovered")]
    counts.append(("edited question", len(diff.edited_changes())))
    said = [f"{n} {kind}{'es' if kind == 'fix' and n != 1 else 's' if n != 1 else ''}" for kind, n in counts if n]
    if said:
        out += ["", "Other answer changes: " + ", ".join(said) + "."]
    resized = [(d.key, d.turns_changed) for d in diff.compared if d.turns_changed]
    if resized:
        out += ["", "Conversations whose turns changed:", ""]
        out += [f"- {_code(key)}: {md(text or '')}" for key, text in sorted(resized)]
    return out


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


def render(document: ReportDocument) -> str:
    """The comment body for ``document`` (deterministic: the same document gives the same text): what judged the
    run if it differs from the baseline's, then significant regressions, score changes with their p-values,
    unstable questions, judge errors and what the run cost."""
    t = document.totals
    diff = document.regressions
    out: list[str] = []
    if diff is None:
        headline = "not compared with a baseline"
    else:
        gate = diff.gate_text()
        headline = (f"**{gate}**" if gate
                    else f"no significant regression vs baseline `{md(diff.baseline)}`")
    out.append(f"## bineval: {headline}")
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
        out += _comparison(diff)
    out += _first_steps(document)
    unstable = sorted(document.unstable, key=lambda u: (u.key, u.dimension, u.question_id, u.turn or 0))
    if unstable:
        why = ("Their asks got both answers and no answer won at "
               f"{c.level:.0%} confidence (`--bineval-confirm`): the verdict is a coin toss."
               if (c := document.confirmation) is not None
               else "Their repeats got both answers: the verdict is not reproducible (`--bineval-repeats`).")
        out += ["", "### Unstable questions", "", why, ""]
        out += _table(["test", "dimension", "question", "answers", "agreement"], [
            [_code(u.key), md(u.dimension), md(u.asked), " ".join(u.answers), _fmt(u.agreement)]
            for u in unstable])
    errors = sorted((r.key, v.dimension, v.asked, v.error or "") for r in document.evaluations
                     for v in r.errors())
    if errors:
        out += ["", "### Judge errors", "", "Questions the judge gave no answer to: their tests error.", ""]
        out += _table(["test", "dimension", "question", "cause"],
                      [[_code(k), md(dim), md(q), md(cause) or "-"] for k, dim, q, cause in errors])
    out += ["", "### What the run cost", ""]
    cost = "unknown" if t.cost_usd is None else f"${t.cost_usd:.4f}"
    if t.unpriced_requests and t.cost_usd is not None:
        cost = f"at least {cost} ({_n(t.unpriced_requests, 'reply', 'replies')} unpriced)"
    out.append(f"{_n(t.questions, 'question')} judged; {_n(t.llm_calls, 'request')} sent "
               f"({t.failed_requests} failed), {_n(t.cache_hits, 'cache hit')}; "
               f"tokens: {t.prompt_tokens} prompt + {t.completion_tokens} completion; cost: {cost}.")
    if (c := document.confirmation) is not None:
        out.append(f"Of which confirmation (`--bineval-confirm {c.rounds}`): {c.reasked} of "
                   f"{_n(c.questions, 'question')} re-asked, {_n(c.reasks, 're-ask')} "
                   f"({_n(c.requests, 'request')} sent); {c.asks} asks in all, where `--bineval-repeats "
                   f"{c.rounds + 1}` would make {c.repeats_asks}.")
    return "\n".join(out) + "\n"


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
