"""Did this case get worse? Confirming a question that flipped from yes (baseline) to no (this run), as pure
functions: the plan of re-asks, the next one to make, and what the answers decide.

A flip is selected by its first answers (the baseline said yes, this run no), so those answers cannot also be the
evidence: under the judge's noise alone, a borderline question flips often. The evidence is **fresh asks**: the
judge is asked the question again about this run's output (*new* side) and about the baseline's output, which the
report keeps (*baseline* side), up to ``k`` times each. The flip is a **confirmed regression** when at most ``j``
of the new side's ``k`` answers are yes and at most ``j`` of the baseline side's ``k`` answers are no; as soon as
either side has more than ``j`` answers against the flip, it is **unstable** (the judge's noise) and the asks
stop. A side stops early too once ``k - j`` of its answers agree with the flip: the rest could not change the
outcome. So a real regression costs at most ``2 (k - j)`` asks with a steady judge, and a flip of noise usually a
few.

**Why it is safe.** Under "no change" the question's yes-rate p is the same for both outputs (or higher now), and
the fresh asks are independent of the selection. The chance of confirming is then
``P(Bin(k, p) <= j) x P(Bin(k, p) >= k - j)``: each factor is log-concave in p and the product is symmetric
around 1/2, so its largest value is at p = 1/2: ``bound(k, j) = P(Bin(k, 1/2) <= j)^2``. With ``F`` flips examined
in the run, each is confirmed at level ``alpha_flips / F`` (Bonferroni): the chance that the run shows any
confirmed regression without a real change is at most ``alpha_flips``, however many flips there are and however
they depend on each other. The gate gives this question ``alpha / 2`` (the suite-level test of
:mod:`pytest_bineval.gate_stats` the other half). :func:`flip_plan` picks ``k`` (the budget, :data:`FLIP_ASKS`,
raised only as far as needed for the level to be reachable: one more ask per side roughly per fourfold increase
of ``F``) and the largest ``j`` that keeps ``bound(k, j)`` within the level.

A judge failure on a re-ask makes the flip an *error* (never confirmed, never noise).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from .models import Answer

FLIP_ASKS = 10  # the default budget: fresh asks of each output per flipped question, at most
REFERENCE_NOISE = 0.1  # the judge noise a plan is chosen for: 1 in 10 answers about a clear question wrong
MAX_FLIP_ASKS = 40  # k never grows past this (4^-40: a level no run of flips needs)

FlipSide = Literal["new", "baseline"]
FlipStatus = Literal["pending", "confirmed", "unstable", "error"]


def binomial_cdf_half(k: int, j: int) -> Fraction:
    """P(Bin(k, 1/2) <= j), exactly."""
    return Fraction(sum(math.comb(k, i) for i in range(j + 1)), 2 ** k) if j >= 0 else Fraction(0)


def bound(k: int, j: int) -> Fraction:
    """The largest chance, over the judge's yes-rate, that a flip of pure noise is confirmed with ``k`` asks per
    side and at most ``j`` answers against the flip per side."""
    return binomial_cdf_half(k, j) ** 2


@dataclass(frozen=True)
class FlipPlan:
    """How each flipped question of a run is confirmed."""

    asks: int  # k: fresh asks of each output, at most
    tolerance: int  # j: answers against the flip allowed on each side
    flips: int  # F: flips examined in the run
    alpha: float  # alpha_flips: the chance of any confirmed regression without a real change, at most
    level: float  # alpha / F: each flip's level
    bound: float  # bound(asks, tolerance) <= level

    @property
    def most_asks(self) -> int:
        """Asks a confirmed flip costs with a steady judge: k - j per side."""
        return 2 * (self.asks - self.tolerance)


def _tolerance(k: int, level: Fraction) -> int:
    """The largest j (fewer than half of k) with bound(k, j) <= level; -1 if none."""
    j = -1
    while j + 1 < (k + 1) // 2 and bound(k, j + 1) <= level:
        j += 1
    return j


def flip_power(k: int, j: int, noise: float = REFERENCE_NOISE) -> float:
    """The chance that a real regression (yes-rate 1 - noise before, noise now) is confirmed."""
    side = sum(math.comb(k, i) * noise ** i * (1 - noise) ** (k - i) for i in range(j + 1))
    return side * side


def flip_plan(alpha: float, flips: int, asks: int = FLIP_ASKS) -> FlipPlan:
    """The plan for ``flips`` flips at a total level ``alpha``: of the plans with at most ``asks`` per side that
    reach the level, the one most likely to confirm a real regression of a judge with :data:`REFERENCE_NOISE`
    (the fewer asks on a tie); when none reaches it, the fewest asks with ``j = 0`` that do."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha is within (0, 1), not {alpha}")
    if asks < 1:
        raise ValueError(f"a flip needs at least one re-ask per side, not {asks}")
    level = Fraction(alpha) / max(1, flips)
    best: tuple[float, int, int] | None = None
    for k in range(1, asks + 1):
        j = _tolerance(k, level)
        if j >= 0 and (best is None or flip_power(k, j) > best[0] + 1e-12):
            best = (flip_power(k, j), k, j)
    if best is None:
        k = asks
        while bound(k, 0) > level:
            k += 1
            if k > MAX_FLIP_ASKS:
                raise ValueError(f"no plan of at most {MAX_FLIP_ASKS} asks reaches the level {float(level):.3g}")
        best = (flip_power(k, 0), k, 0)
    _, k, j = best
    return FlipPlan(asks=k, tolerance=j, flips=flips, alpha=alpha, level=float(level), bound=float(bound(k, j)))


def _against(side: FlipSide, answers: Sequence[Answer]) -> int:
    return list(answers).count("yes" if side == "new" else "no")


def _agree(side: FlipSide, answers: Sequence[Answer]) -> int:
    return list(answers).count("no" if side == "new" else "yes")


def flip_status(plan: FlipPlan, new: Sequence[Answer], baseline: Sequence[Answer]) -> FlipStatus:
    """What the fresh asks so far decide: *error* (a re-ask failed), *unstable* (a side has more than ``j``
    answers against the flip), *confirmed* (each side has ``k - j`` answers agreeing with it) or *pending*."""
    if "error" in new or "error" in baseline:
        return "error"
    if _against("new", new) > plan.tolerance or _against("baseline", baseline) > plan.tolerance:
        return "unstable"
    done = plan.asks - plan.tolerance
    if _agree("new", new) >= done and _agree("baseline", baseline) >= done:
        return "confirmed"
    return "pending"


def next_ask(plan: FlipPlan, new: Sequence[Answer], baseline: Sequence[Answer]) -> FlipSide | None:
    """The side to ask next (None: decided): the side that is not done yet with fewer asks, the new one first
    (a flip of noise usually shows itself on either side within a few asks, so the sides alternate)."""
    if flip_status(plan, new, baseline) != "pending":
        return None
    done = plan.asks - plan.tolerance
    open_sides: list[tuple[int, int, FlipSide]] = []
    if _agree("new", new) < done:
        open_sides.append((len(new), 0, "new"))
    if _agree("baseline", baseline) < done:
        open_sides.append((len(baseline), 1, "baseline"))
    return min(open_sides)[2]
