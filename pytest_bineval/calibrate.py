"""The judge against a team's own labels: :class:`Calibration` (per dimension and per question, the agreement,
Cohen's kappa, the judge's TPR and TNR with their intervals, the base rate, the disagreements with the judge's
explanation, the labels not used and why), made by :func:`calibrate` from a run's records and a labels file
(:mod:`pytest_bineval.labels`; the figures are :mod:`pytest_bineval.agreement`'s), and its text: the tables of
``bineval calibrate`` and the lines of a run's summary with ``--bineval-labels``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import BaseModel, Field

from .agreement import Agreement, Share, Table
from .labels import LabelAnswer, LabelIssue, LabelLine, Matched, match_labels, question_digest
from .models import Answer
from .report.record import EvaluationRecord
from .untrusted import one_line, show_controls

Line = tuple[str, dict[str, bool]]


class QuestionAgreement(BaseModel):
    """The labels of one question (one text within one dimension), over every evaluation that asked it."""

    dimension: str
    question: str
    stats: Agreement


class DimensionAgreement(BaseModel):
    """The labels of one dimension, and of each of its questions."""

    dimension: str
    stats: Agreement
    questions: list[QuestionAgreement] = Field(default_factory=list)


class Disagreement(BaseModel):
    """A labelled verdict the judge answered otherwise than the person."""

    key: str = Field(description="the evaluation (EvaluationRecord.key)")
    dimension: str
    question: str
    judge: Answer
    label: LabelAnswer
    explanation: str = Field(default="", description="the judge's explanation (or why it has none)")
    labeler: str = ""
    note: str = Field(default="", description="the label's note")
    line: int = Field(description="the label's line in the labels file")


class LabelledVerdict(BaseModel):
    """A verdict of the run a label speaks of (the HTML page shows it marked)."""

    key: str
    question_id: str
    answer: LabelAnswer
    labeler: str = ""
    note: str = ""


class Calibration(BaseModel):
    """A run's verdicts against a labels file (``bineval calibrate``, ``--bineval-labels``)."""

    labels_file: str = Field(description="the labels file, as given")
    judge: list[str] = Field(default_factory=list, description="the judge model(s) of the labelled verdicts")
    labels: int = Field(default=0, description="labels in the file")
    used: int = Field(default=0, description="labels compared with a verdict of this run")
    judge_errors: int = Field(default=0, description="labels of verdicts the judge gave no answer to (not compared)")
    code_checks: int = Field(default=0, description="labels of questions decided by code, not by the judge (not "
                             "compared)")
    issues: list[LabelIssue] = Field(default_factory=list, description="labels not used: stale (said why), not in "
                                     "this report, superseded by a later line")
    overall: Agreement
    dimensions: list[DimensionAgreement] = Field(default_factory=list)
    disagreements: list[Disagreement] = Field(default_factory=list)
    labelled: list[LabelledVerdict] = Field(default_factory=list)
    trust_kappa: float | None = Field(default=None, description="--bineval-trust-kappa: the gate trusts only "
                                      "dimensions whose kappa is at least this")
    untrusted: dict[str, str] = Field(default_factory=dict, description="dimensions the gate did not trust -> why")

    def dimension(self, name: str) -> DimensionAgreement | None:
        return next((d for d in self.dimensions if d.dimension == name), None)

    def stale(self) -> list[LabelIssue]:
        return [i for i in self.issues if i.kind == "stale"]

    def count(self, kind: str) -> int:
        return sum(i.kind == kind for i in self.issues)

    def below(self, min_kappa: float) -> list[str]:
        """Why each dimension with labels fails ``kappa >= min_kappa`` (undefined kappa fails: it shows nothing)."""
        out = []
        for d in self.dimensions:
            k = d.stats.kappa
            if k is None:
                out.append(f"{d.dimension}: kappa undefined on {d.stats.labels} labels (one answer only), so not "
                           f">= {min_kappa:.2f}")
            elif k < min_kappa:
                out.append(f"{d.dimension}: kappa {k:.2f} < {min_kappa:.2f} on {d.stats.labels} labels")
        return out


def _agreement(pairs: Sequence[Matched]) -> Agreement:
    return Agreement.of(Table.of([(m.label.answer, m.verdict.answer) for m in pairs]))


