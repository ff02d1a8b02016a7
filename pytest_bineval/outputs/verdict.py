"""The outcome of a run in a few parts, the same words in every output (terminal, job summary, HTML page, PR
comment), in the same order: the cases confirmed regressed, the suite-level verdict of each dimension, the flips
that could not be settled, the threshold failures. Pure functions of the finished document; plain text (each
output escapes and styles it). Nothing is softened: a run with a confirmed regression, a regressed dimension or a
test below its threshold never reads as fine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..report.comparison import names, p_text

if TYPE_CHECKING:
    from ..report.comparison import RegressionReport, SuiteDimension
    from ..report.document import ReportDocument, Totals


@dataclass(frozen=True)
class Part:
    """One part of the outcome; ``bad``: it fails the run (or its tests)."""

    text: str
    bad: bool


def _n(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else plural or word + 's'}"


def _points(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.0f} points"


def suite_text(s: SuiteDimension) -> str:
    """``groundedness regressed across the suite (0.92 -> 0.69 over 13 evaluations, p = 0.012)``, ``tone: no
    detectable change (p = 0.62; detects a drop of 6 points)``, ``tone: uninformative (p = 1; could miss a drop of
    28 points)``."""
    scores = (f"{s.before:.2f} -> {s.after:.2f} over {_n(s.evaluations, 'evaluation')}"
              if s.before is not None and s.after is not None else _n(s.evaluations, "evaluation"))
    if s.verdict == "regressed":
        return f"{s.name} regressed across the suite ({scores}, p = {p_text(s.p_adjusted)})"
    if s.verdict == "no detectable change":
        return (f"{s.name}: no detectable change ({scores}, p = {p_text(s.p_adjusted)}; a drop of "
                f"{_points(s.detectable)} would show)")
    miss = (f"it could miss a drop of {_points(s.detectable)}" if s.detectable is not None
            else "no drop its scores leave room for would show")
    return f"{s.name}: uninformative ({scores}, p = {p_text(s.p_adjusted)}; {miss})"


def comparison_parts(diff: RegressionReport) -> list[Part]:
    """The comparison's parts: confirmed regressions, each dimension's suite-level verdict, unsettled flips."""
    parts: list[Part] = []
    cases = diff.regressed_cases()
    if cases:
        parts.append(Part(f"{_n(len(cases), 'case')} regressed (confirmed): {names([d.key for d in cases])}", True))
    else:
        noise = len(diff.flips("unstable", "same input"))
        tail = f" ({_n(noise, 'flip')} of the judge's noise)" if noise else ""
        parts.append(Part(f"no confirmed regression{tail}", False))
    parts += [Part(suite_text(s), s.verdict == "regressed") for s in diff.suite]
    errors = len(diff.flips("error"))
    if errors:
        parts.append(Part(f"{_n(errors, 'flipped question')} got a judge error on re-asking", True))
    unsettled = len(diff.flips("unconfirmed", "pending"))
    if unsettled:
        parts.append(Part(f"{_n(unsettled, 'flipped question')} could not be confirmed", True))
    return parts


def threshold_part(t: Totals) -> Part:
    """``2 of 13 evaluations below threshold, 1 judge error`` or ``all 13 evaluations meet their thresholds``."""
    bad = [f"{t.failed} of {t.evaluations} evaluations below threshold" if t.failed else "",
           _n(t.errors, "judge error") if t.errors else "",
           f"{_n(t.unscored_tests, 'test')} not scored" if t.unscored_tests else ""]
    said = [b for b in bad if b]
    if said:
        return Part(", ".join(said), True)
    if t.evaluations == 1:
        return Part("the 1 evaluation meets its thresholds", False)
    return Part(f"all {t.evaluations} evaluations meet their thresholds", False)


def parts_of(diff: RegressionReport | None, totals: Totals) -> list[Part]:
    """The run's outcome, most important first."""
    parts = comparison_parts(diff) if diff is not None else [Part("not compared with a baseline", False)]
    return [*parts, threshold_part(totals)]


def outcome(document: ReportDocument) -> list[Part]:
    """The outcome of a finished document (:func:`parts_of`)."""
    return parts_of(document.regressions, document.totals)


def headline(document: ReportDocument) -> str:
    """The outcome on one line: the parts joined by `` · ``."""
    return " · ".join(p.text for p in outcome(document))
