"""Asking every question more than once (``--bineval-repeats K``): one evaluation from K evaluations of the
same checklist, and the 95% Wilson interval of a share of yes answers.

A repeated question keeps every repeat's answer (:attr:`Verdict.repeats`); its ``answer`` is the majority
(``no`` on a tie: the conservative reading, which also puts the question among the failing ones with its
explanation), and ``error`` when any repeat got no answer (a judge failure is never hidden by the other
repeats). A dimension's score is the share of yes over its answered questions x repeats.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .models import Answer, Evaluation, Usage, Verdict

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile: a two-sided 95% interval


def wilson_interval(yes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of ``yes`` successes in ``n`` trials; None when ``n`` is 0."""
    if n <= 0:
        return None
    if not 0 <= yes <= n:
        raise ValueError(f"yes must be within [0, n], not {yes} of {n}")
    p = yes / n
    z2 = z * z
    denominator = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, center - half), min(1.0, center + half)


def combine_verdicts(verdicts: Sequence[Verdict]) -> Verdict:
    """One verdict from the repeats of one question (at least one)."""
    if not verdicts:
        raise ValueError("no verdict to combine")
    answers: list[Answer] = [v.answer for v in verdicts]
    cached = all(v.cached for v in verdicts)
    failed = next((v for v in verdicts if v.answer == "error"), None)
    if failed is not None:
        return failed.model_copy(update={"repeats": answers, "agreement": None, "cached": cached})
    yes = answers.count("yes")
    no = len(answers) - yes
    majority: Answer = "yes" if yes > no else "no"
    chosen = next(v for v in verdicts if v.answer == majority)
    ps = [v.p_yes for v in verdicts]
    p_yes = None if any(p is None for p in ps) else sum(p for p in ps if p is not None) / len(ps)
    return chosen.model_copy(update={
        "repeats": answers, "agreement": max(yes, no) / len(answers), "p_yes": p_yes, "cached": cached,
    })


def combine_repeats(evaluations: Sequence[Evaluation], seconds: float | None = None) -> Evaluation:
    """One evaluation from the repeats of one (each the same checklist's questions, in the same order)."""
    if not evaluations:
        raise ValueError("no evaluation to combine")
    first = evaluations[0]
    if len(evaluations) == 1:
        return first
    for other in evaluations[1:]:
        if [(v.question_id, v.turn) for v in other.verdicts] != [(v.question_id, v.turn) for v in first.verdicts]:
            raise ValueError("repeats of one evaluation must answer the same questions in the same order")
    verdicts = [combine_verdicts(group) for group in zip(*(e.verdicts for e in evaluations), strict=True)]
    usage = Usage.total(e.usage for e in evaluations)
    if seconds is not None:
        usage.seconds = seconds
    return first.model_copy(update={"verdicts": verdicts, "usage": usage})