def calibrate(records: Sequence[EvaluationRecord], labels: Sequence[LabelLine], labels_file: str) -> Calibration:
    """The verdicts of ``records`` against ``labels`` (read from ``labels_file``)."""
    matching = match_labels(labels, records)
    answered = matching.answered
    dims: dict[str, list[Matched]] = {}
    for m in answered:
        dims.setdefault(m.verdict.dimension, []).append(m)
    dimensions = []
    for name, pairs in dims.items():
        by_question: dict[str, list[Matched]] = {}
        for m in pairs:
            by_question.setdefault(question_digest(m.verdict.question), []).append(m)
        questions = [QuestionAgreement(dimension=name, question=group[0].verdict.question, stats=_agreement(group))
                     for group in by_question.values()]
        questions.sort(key=lambda q: (q.stats.agreement.value or 0.0, q.question))
        dimensions.append(DimensionAgreement(dimension=name, stats=_agreement(pairs), questions=questions))
    order = list(dict.fromkeys(d.name for r in records for d in r.dimensions))
    dimensions.sort(key=lambda d: (order.index(d.dimension) if d.dimension in order else len(order), d.dimension))
    disagreements = [
        Disagreement(key=m.record.key, dimension=m.verdict.dimension, question=m.verdict.question,
                     judge=m.verdict.answer, label=m.label.answer, explanation=m.verdict.reason(),
                     labeler=m.label.labeler, note=m.label.note, line=m.line)
        for m in answered if m.verdict.answer != m.label.answer]
    return Calibration(
        labels_file=labels_file, judge=sorted({m.record.model for m in answered if m.record.model}),
        labels=len(labels), used=len(answered), judge_errors=len(matching.judge_errors),
        code_checks=len(matching.code_checks), issues=matching.issues,
        overall=_agreement(answered), dimensions=dimensions, disagreements=disagreements,
        labelled=[LabelledVerdict(key=m.record.key, question_id=m.verdict.question_id, answer=m.label.answer,
                                  labeler=m.label.labeler, note=m.label.note) for m in matching.matched])


# -- text ----------------------------------------------------------------------------------------------------------

HEAD = ("labels", "agreement", "kappa", "TPR (judge yes / label yes)", "TNR (judge no / label no)",
        "base rate (label yes)")


def _cells(a: Agreement) -> list[str]:
    return [str(a.labels), a.agreement.text(), a.kappa_text(), a.tpr.text(), a.tnr.text(), _rate(a.base_rate)]


def _rate(s: Share) -> str:
    return "n/a" if s.value is None else f"{s.value:.2f} ({s.k}/{s.n})"


