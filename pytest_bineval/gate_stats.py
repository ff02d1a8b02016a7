"""Is a dimension's drop against the baseline beyond the judge's own noise? Exact tests on the paired answers.

Each question asked in both runs (matched by :mod:`pytest_bineval.baseline`) is a pair of answers. Asked once per
run, the pairs are a 2x2 table of which only the discordant cells matter: ``b`` questions went yes -> no,
``c`` went no -> yes. **McNemar's exact test**: under "no change", each discordant pair is yes -> no with
probability 1/2, so ``b`` ~ Binomial(b + c, 1/2); the p-value is the two-sided binomial test of ``b``.

Asked several times (``--bineval-repeats``), every answer is counted: the yes and no counts of the baseline and
of this run make a 2x2 table, and **Fisher's exact test** (two-sided) gives the p-value.

A dimension is *regressed* when its score fell, the p-value is below ``alpha`` (``--bineval-alpha``, default
0.05) and the drop is larger than the tolerance; a drop that is not significant is *within noise*. Note what
this means for small checklists: with 5 questions, even 5 of 5 flipping from yes to no gives p = 2 x 1/32 =
0.0625, within noise at alpha 0.05; the test says such a checklist cannot tell a regression from the judge's
flips, and ``--bineval-fail-on-regression=any`` still acts on any flip.

Both are computed exactly with integer binomial coefficients (:func:`math.comb`), the same values as
``scipy.stats.binomtest`` and ``scipy.stats.fisher_exact`` (the unit tests check them against scipy): importing
scipy (numpy) inside a pytest run breaks pytester's in-process runs of a plugin's own test suite, which drop the
modules first imported during a run and cannot load numpy a second time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .models import Verdict

DEFAULT_ALPHA = 0.05


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided p-value of McNemar's exact test for ``b`` yes -> no and ``c`` no -> yes pairs (1.0 without any)."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return min(1.0, tail / (1 << (n - 1)))  # 2 * tail / 2^n


def fisher_exact(yes_before: int, answers_before: int, yes_after: int, answers_after: int) -> float:
    """Two-sided p-value of Fisher's exact test on (yes, no) counts of the baseline and of this run."""
    if answers_before == 0 or answers_after == 0:
        return 1.0
    # P(a) of the table [[a, r1 - a], [yes - a, ...]] with the observed margins is C(yes, a) C(N - yes, r1 - a)
    # / C(N, r1); the p-value sums the tables no more likely than the observed one (exact integer comparison)
    r1, total, yes = answers_before, answers_before + answers_after, yes_before + yes_after
    weights = {a: math.comb(yes, a) * math.comb(total - yes, r1 - a)
               for a in range(max(0, yes - answers_after), min(r1, yes) + 1)}
    observed = weights[yes_before]
    return min(1.0, sum(w for w in weights.values() if w <= observed) / math.comb(total, r1))


@dataclass(frozen=True)
class DimensionTest:
    """The exact test of one dimension of one evaluation against the baseline."""

    test: str  # "mcnemar" or "fisher" (or "none": no answered question in both runs)
    p_value: float
    yes_to_no: int  # questions (McNemar) that went yes -> no
    no_to_yes: int
    pairs: int  # questions answered in both runs


def _counts(v: Verdict) -> tuple[int, int]:
    answers = [a for a in (v.repeats or [v.answer]) if a in ("yes", "no")]
    return sum(a == "yes" for a in answers), len(answers)


def dimension_test(pairs: Sequence[tuple[Verdict, Verdict]]) -> DimensionTest:
    """McNemar on the paired answers, or Fisher on the answer counts when either run asked a question more than
    once; pairs with a judge error are left out."""
    answered = [(b, a) for b, a in pairs if b.answer in ("yes", "no") and a.answer in ("yes", "no")]
    down = sum(b.answer == "yes" and a.answer == "no" for b, a in answered)
    up = sum(b.answer == "no" and a.answer == "yes" for b, a in answered)
    if not answered:
        return DimensionTest("none", 1.0, 0, 0, 0)
    if any(len(b.repeats) > 1 or len(a.repeats) > 1 for b, a in answered):
        yb = nb = ya = na = 0
        for b, a in answered:
            y, n = _counts(b)
            yb, nb = yb + y, nb + n
            y, n = _counts(a)
            ya, na = ya + y, na + n
        return DimensionTest("fisher", fisher_exact(yb, nb, ya, na), down, up, len(answered))
    return DimensionTest("mcnemar", mcnemar_exact(down, up), down, up, len(answered))
