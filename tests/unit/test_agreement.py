"""The judge-vs-labels figures (pytest_bineval.agreement): hand-computed values, scipy's Wilson interval, sklearn's
kappa when it is installed, a statsmodels-free reference of the kappa's standard error, and the coverage of the
kappa's interval by simulation."""

from __future__ import annotations

import importlib.util
import math
import random

import pytest

from pytest_bineval.agreement import Agreement, Share, Table, cohen_kappa, kappa_interval, kappa_standard_error
from pytest_bineval.repeats import wilson_interval

# 20 labels: 8 yes (7 judged yes, 1 no), 12 no (2 judged yes, 10 no)
HAND = Table(yes_yes=7, yes_no=1, no_yes=2, no_no=10)


def test_kappa_rates_and_base_rate_by_hand() -> None:
    # p_o = 17/20; p_e = (8 * 9 + 12 * 11) / 400 = 0.51; kappa = (0.85 - 0.51) / 0.49
    assert HAND.n == 20 and HAND.agreed == 17
    assert HAND.chance() == pytest.approx(0.51)
    assert cohen_kappa(HAND) == pytest.approx(0.34 / 0.49)
    a = Agreement.of(HAND)
    assert (a.tpr.k, a.tpr.n, a.tpr.value) == (7, 8, 0.875)
    assert (a.tnr.k, a.tnr.n) == (10, 12) and a.tnr.value == pytest.approx(10 / 12)
    assert a.base_rate.value == pytest.approx(0.4) and a.judge_rate.value == pytest.approx(0.45)
    assert a.agreement.value == pytest.approx(0.85)


def test_wilson_interval_by_hand_and_against_scipy() -> None:
    # p = 0.85, n = 20, z = 1.96: center (0.85 + z^2/40) / (1 + z^2/20) = 0.7936, half-width 0.1540
    low, high = wilson_interval(17, 20)  # type: ignore[misc]
    assert (low, high) == pytest.approx((0.6396, 0.9477), abs=2e-4)
    from scipy.stats import binomtest

    for k, n in [(17, 20), (0, 10), (10, 10), (3, 7), (45, 50), (1, 1)]:
        ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        assert Share.of(k, n).low == pytest.approx(ci.low, abs=1e-9)
        assert Share.of(k, n).high == pytest.approx(ci.high, abs=1e-9)


def test_kappa_standard_error_by_hand_and_against_a_reference() -> None:
    # Fleiss, Cohen & Everitt (1969), worked by hand for HAND: A = 0.40148, B = 0.01362, C = 0.28918,
    # var = (A + B - C) / ((1 - p_e)^2 n) = 0.026223
    assert kappa_standard_error(HAND) == pytest.approx(math.sqrt(0.026223), abs=2e-4)
    for t in [HAND, Table(20, 3, 4, 13), Table(5, 0, 1, 4), Table(30, 10, 10, 30), Table(1, 2, 3, 4)]:
        assert kappa_standard_error(t) == pytest.approx(_statsmodels_std_kappa(t), rel=1e-9)


def _statsmodels_std_kappa(t: Table) -> float:
    """statsmodels.stats.inter_rater.cohens_kappa's std_kappa, transcribed with numpy (statsmodels is not a
    dependency): term_a over the diagonal, term_b over the off-diagonal cells, term_c."""
    import numpy as np

    table = np.array([[t.yes_yes, t.yes_no], [t.no_yes, t.no_no]], dtype=float)
    nobs = table.sum()
    probs = table / nobs
    freq_row, freq_col = probs.sum(1), probs.sum(0)
    agree, chance = np.diag(probs).sum(), (freq_row * freq_col).sum()
    kappa = (agree - chance) / (1 - chance)
    term_a = (np.diag(probs) * (1 - (freq_row + freq_col) * (1 - kappa)) ** 2).sum()
    term_b = probs * (freq_col[:, None] + freq_row) ** 2
    term_b[[0, 1], [0, 1]] = 0
    term_b = (1 - kappa) ** 2 * term_b.sum()
    term_c = (kappa - chance * (1 - kappa)) ** 2
    return float(np.sqrt((term_a + term_b - term_c) / (1 - chance) ** 2 / nobs))


