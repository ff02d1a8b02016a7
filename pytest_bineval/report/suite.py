"""The data of the gate's two questions in a comparison (:mod:`.comparison`): the suite-level verdict per dimension
(:class:`SuiteDimension`, computed by :func:`suite_dimensions` with :mod:`pytest_bineval.gate_stats` over each
compared evaluation's :func:`rate_pairs`, one cluster per evaluation), and what confirming the flips cost
(:class:`FlipConfirmation`, filled by :mod:`pytest_bineval.gate`)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from ..gate_stats import DEFAULT_ALPHA, MEANINGFUL_DROP, SuiteVerdictKind, suite_verdicts
from ..gate_stats import Pair as RatePair
from ..models import Verdict
from .matching import Pair, same_text


class SuiteDimension(BaseModel):
    """The suite-level answer for one dimension (:func:`pytest_bineval.gate_stats.suite_verdicts`): did its mean
    score over the compared evaluations fall beyond the judge's noise?"""

    name: str
    verdict: SuiteVerdictKind
    evaluations: int = Field(description="compared evaluations with a question of the dimension answered in both runs")
    questions: int = Field(description="such questions, over those evaluations")
    before: float | None = Field(default=None, description="mean score on those questions in the baseline")
    after: float | None = Field(default=None, description="and now")
    change: float = Field(description="mean of the evaluations' paired changes (after - before)")
    p_value: float = Field(description="one-sided sign-flip test over the evaluations")
    p_adjusted: float = Field(description="Holm across the dimensions, x2 (the gate's two questions): vs alpha")
    exact: bool = Field(default=True, description="exact enumeration (else seeded Monte Carlo)")
    detectable: float | None = Field(default=None, description="not regressed: the smallest drop detected with 80% "
                                     "power at detectable_at (None: none the scores leave room for)")
    detectable_at: float = Field(default=0.0, description="the level the detectable drop is computed at")
    meaningful: float = Field(default=MEANINGFUL_DROP, description="uninformative when the detectable drop is larger")


class FlipConfirmation(BaseModel):
    """How the run's flips were confirmed (:mod:`pytest_bineval.flips`) and what it cost."""

    flips: int = Field(description="flips examined by re-asking (F)")
    asks: int = Field(description="k: fresh asks of each output per flip, at most")
    tolerance: int = Field(description="j: answers against the flip allowed per side")
    level: float = Field(description="each flip's level: alpha / 2 / F")
    bound: float = Field(description="the largest chance that a flip of noise is confirmed: at most level")
    reasks: int = Field(default=0, description="fresh asks made (cache hits included)")
    requests: int = Field(default=0, description="requests they sent (cache hits not counted), failed ones included")
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    engine: bool = Field(default=True, description="a judge was there to re-ask (False: bineval report without "
                         "--confirm-flips: every examined flip is unconfirmed)")


def p_text(p: float) -> str:
    """A p-value as text: ``0.031``, ``< 0.001``."""
    return f"{p:.2g}" if p >= 0.001 else "< 0.001"


def _rates(v: Verdict) -> tuple[int, int]:
    """(yes, answers) of a verdict's samples: its repeats, or its one answer (an error counts as none)."""
    samples = [x for x in v.samples if x != "error"] if v.answer != "error" else []
    return samples.count("yes"), len(samples)


def rate_pairs(pairs: Sequence[Pair]) -> dict[str, list[RatePair]]:
    """Dimension -> (yes before, answers before, yes now, answers now) of the questions matched by text."""
    out: dict[str, list[RatePair]] = {}
    for b, a in pairs:
        if not same_text(a, b):
            continue  # a slightly edited question is not the same question
        (yb, nb), (ya, na) = _rates(b), _rates(a)
        if nb and na:
            out.setdefault(a.dimension, []).append((yb, nb, ya, na))
    return out


def suite_dimensions(pairs: Sequence[dict[str, list[RatePair]]], *, alpha: float = DEFAULT_ALPHA,
                     tolerance: float = 0.0) -> list[SuiteDimension]:
    """The suite-level verdict of each dimension over the compared evaluations (each one's :func:`rate_pairs`)."""
    dims: dict[str, list[list[RatePair]]] = {}
    for evaluation in pairs:
        for name, ps in evaluation.items():
            dims.setdefault(name, []).append(ps)
    out = []
    for v in suite_verdicts(dims, alpha=alpha, tolerance=tolerance):
        clusters = dims[v.dimension]

        def mean(side: int, clusters: list[list[RatePair]] = clusters) -> float | None:
            scores = [sum(p[side] / p[side + 1] for p in c) / len(c) for c in clusters if c]
            return sum(scores) / len(scores) if scores else None

        out.append(SuiteDimension(
            name=v.dimension, verdict=v.verdict, evaluations=v.evaluations, questions=v.questions, before=mean(0),
            after=mean(2), change=v.change, p_value=v.p_value, p_adjusted=v.p_adjusted, exact=v.exact,
            detectable=v.detectable, detectable_at=v.detectable_at))
    return out
