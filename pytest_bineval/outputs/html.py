"""The self-contained HTML report (``--bineval-html``, ``bineval report --html``): a pure function of a
:class:`~pytest_bineval.report.document.ReportDocument`, and optionally of a baseline document to compare with.

One file: CSS, JavaScript and SVG plots are inline and a Content-Security-Policy forbids loading anything
else, so the page opens from disk (a CI artifact) and makes no request. Every text goes through jinja2's
autoescape: outputs under test are untrusted, and an output holding ``<script>`` shows as text.

The page is built from a view (:class:`ReportView`) computed here, so that the template only lays it out:
per evaluation a row of dimension bars and the verdict cells of a tests x questions grid (yes / no / error,
unstable, regressed or fixed against the baseline), the detail of the selected evaluation (its verdicts with
explanations, output, source), and per dimension a histogram of the scores over the run.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..files import write_text_atomic
from ..models import Verdict, cost_text
from ..report.comparison import BaselineDiff, QuestionChange, RegressionReport
from ..report.document import ReportDocument
from ..report.record import DimensionResult, EvaluationRecord
from .labelling_html import LabellingView
from .transcript import TurnView, transcript
from .verdict import Part, parts_of

# -- the view the template lays out -------------------------------------------------------------------------

BAR_WIDTH = 120  # px of a dimension bar (score 0..1)
HIST_WIDTH, HIST_HEIGHT, HIST_BINS = 240, 96, 10
HIST_LEFT, HIST_TOP, HIST_BOTTOM = 26, 8, 18  # margins of the histogram's plot area


def _num(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


@dataclass(frozen=True)
class Bar:
    """One dimension of one evaluation: score (fill) against threshold (marker)."""

    dim: DimensionResult
    before: float | None = None  # the baseline's score, when there is one
    compared: bool = False
    dropped: bool = False  # fell by more than the tolerance since the baseline (--bineval-fail-on-regression)

    @property
    def fill(self) -> float:
        return round(BAR_WIDTH * (self.dim.score or 0.0), 1)

    @property
    def marker(self) -> float:
        return round(BAR_WIDTH * self.dim.threshold, 1)

    @property
    def text(self) -> str:
        return f"{_num(self.dim.score)} / {_num(self.dim.threshold)}"

    @property
    def delta(self) -> str:
        """``+0.25`` / ``-0.50`` against the baseline; empty when unchanged or not compared."""
        if not self.compared or self.before is None or self.dim.score is None:
            return ""
        d = self.dim.score - self.before
        return "" if abs(d) < 0.005 else f"{d:+.2f}"


@dataclass(frozen=True)
class Cell:
    """One verdict in the grid (and in the detail list, by the same ``id``)."""

    id: str
    verdict: Verdict
    change: QuestionChange | None = None

    @property
    def unstable(self) -> bool:
        """Asked more than once (``--bineval-repeats``), the judge gave both answers."""
        return self.verdict.unstable

    @property
    def regressed(self) -> bool:
        """A yes -> no flip that is no noise: confirmed by re-asking (or not settled); without a confirmation (an
        older report), a flip of a stable question."""
        c = self.change
        if c is None:
            return False
        if c.flip is not None:
            return c.flip.status not in ("unstable", "same input")
        return c.kind == "regression"

    @property
    def fixed(self) -> bool:
        return self.change is not None and self.change.kind == "fix"

    @property
    def flipped(self) -> bool:
        """yes <-> no of an unstable question, or a yes -> no flip that was the judge's noise (re-asking did not
        keep it, or nothing the judge read changed): reported apart from a regression."""
        c = self.change
        if c is None:
            return False
        if c.flip is not None:
            return c.flip.status in ("unstable", "same input")
        return c.kind == "unstable flip"

    @property
    def why(self) -> str:
        v = self.verdict
        return (v.error or v.explanation) if v.answer == "error" else v.explanation

    @property
    def repeats(self) -> str:
        """``yes, no, yes; agreement 0.67`` when the question was asked more than once (repeats, confirmation)."""
        v = self.verdict
        asks = v.asks
        if len(asks) < 2:
            return ""
        agreement = "" if v.agreement is None else f"; agreement {v.agreement:.2f}"
        return ", ".join(asks) + agreement

    @property
    def css(self) -> str:
        flags = [f for f, on in (("regressed", self.regressed), ("fixed", self.fixed), ("flipped", self.flipped),
                                 ("unstable", self.unstable)) if on]
        return " ".join(["cell", self.verdict.answer, *flags])

    @property
    def glyph(self) -> str:
        return {"yes": "\u2713", "no": "\u2717", "error": "!"}[self.verdict.answer]


@dataclass(frozen=True)
class Column:
    """A group of grid columns: the questions of one dimension, by their position in each checklist."""

    dimension: str
    headers: tuple[str, ...]  # hover text of each column (the question when every test asks the same)


@dataclass(frozen=True)
class Row:
    index: int
    record: EvaluationRecord
    bars: tuple[Bar, ...]
    cells: tuple[Cell | None, ...]  # aligned with the columns; None where this checklist has fewer questions
    new: bool = False  # not in the baseline

    @property
    def dom_id(self) -> str:
        return f"t{self.index}"

    @property
    def key_parts(self) -> tuple[str, str]:
        """(``tests/test_x.py::``, ``test_y[param] #1``): the module part is shown smaller."""
        head, sep, tail = self.record.key.partition("::")
        return (head + sep, tail) if sep else ("", head)

    @property
    def verdict_cells(self) -> list[Cell]:
        """Every cell of this row (in checklist order), for the detail list."""
        return [c for c in self.cells if c is not None]

    @property
    def transcript(self) -> tuple[TurnView, ...]:
        """A conversation's turns, each with the verdicts that failed there (none for a text output)."""
        return transcript(self.record, self.verdict_cells)

    @property
    def dropped(self) -> bool:
        """A dimension score fell by more than the tolerance since the baseline."""
        return any(b.dropped for b in self.bars)

    @property
    def regressed(self) -> bool:
        """Worse than the baseline in a way --bineval-fail-on-regression fails: a stable question answered
        yes is now no, or a dimension score fell by more than the tolerance (with no answer flipped, e.g.
        a question was added, or the repeats of one agree less)."""
        return self.dropped or any(c.regressed for c in self.verdict_cells)

    @property
    def unstable(self) -> int:
        return sum(c.unstable for c in self.verdict_cells)

    @property
    def failing(self) -> bool:
        return self.record.outcome != "passed"

    @property
    def location(self) -> str:
        loc = self.record.location
        return "" if loc is None else f"{loc.file}:{loc.line}"


@dataclass(frozen=True)
class Stack:
    """One outcome's part of a histogram bar."""

    outcome: str
    y: float
    height: float
    count: int


@dataclass(frozen=True)
class Bin:
    x: float
    width: float
    low: float
    high: float
    stacks: tuple[Stack, ...]

    @property
    def title(self) -> str:
        counts = ", ".join(f"{s.count} {s.outcome}" for s in self.stacks)
        return f"score {self.low:.1f}\u2013{self.high:.1f}: {counts}"


@dataclass(frozen=True)
class Histogram:
    """The scores of one dimension over the run, in 10 bins of width 0.1, stacked by outcome."""

    dimension: str
    bins: tuple[Bin, ...]
    thresholds: tuple[tuple[float, float], ...]  # (x, threshold)
    count: int
    missing: int  # evaluations whose every question of this dimension was a judge error
    mean: float | None
    top: int  # the y-axis maximum

    width: int = HIST_WIDTH
    height: int = HIST_HEIGHT
    left: int = HIST_LEFT
    plot_top: int = HIST_TOP
    baseline_y: float = HIST_HEIGHT - HIST_BOTTOM

    @property
    def right(self) -> int:
        return self.width - 4


def histogram(dimension: str, dims: Sequence[DimensionResult]) -> Histogram:
    scored = [d for d in dims if d.score is not None]
    counts: list[dict[str, int]] = [{} for _ in range(HIST_BINS)]
    for d in scored:
        i = min(int((d.score or 0.0) * HIST_BINS + 1e-9), HIST_BINS - 1)
        counts[i][d.outcome] = counts[i].get(d.outcome, 0) + 1
    top = max([sum(c.values()) for c in counts] + [1])
    plot_w = HIST_WIDTH - 4 - HIST_LEFT
    plot_h = HIST_HEIGHT - HIST_BOTTOM - HIST_TOP
    step = plot_w / HIST_BINS
    bins = []
    for i, c in enumerate(counts):
        y = float(HIST_HEIGHT - HIST_BOTTOM)
        stacks = []
        for outcome in ("passed", "failed", "error"):
            n = c.get(outcome, 0)
            if n:
                h = round(plot_h * n / top, 1)
                y -= h
                stacks.append(Stack(outcome, round(y, 1), h, n))
        bins.append(Bin(x=round(HIST_LEFT + i * step + 1, 1), width=round(step - 2, 1), low=i / HIST_BINS,
                        high=(i + 1) / HIST_BINS, stacks=tuple(stacks)))
    limits = sorted({d.threshold for d in dims})
    return Histogram(
        dimension=dimension, bins=tuple(bins),
        thresholds=tuple((round(HIST_LEFT + plot_w * t, 1), t) for t in limits),
        count=len(scored), missing=len(dims) - len(scored),
        mean=sum(d.score or 0.0 for d in scored) / len(scored) if scored else None, top=top)


@dataclass(frozen=True)
class ReportView:
    """Everything the template shows."""

    document: ReportDocument
    rows: tuple[Row, ...]
    columns: tuple[Column, ...]
    histograms: tuple[Histogram, ...]
    diff: BaselineDiff | None
    models: tuple[str, ...]
    outcome: tuple[Part, ...] = ()  # the run's outcome, as every output says it (outputs/verdict.py)
    bar_width: int = BAR_WIDTH

    @property
    def failing(self) -> int:
        return sum(r.failing for r in self.rows)

    @property
    def regressed(self) -> int:
        return sum(r.regressed for r in self.rows)

    @property
    def unstable(self) -> int:
        return sum(r.unstable for r in self.rows)

    @property
    def flipped(self) -> int:
        return sum(c.flipped for r in self.rows for c in r.verdict_cells)

    @property
    def cells(self) -> int:
        return sum(len(r.verdict_cells) for r in self.rows)

    @property
    def tokens(self) -> int:
        t = self.document.totals
        return t.prompt_tokens + t.completion_tokens

    @property
    def cost(self) -> str:
        t = self.document.totals
        return cost_text(t.cost_usd, t.unpriced_requests)


def _dimension_verdicts(rec: EvaluationRecord) -> dict[str, list[Verdict]]:
    groups: dict[str, list[Verdict]] = {d.name: [] for d in rec.dimensions}
    for v in rec.verdicts:
        groups.setdefault(v.dimension, []).append(v)
    return groups


def build_view(document: ReportDocument, comparison: RegressionReport | None = None) -> ReportView:
    """The view of ``document``; ``diff`` (default: the document's own ``regressions``, when it was made with
    ``--bineval-baseline``) marks what changed since the baseline."""
    comparison = comparison if comparison is not None else document.regressions
    diff = None if comparison is None else BaselineDiff.of(comparison)
    records = document.evaluations
    grouped = [_dimension_verdicts(r) for r in records]
    sizes: dict[str, int] = {}
    for g in grouped:
        for name, verdicts in g.items():
            sizes[name] = max(sizes.get(name, 0), len(verdicts))
    columns = []
    for name, size in sizes.items():
        if not size:
            continue
        headers = []
        for slot in range(size):
            asked = {g[name][slot].asked for g in grouped if len(g.get(name, ())) > slot}
            headers.append(f"[{name}] {asked.pop()}" if len(asked) == 1
                           else f"[{name}] question {slot + 1} ({len(asked)} different questions)")
        columns.append(Column(name, tuple(headers)))
    rows = []
    for i, (rec, g) in enumerate(zip(records, grouped, strict=True)):
        cells: list[Cell | None] = []
        for col in columns:
            first = len(cells)
            verdicts = g.get(col.dimension, [])
            for slot in range(len(col.headers)):
                if slot >= len(verdicts):
                    cells.append(None)
                    continue
                v = verdicts[slot]
                change = diff.changes.get((rec.key, v.question_id, v.turn)) if diff else None
                cells.append(Cell(id=f"t{i}-c{first + slot}", verdict=v, change=change))
        compared = diff is not None and rec.key not in diff.new_keys
        bars = tuple(Bar(d, diff.scores.get((rec.key, d.name)) if diff else None, compared,
                         diff is not None and (rec.key, d.name) in diff.drops) for d in rec.dimensions)
        rows.append(Row(index=i, record=rec, bars=bars, cells=tuple(cells),
                        new=diff is not None and rec.key in diff.new_keys))
    by_dim: dict[str, list[DimensionResult]] = {}
    for rec in records:
        for d in rec.dimensions:
            by_dim.setdefault(d.name, []).append(d)
    models = tuple(dict.fromkeys([document.settings.model] + [r.model for r in records] if document.settings.model
                                 else [r.model for r in records]))
    return ReportView(document=document, rows=tuple(rows), columns=tuple(columns),
                      histograms=tuple(histogram(n, ds) for n, ds in by_dim.items()), diff=diff,
                      models=tuple(m for m in models if m), outcome=tuple(parts_of(comparison, document.totals)))


# -- rendering ----------------------------------------------------------------------------------------------


def _asset(name: str) -> str:
    return (resources.files(__package__) / "templates" / name).read_text(encoding="utf-8")


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def render_html(document: ReportDocument, comparison: RegressionReport | None = None) -> str:
    """The report as one self-contained HTML page; ``comparison`` (:func:`~pytest_bineval.report.document.diff_reports`;
    default: the document's own comparison with ``--bineval-baseline``) marks what changed since a baseline."""
    import jinja2
    from markupsafe import Markup

    view = build_view(document, comparison)
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("pytest_bineval.outputs", "templates"),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    style = _asset("report.css") + _asset("labels.css")  # labelling: outputs/labelling_html.py
    script = _asset("report.js") + _asset("labels.js")
    for text in (style, script):
        if "</" in text:  # would end the inline element early
            raise AssertionError("an inline asset of the HTML report must not contain '</'")
    csp = (f"default-src 'none'; style-src {_csp_hash(style)}; script-src {_csp_hash(script)}; "
           "img-src data:; base-uri 'none'; form-action 'none'")
    from .terminal import flip_note
    from .verdict import suite_text

    return env.get_template("report.html.j2").render(
        view=view, doc=document, totals=document.totals, style=Markup(style), script=Markup(script), csp=csp,
        labelling=LabellingView.of(document), flip_note=flip_note, suite_text=suite_text)


def write_html(path: str | os.PathLike[str], document: ReportDocument,
               comparison: RegressionReport | None = None) -> Path:
    """Render and write atomically (a reader never sees half a page); returns the path written."""
    return write_text_atomic(path, render_html(document, comparison))
