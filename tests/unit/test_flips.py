"""Confirming flipped questions (pytest_bineval.flips), as pure functions: the bound of a flip of noise, the plans
for few and many flips, the order of the fresh asks and what they decide, and an exact check that the sequential
asks (stopping early) confirm a flip of noise no more often than the bound."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from pytest_bineval.flips import (
    FLIP_ASKS,
    FlipPlan,
    bound,
    flip_plan,
    flip_status,
    next_ask,
)
from pytest_bineval.models import Answer


@pytest.mark.parametrize(("k", "j", "value"), [
    (3, 0, Fraction(1, 64)),  # all 3 new asks no and all 3 baseline asks yes at p = 1/2: (1/8)^2
    (8, 0, Fraction(1, 4 ** 8)),
    (8, 1, Fraction(9, 256) ** 2),  # P(Bin(8, 1/2) <= 1) = (1 + 8) / 256
    (10, 2, Fraction(56, 1024) ** 2),  # (1 + 10 + 45) / 1024
])
def test_bound_hand_computed(k: int, j: int, value: Fraction) -> None:
    assert bound(k, j) == value


@pytest.mark.parametrize(("k", "j"), [(3, 0), (8, 1), (10, 2), (12, 3)])
def test_the_bound_is_the_largest_chance_over_the_judges_yes_rate(k: int, j: int) -> None:
    """P(Bin(k, p) <= j) x P(Bin(k, p) >= k - j) is largest at p = 1/2 (scipy's binomial, on a fine grid)."""
    from scipy.stats import binom

    grid = [i / 2000 for i in range(2001)]
    worst = max(binom.cdf(j, k, p) * binom.sf(k - j - 1, k, p) for p in grid)
    assert worst == pytest.approx(float(bound(k, j)), rel=1e-9)


@pytest.mark.parametrize("flips", [1, 2, 3, 4, 12, 40, 100, 300, 1000, 10_000])
def test_every_plan_reaches_its_level(flips: int) -> None:
    plan = flip_plan(0.025, flips)
    assert plan.level == pytest.approx(0.025 / flips)
    assert plan.bound <= plan.level
    assert 0 <= plan.tolerance < plan.asks / 2
    assert plan.asks <= FLIP_ASKS or plan.tolerance == 0  # beyond the budget only as far as the level needs


def test_plans_for_the_issues_scenario_and_for_many_flips() -> None:
    # 12 flips (4 cases x 3 groundedness questions) at alpha / 2 = 0.025: each at 0.025 / 12 = 0.00208; with 8 asks
    # per side, one answer against the flip is allowed: (9/256)^2 = 0.00124
    plan = flip_plan(0.025, 12)
    assert (plan.asks, plan.tolerance) == (8, 1)
    assert plan.most_asks == 14
    # 10 000 flips: 2.5e-6 each; only unanimity reaches it, with 10 asks: 4^-10 = 9.5e-7
    plan = flip_plan(0.025, 10_000)
    assert (plan.asks, plan.tolerance) == (10, 0)
    # a million: the budget is exceeded as far as needed (4^-11 = 2.4e-7 > 2.5e-8; 4^-13 = 1.5e-8)
    plan = flip_plan(0.025, 1_000_000)
    assert (plan.asks, plan.tolerance) == (13, 0)


def test_bad_plans_are_refused() -> None:
    with pytest.raises(ValueError, match="alpha"):
        flip_plan(0.0, 3)
    with pytest.raises(ValueError, match="re-ask"):
        flip_plan(0.05, 3, asks=0)


def _play(plan: FlipPlan, new: list[Answer], baseline: list[Answer]) -> tuple[str, list[str]]:
    """Ask as next_ask says, taking the answers of each side in order; returns the status and the sides asked."""
    asked: dict[str, list[Answer]] = {"new": [], "baseline": []}
    script = {"new": iter(new), "baseline": iter(baseline)}
    order = []
    while (side := next_ask(plan, asked["new"], asked["baseline"])) is not None:
        order.append(side)
        asked[side].append(next(script[side]))
    return flip_status(plan, asked["new"], asked["baseline"]), order


def test_a_steady_regression_is_confirmed_after_k_minus_j_asks_per_side() -> None:
    plan = FlipPlan(asks=8, tolerance=1, flips=12, alpha=0.025, level=0.025 / 12, bound=float(bound(8, 1)))
    status, order = _play(plan, ["no"] * 8, ["yes"] * 8)
    assert status == "confirmed"
    assert order == ["new", "baseline"] * 7  # the sides alternate; 7 agreeing answers each decide it


def test_a_judge_that_says_yes_on_re_asking_is_unstable_at_once() -> None:
    plan = flip_plan(0.025, 12)  # j = 1
    status, order = _play(plan, ["yes", "yes"], ["yes"] * 8)
    assert status == "unstable"
    assert order == ["new", "baseline", "new"]  # two yes about the new output: more than j = 1 against the flip


def test_a_baseline_that_was_a_lucky_yes_is_unstable() -> None:
    plan = flip_plan(0.025, 40)  # j = 1 with 9 asks
    status, _ = _play(plan, ["no"] * 9, ["no", "yes", "no"])
    assert status == "unstable"


def test_one_answer_against_the_flip_within_the_tolerance_still_confirms() -> None:
    plan = flip_plan(0.025, 12)  # 8 asks, j = 1
    status, order = _play(plan, ["no", "yes"] + ["no"] * 6, ["yes"] * 8)
    assert status == "confirmed"
    assert order.count("new") == 8 and order.count("baseline") == 7


def test_a_judge_error_on_a_re_ask_is_an_error_never_a_pass() -> None:
    plan = flip_plan(0.025, 12)
    assert flip_status(plan, ["no", "error"], ["yes"]) == "error"
    assert flip_status(plan, ["no"], ["error"]) == "error"
    assert next_ask(plan, ["error"], []) is None


def test_the_sequential_asks_confirm_noise_no_more_often_than_the_bound() -> None:
    """The exact chance that the asks as next_ask orders them (stopping early) end confirmed, when both outputs
    have the same yes-rate p: a sum over every path of the process, in exact fractions. It equals the fixed-design
    chance P(Bin(k, p) <= j) P(Bin(k, p) >= k - j), so at most bound(k, j), reached at p = 1/2."""

    def confirm_chance(plan: FlipPlan, p: Fraction) -> Fraction:
        def walk(new: list[Answer], baseline: list[Answer]) -> Fraction:
            side = next_ask(plan, new, baseline)
            if side is None:
                return Fraction(int(flip_status(plan, new, baseline) == "confirmed"))
            if side == "new":
                return p * walk([*new, "yes"], baseline) + (1 - p) * walk([*new, "no"], baseline)
            return p * walk(new, [*baseline, "yes"]) + (1 - p) * walk(new, [*baseline, "no"])
        return walk([], [])

    for k, j in [(3, 0), (5, 1), (6, 2)]:
        plan = FlipPlan(asks=k, tolerance=j, flips=1, alpha=0.5, level=0.5, bound=float(bound(k, j)))
        for p in (Fraction(1, 10), Fraction(1, 3), Fraction(1, 2), Fraction(4, 5)):
            chance = confirm_chance(plan, p)
            tail = sum(math.comb(k, i) * p ** i * (1 - p) ** (k - i) for i in range(j + 1))  # new: <= j yes
            upper = sum(math.comb(k, i) * p ** (k - i) * (1 - p) ** i for i in range(j + 1))  # baseline: <= j no
            assert chance == tail * upper
            assert chance <= bound(k, j)
        assert confirm_chance(plan, Fraction(1, 2)) == bound(k, j)