def _clip(text: str, n: int = 70) -> str:
    text = one_line(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def markdown_table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A markdown table, its columns padded to line up in a terminal (``|`` in a cell escaped)."""
    head = [c.replace("|", "\\|") for c in head]
    body = [[c.replace("|", "\\|") for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(head)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *(line(r) for r in body)]


def counts_text(cal: Calibration) -> str:
    """``20 labels: 17 used, 2 stale, 1 not in this report, 0 superseded, 0 of judge errors``"""
    return (f"{cal.labels} label{'s' if cal.labels != 1 else ''}: {cal.used} used, {cal.count('stale')} stale, "
            f"{cal.count('not in report')} not in this report, {cal.count('superseded')} superseded, "
            f"{cal.judge_errors} of judge errors" + (f", {cal.code_checks} of code checks" if cal.code_checks else ""))


def calibration_text(cal: Calibration, *, title: str = "", questions: bool = True) -> list[str]:
    """The tables and lists of ``bineval calibrate`` for one report."""
    lines = [f"{title or 'judge'} ({', '.join(cal.judge) or 'unknown judge'}) against {cal.labels_file}: "
             f"{counts_text(cal)}", ""]
    if cal.dimensions:
        rows = [[d.dimension, *_cells(d.stats)] for d in cal.dimensions]
        if len(cal.dimensions) > 1:
            rows.append(["all", *_cells(cal.overall)])
        lines += [*markdown_table(("dimension", *HEAD), rows), ""]
    if questions and cal.dimensions:
        rows = [[q.dimension, _clip(q.question), *_cells(q.stats)] for d in cal.dimensions for q in d.questions]
        lines += ["per question (lowest agreement first):", *markdown_table(("dimension", "question", *HEAD), rows),
                  ""]
    if cal.disagreements:
        lines.append(f"disagreements ({len(cal.disagreements)}):")
        for x in cal.disagreements:
            who = f" ({one_line(x.labeler)})" if x.labeler else ""
            lines.append(f"    {one_line(x.key)} [{x.dimension}] {one_line(x.question)}")
            lines.append(f"        judge: {x.judge}: {one_line(x.explanation)}")
            lines.append(f"        label{who}, line {x.line}: {x.label}" + (f": {one_line(x.note)}" if x.note else ""))
        lines.append("")
    for issue in cal.issues:
        if issue.kind != "superseded":
            lines.append(f"{issue.kind.upper()} label, line {issue.line}: {one_line(issue.test)}"
                         f"{f' #{issue.index}' if issue.index else ''} {_clip(issue.question, 60)!r}: "
                         f"{one_line(issue.why)}")
    return [show_controls(line) for line in lines]


def side_by_side(named: Sequence[tuple[str, Calibration]]) -> list[str]:
    """One table of several judges' calibrations on the same labels: per dimension, each judge's kappa,
    agreement, TPR and TNR."""
    names = list(dict.fromkeys(d.dimension for _, cal in named for d in cal.dimensions))
    head = ["dimension", *(f"{title} ({', '.join(cal.judge) or '?'})" for title, cal in named)]

    def cell(a: Agreement | None) -> str:
        if a is None or not a.labels:
            return "no labels"
        return (f"kappa {a.kappa_text()}, agreement {_fmt(a.agreement.value)}, TPR {_fmt(a.tpr.value)}, "
                f"TNR {_fmt(a.tnr.value)} (n={a.labels})")

    rows = [[name, *(cell(d.stats if (d := cal.dimension(name)) else None) for _, cal in named)] for name in names]
    rows.append(["all", *(cell(cal.overall) for _, cal in named)])
    return [show_controls(line) for line in markdown_table(head, rows)]


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def calibration_markdown(cal: Calibration) -> list[str]:
    """The section of the PR comment and the job summary for a run with ``--bineval-labels``: how far the judge
    agrees with the team's labels per dimension, and which dimensions the gate did not trust."""
    lines = ["### The judge against your labels", "",
             f"`{cal.labels_file}`: {counts_text(cal)}.", ""]
    if cal.dimensions:
        rows = [[d.dimension, *_cells(d.stats)] for d in cal.dimensions]
        lines += [*markdown_table(("dimension", *HEAD), rows), ""]
    else:
        lines += ["No label speaks of a verdict of this run.", ""]
    if cal.disagreements:
        lines.append(f"{len(cal.disagreements)} verdict(s) disagree with their label (`bineval calibrate REPORT.json "
                     f"--labels {cal.labels_file}` lists them with the judge's explanations).")
    if cal.trust_kappa is not None:
        if cal.untrusted:
            named = "; ".join(f"{name} ({why})" for name, why in cal.untrusted.items())
            lines.append(f"**The gate trusts only dimensions with kappa >= {cal.trust_kappa:.2f}** "
                         f"(`--bineval-trust-kappa`); not trusted, shown but never failing: {named}.")
        else:
            lines.append(f"Every dimension has kappa >= {cal.trust_kappa:.2f} (`--bineval-trust-kappa`).")
    return [show_controls(line) for line in lines]


SHOWN = 10  # disagreements listed in a run's summary


def summary_lines(cal: Calibration) -> list[Line]:
    """The ``bineval judge`` section of a run's terminal summary (``--bineval-labels``)."""
    lines: list[Line] = [(f"judge vs labels of {cal.labels_file}: {counts_text(cal)}", {"bold": True})]
    for d in cal.dimensions:
        a = d.stats
        lines.append((f"    {d.dimension}: kappa {a.kappa_text()}, agreement {a.agreement.text()}, TPR "
                      f"{a.tpr.text()}, TNR {a.tnr.text()}, base rate {_rate(a.base_rate)}", {}))
    if not cal.dimensions:
        lines.append(("    no label speaks of a verdict of this run", {"yellow": True}))
    for x in cal.disagreements[:SHOWN]:
        lines.append((f"    DISAGREES {one_line(x.key)} [{x.dimension}] {_clip(x.question, 60)}: judge {x.judge}, "
                      f"label {x.label}", {"yellow": True}))
    if len(cal.disagreements) > SHOWN:
        lines.append((f"    ... and {len(cal.disagreements) - SHOWN} more disagreements (bineval calibrate lists "
                      "them all, with the judge's explanations)", {"yellow": True}))
    for issue in cal.stale():
        lines.append((f"    STALE label, line {issue.line}: {one_line(issue.test)} {_clip(issue.question, 50)!r}: "
                      f"{one_line(issue.why)}", {"yellow": True}))
    if cal.trust_kappa is not None:
        if cal.untrusted:
            named = "; ".join(f"{name} ({why})" for name, why in cal.untrusted.items())
            lines.append((f"gate: trusts only dimensions with kappa >= {cal.trust_kappa:.2f} "
                          f"(--bineval-trust-kappa); not trusted: {named}", {"yellow": True, "bold": True}))
        else:
            lines.append((f"gate: every dimension has kappa >= {cal.trust_kappa:.2f} (--bineval-trust-kappa)", {}))
    return [(show_controls(text), markup) for text, markup in lines]