@pytest.mark.skipif(importlib.util.find_spec("sklearn") is None, reason="scikit-learn is not installed")
def test_kappa_agrees_with_sklearn() -> None:
    from sklearn.metrics import cohen_kappa_score

    for t in [HAND, Table(20, 3, 4, 13), Table(5, 0, 1, 4), Table(1, 2, 3, 4)]:
        labels = ["yes"] * (t.yes_yes + t.yes_no) + ["no"] * (t.no_yes + t.no_no)
        judge = ["yes"] * t.yes_yes + ["no"] * t.yes_no + ["yes"] * t.no_yes + ["no"] * t.no_no
        assert cohen_kappa(t) == pytest.approx(cohen_kappa_score(labels, judge))


def test_the_kappa_of_tables_that_say_nothing() -> None:
    assert cohen_kappa(Table()) is None  # no labels
    assert cohen_kappa(Table(yes_yes=12)) is None  # both raters said yes every time: chance agrees on all
    assert kappa_interval(Table(no_no=3)) is None
    assert cohen_kappa(Table(0, 6, 0, 0)) == pytest.approx(0.0)  # label always yes, judge always no: p_e = 0, p_o = 0
    a = Agreement.of(Table())
    assert a.agreement.value is None and a.kappa_text() == "n/a (no labels)"
    assert Agreement.of(Table(yes_yes=4)).kappa_text().startswith("n/a (one answer only")


def test_perfect_agreement_on_few_labels_keeps_a_wide_interval() -> None:
    """kappa 1 on 10 labels: the large-sample interval collapses to [1, 1]; the Wilson part keeps it honest."""
    t = Table(yes_yes=5, no_no=5)
    assert cohen_kappa(t) == 1.0 and kappa_standard_error(t) == pytest.approx(0.0)
    low, high = kappa_interval(t)  # type: ignore[misc]
    assert high == 1.0 and low < 0.5


def test_kappa_interval_is_the_union_and_stays_within_minus_one_and_one() -> None:
    kappa, se, pe = cohen_kappa(HAND), kappa_standard_error(HAND), HAND.chance()
    assert kappa is not None and se is not None and pe is not None
    w = wilson_interval(17, 20)
    assert w is not None
    low, high = kappa_interval(HAND)  # type: ignore[misc]
    assert low == pytest.approx(min((w[0] - pe) / (1 - pe), kappa - 1.959963984540054 * se))
    assert high == pytest.approx(min(1.0, max((w[1] - pe) / (1 - pe), kappa + 1.959963984540054 * se)))
    for t in [Table(0, 5, 5, 0), Table(1, 9, 9, 1), Table(9, 1, 1, 9)]:
        lo, hi = kappa_interval(t)  # type: ignore[misc]
        assert -1.0 <= lo <= hi <= 1.0


def _true_kappa(base: float, tpr: float, tnr: float) -> float:
    yy, nn = base * tpr, (1 - base) * tnr
    judge_yes = yy + (1 - base) * (1 - tnr)
    pe = base * judge_yes + (1 - base) * (1 - judge_yes)
    return (yy + nn - pe) / (1 - pe)


@pytest.mark.parametrize(("base", "tpr", "tnr", "n"), [(0.8, 0.95, 0.7, 20), (0.5, 0.9, 0.9, 50),
                                                      (0.7, 0.9, 0.5, 20), (0.9, 0.98, 0.8, 50)])
def test_kappa_interval_covers_the_true_kappa_at_least_95_percent_of_the_time(base: float, tpr: float, tnr: float,
                                                                            n: int) -> None:
    """Simulated labelling (a person's yes at the base rate, the judge right at TPR / TNR): the interval holds
    the population's kappa in at least ~95% of the runs where kappa is defined (measured 0.95-0.99 over 4000
    runs each; 1000 here, so the bar leaves room for the simulation's own noise)."""
    rng = random.Random(20261202)
    truth = _true_kappa(base, tpr, tnr)
    covered = defined = 0
    for _ in range(1000):
        cells = [0, 0, 0, 0]
        for _ in range(n):
            if rng.random() < base:
                cells[0 if rng.random() < tpr else 1] += 1
            else:
                cells[3 if rng.random() < tnr else 2] += 1
        interval = kappa_interval(Table(*cells))
        if interval is None:
            continue
        defined += 1
        covered += interval[0] <= truth <= interval[1]
    assert covered / defined >= 0.93
