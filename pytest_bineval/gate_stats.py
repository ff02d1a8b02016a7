"""Did the suite get worse? The suite-level question of the regression gate, per dimension, as pure functions.

The unit of the test is the **evaluation**, never the question nor the answer. For each compared evaluation and
dimension, each question answered in both runs gives its yes-rate in each run (the share of yes of its answers: 1
or 0 when asked once, k/K with ``--bineval-repeats K``); the evaluation's **paired change** is the mean over its
questions of (rate now - rate in the baseline): the change of its score on the questions both runs asked. Repeats
of one question are one observation (its rate), the questions of one evaluation are one cluster (their mean):
when an answer invents a policy, all its groundedness questions fail together, and counting them as independent
draws would manufacture significance (arXiv 2411.00640, "Adding Error Bars to Evals", on clustered errors).

**The test**: a one-sided **sign-flip permutation test** (Fisher-Pitman, paired) on the evaluations' changes.
Under "no change", which of the two runs is the baseline is a coin toss for each evaluation, independently: each
change is as likely to have the opposite sign. The statistic is the sum of the changes (n times the dimension's
mean change); its p-value is the share of the 2^n sign assignments whose sum is at most the observed one. It is
computed **exactly** (a subset-sum count over the changes as integers, in Python's big integers) when that fits in
:data:`EXACT_BITS`, and otherwise by :data:`MC_DRAWS` seeded random sign assignments, p = (1 + hits) / (1 + draws)
(both valid: the p-value is never below the exact one's level). An evaluation with no change takes no part.

**Several dimensions** are corrected together with Holm's step-down method, and the gate's two questions (this
one, and the flipped questions of :mod:`pytest_bineval.flips`) share alpha: each gets alpha / 2, so the whole
gate's false-alarm rate is at most alpha. :func:`suite_verdicts` reports the adjusted p-value (Holm, times 2),
which compares with alpha directly.

**Too small to tell**: a dimension that did not regress is called *uninformative* unless the suite could have seen
a drop of :data:`MEANINGFUL_DROP` (10 points): :func:`detectable_drop` is the smallest drop (in whole points of the
dimension's mean score) that the test detects with probability :data:`DETECT_POWER` at the most stringent level
Holm could apply to it, estimated by injecting drops into this run's own answers: each question answered yes now
turns to no with the probability that lowers the mean score by that much (spread over the suite: a drop
concentrated in a few cases is harder for this test and is the per-case question's job).

Everything here is integer or pure-Python arithmetic (:mod:`fractions`, :mod:`math`, :mod:`random`): importing
scipy (numpy) inside a pytest run breaks pytester's in-process runs of a plugin's own test suite, which drop the
modules first imported during a run and cannot load numpy a second time. The unit tests check the values against
brute-force enumeration and scipy.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist
from typing import Literal

DEFAULT_ALPHA = 0.05
MEANINGFUL_DROP = 0.10  # a suite that cannot detect a drop of 10 points of a dimension's mean score is uninformative
DETECT_POWER = 0.8  # the power at which a drop counts as detectable
POWER_SIMULATIONS = 100  # injected drops per step of detectable_drop's search
EXACT_BITS = 1 << 28  # the exact count's work (changes x sums x bits per count) beyond which it is Monte Carlo
MC_DRAWS = 20000  # random sign assignments of the Monte Carlo p-value
NORMAL_FROM = 40  # in detectable_drop's simulations only: a normal approximation from this many nonzero changes

Pair = tuple[int, int, int, int]  # one question asked in both runs: (yes before, answers before, yes now, answers now)
SuiteVerdictKind = Literal["regressed", "no detectable change", "uninformative"]


def paired_change(pairs: Iterable[Pair]) -> Fraction | None:
    """The mean over ``pairs`` of (yes-rate now - yes-rate before): an evaluation's change on one dimension, on the
    questions both runs answered (None without any). Exact (a :class:`~fractions.Fraction`)."""
    used = [p for p in pairs if p[1] > 0 and p[3] > 0]
    if not used:
        return None
    m = math.lcm(*(n for _, nb, _, na in used for n in (nb, na)))
    return Fraction(sum(ya * (m // na) - yb * (m // nb) for yb, nb, ya, na in used), m * len(used))


@dataclass(frozen=True)
class SignFlip:
    """The one-sided sign-flip test of a set of paired changes: is their sum lower than chance allows?"""

    p_value: float
    changes: int  # evaluations with a change (the others take no part)
    exact: bool  # exact enumeration, or Monte Carlo with `draws` draws
    draws: int = 0


def _integers(changes: Sequence[Fraction]) -> list[int]:
    scale = math.lcm(*(c.denominator for c in changes))
    return [int(c * scale) for c in changes]


def count_at_most(values: Sequence[int], limit: int) -> int:
    """How many of the 2^n subsets of ``values`` (non-negative integers) sum to at most ``limit``: the coefficients
    of prod(1 + x^v) up to x^limit, summed. The polynomial's cumulative sums are packed into one big integer, a
    slot of n + 1 bits per power of x, so each factor is one shift and one add done by CPython in C."""
    if limit < 0:
        return 0
    width = len(values) + 1  # a count is at most 2^n
    slots = limit + 1
    mask = (1 << (slots * width)) - 1
    packed = mask // ((1 << width) - 1)  # 1 in every slot: the empty subset, cumulated
    for v in values:
        if 0 < v < slots:
            packed = (packed + (packed << (v * width))) & mask
        elif v == 0:
            packed <<= 1  # a zero value doubles every count
    return packed >> (limit * width)


def sign_flip_test(changes: Sequence[Fraction], *, seed: int = 0, exact_bits: int = EXACT_BITS,
                   draws: int = MC_DRAWS) -> SignFlip:
    """One-sided (lower tail) p-value of the sum of ``changes`` under random sign flips: the share of the 2^n sign
    assignments of their sizes whose sum is at most the observed sum (ties count: the test is never liberal)."""
    nonzero = [c for c in changes if c != 0]
    if not nonzero:
        return SignFlip(1.0, 0, True)
    return sign_flip_integers(_integers(nonzero), seed=seed, exact_bits=exact_bits, draws=draws)


def sign_flip_integers(values: Sequence[int], *, seed: int = 0, exact_bits: int = EXACT_BITS,
                       draws: int = MC_DRAWS) -> SignFlip:
    """:func:`sign_flip_test` of changes given as integers (over a common denominator). A sign assignment's sum is
    2 x (sum of the sizes given +) - sum(sizes), so the count is the number of subsets of the sizes whose sum is at
    most the sum of the positive changes."""
    sizes = [abs(v) for v in values if v]
    if not sizes:
        return SignFlip(1.0, 0, True)
    positive = sum(v for v in values if v > 0)
    n = len(sizes)
    if n * (positive + 1) * (n + 1) <= exact_bits:
        return SignFlip(count_at_most(sizes, positive) / 2 ** n, n, True)
    # Monte Carlo: of the changes of one size, how many get + is a popcount of random bits
    sizes_count = collections.Counter(sizes)
    rng = random.Random(seed)
    hits = 0
    for _ in range(draws):
        if sum(v * rng.getrandbits(m).bit_count() for v, m in sizes_count.items()) <= positive:
            hits += 1
    return SignFlip((1 + hits) / (1 + draws), n, False, draws)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (same order as given): reject hypothesis i at level alpha when its
    adjusted p-value is below alpha; the family-wise error rate is at most alpha under any dependence."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def _approximate_p(changes: Sequence[float]) -> float:
    """The sign-flip p-value by the normal approximation of its sum (used only to simulate power, for many
    changes): the sum over random signs has mean 0 and variance sum(c^2)."""
    variance = sum(c * c for c in changes)
    if variance == 0:
        return 1.0
    return NormalDist().cdf(sum(changes) / math.sqrt(variance))


def _rejects(numerators: Sequence[int], denominators: Sequence[int], level: float) -> bool:
    """Whether the sign-flip test rejects at ``level`` the changes numerators[i] / denominators[i]: exactly for
    few changes, by the normal approximation for many."""
    nonzero = [(a, b) for a, b in zip(numerators, denominators, strict=True) if a]
    if len(nonzero) < NORMAL_FROM:
        return bool(nonzero) and sign_flip_test([Fraction(a, b) for a, b in nonzero], draws=2000).p_value < level
    return _approximate_p([a / b for a, b in nonzero]) < level


@dataclass(frozen=True)
class _Cluster:
    """An evaluation's pairs as integers over a common denominator, for injecting drops fast."""

    denominator: int
    before: tuple[int, ...]  # each question's rate in the baseline, over `denominator`
    after: tuple[int, ...]  # and now

    @classmethod
    def of(cls, pairs: Sequence[Pair]) -> _Cluster:
        m = math.lcm(*(n for _, nb, _, na in pairs for n in (nb, na)))
        return cls(m * len(pairs), tuple(yb * (m // nb) for yb, nb, _, _ in pairs),
                   tuple(ya * (m // na) for _, _, ya, na in pairs))


def detectable_drop(clusters: Sequence[Sequence[Pair]], level: float, *, power: float = DETECT_POWER,
                    simulations: int = POWER_SIMULATIONS, seed: int = 0) -> float | None:
    """The smallest drop of the dimension's mean score, in whole points (0.01), that :func:`sign_flip_test` at
    ``level`` detects with probability ``power`` in ``clusters`` (each an evaluation's question pairs); None when
    no drop the scores leave room for is detected that often.

    Each simulation draws the judge's noise from this run's own answers, as the test's null hypothesis does: each
    evaluation's two runs are swapped or not, with probability 1/2 (with no change, either order is as likely as
    the one observed). A drop of d is then injected into the later run: every question with yes answers turns to
    all-no with probability d / (the mean score), which lowers the mean score by d on average. The same random
    numbers serve every d (common random numbers), so the detected share grows with d (the test's p-value only
    falls when a change falls) and the search is a bisection."""
    used = [_Cluster.of(ps) for ps in ([p for p in c if p[1] > 0 and p[3] > 0] for c in clusters) if ps]
    if not used:
        return None
    mean = sum(Fraction(sum(c.before) + sum(c.after), 2 * c.denominator) for c in used) / len(used)
    top = int(mean * 100)  # the largest whole-point drop the scores leave room for
    if top < 1:
        return None
    rng = random.Random(seed)
    # per simulation and evaluation: the earlier run's sum, and the later run's questions with yes answers ordered
    # by a random number, largest first, with the running sums of their rates: the questions kept at chance c are
    # those whose number is >= c, a prefix
    sims: list[list[tuple[int, list[float], list[int]]]] = []
    for _ in range(simulations):
        sim = []
        for c in used:
            earlier, later = (c.after, c.before) if rng.random() < 0.5 else (c.before, c.after)
            rates = [r for r in later if r]
            keys = sorted(-rng.random() for _ in rates)
            if len(set(rates)) > 1:  # the ranks of the random numbers are a random order of the rates
                rng.shuffle(rates)
            sim.append((sum(earlier), keys, list(itertools.accumulate(rates, initial=0))))
        sims.append(sim)
    needed = math.ceil(power * simulations)
    denominators = [c.denominator for c in used]

    def detected(points: int) -> bool:
        chance = -points / 100 / float(mean)
        hits = 0
        for s, sim in enumerate(sims):
            numerators = [sums[bisect.bisect_right(keys, chance)] - earlier for earlier, keys, sums in sim]
            hits += _rejects(numerators, denominators, level)
            if hits >= needed:
                return True
            if hits + (simulations - s - 1) < needed:
                return False
        return False

    if not detected(top):
        return None
    low, high = 0, top  # detected(high) holds, detected(low) is taken as false
    while high - low > 1:
        mid = (low + high) // 2
        if detected(mid):
            high = mid
        else:
            low = mid
    return high / 100


@dataclass(frozen=True)
class SuiteVerdict:
    """The suite-level answer for one dimension: did its mean score fall beyond the judge's noise?"""

    dimension: str
    verdict: SuiteVerdictKind
    evaluations: int  # evaluations with a question of the dimension answered in both runs
    questions: int  # such questions, over all those evaluations
    change: float  # the mean paired change (points / 100): mean over evaluations of their changes
    p_value: float  # the one-sided sign-flip p-value
    p_adjusted: float  # Holm across the dimensions, times 2 (the gate's two questions): compare with alpha
    exact: bool
    detectable: float | None = None  # the smallest detectable drop (not computed for a regressed dimension)
    detectable_at: float = 0.0  # the level detectable_drop was computed at


@dataclass(frozen=True)
class SuiteTest:
    """The sign-flip test of one dimension, before the verdict."""

    dimension: str
    clusters: list[list[Pair]]  # the evaluations with a question of the dimension answered in both runs
    changes: list[Fraction]
    test: SignFlip
    p_adjusted: float  # Holm across the dimensions, times the gate's shares: compare with alpha

    @property
    def mean(self) -> float:
        return float(sum(self.changes, Fraction(0)) / len(self.changes)) if self.changes else 0.0

    def regressed(self, alpha: float, tolerance: float = 0.0) -> bool:
        return self.p_adjusted < alpha and self.mean < -tolerance - 1e-12


def suite_tests(dimensions: Mapping[str, Sequence[Sequence[Pair]]], *, shares: int = 2,
                seed: int = 0) -> list[SuiteTest]:
    """The test of each dimension (name -> its evaluations' question pairs), sorted by name, with its p-value
    adjusted by Holm across them and multiplied by ``shares`` (how many questions the gate's alpha is split
    between: 2, this one and the flips)."""
    names = sorted(dimensions)
    parts: list[tuple[str, list[list[Pair]], list[Fraction]]] = []
    for name in names:
        clusters = [[p for p in c if p[1] > 0 and p[3] > 0] for c in dimensions[name]]
        clusters = [c for c in clusters if c]
        parts.append((name, clusters, [c for c in map(paired_change, clusters) if c is not None]))
    tests = [sign_flip_test(changes, seed=seed) for _, _, changes in parts]
    adjusted = holm([t.p_value for t in tests])
    return [SuiteTest(name, clusters, changes, test, min(1.0, shares * adj))
            for (name, clusters, changes), test, adj in zip(parts, tests, adjusted, strict=True)]


def suite_verdicts(dimensions: Mapping[str, Sequence[Sequence[Pair]]], *, alpha: float = DEFAULT_ALPHA,
                   tolerance: float = 0.0, meaningful: float = MEANINGFUL_DROP, seed: int = 0,
                   simulations: int = POWER_SIMULATIONS, shares: int = 2) -> list[SuiteVerdict]:
    """The verdict of each dimension (name -> its evaluations' question pairs), sorted by name.

    *regressed*: the adjusted p-value is below ``alpha`` and the mean change is a drop beyond ``tolerance``;
    *no detectable change*: not regressed, and a drop of ``meaningful`` would have been detected (:func:`
    detectable_drop` at alpha / (shares x dimensions), Holm's most stringent step); *uninformative*: neither."""
    tests = suite_tests(dimensions, shares=shares, seed=seed)
    level = alpha / shares / max(1, len(tests))
    verdicts: list[SuiteVerdict] = []
    for t in tests:
        questions = sum(len(c) for c in t.clusters)
        if t.regressed(alpha, tolerance):
            verdicts.append(SuiteVerdict(t.dimension, "regressed", len(t.changes), questions, t.mean,
                                         t.test.p_value, t.p_adjusted, t.test.exact))
            continue
        drop = detectable_drop(t.clusters, level, simulations=simulations, seed=seed)
        kind: SuiteVerdictKind = ("no detectable change" if drop is not None and drop <= meaningful + 1e-12
                                  else "uninformative")
        verdicts.append(SuiteVerdict(t.dimension, kind, len(t.changes), questions, t.mean, t.test.p_value,
                                     t.p_adjusted, t.test.exact, drop, level))
    return verdicts

