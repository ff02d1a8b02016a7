"""Hand-computed checks of the meta-evaluation statistics (pytest_bineval.bench.stats)."""

from __future__ import annotations

import json
import math
import random
import statistics
from collections.abc import Sequence

import pytest

from pytest_bineval.bench.stats import (
    CorrelationResult,
    auroc,
    bootstrap_ci,
    classification,
    distribution,
    phi_matrix,
    pooled,
    summary_level,
)

# Three tiny groups with hand-computed statistics (pairs are (metric, human)).
#
# G1: metric 1,2,3 vs human 1,2,3: rho = tau = r = 1.
# G2: metric 1,2,3 vs human 3,1,2:
#     rho: d = (-2, 1, 1), sum d^2 = 6, rho = 1 - 6*6 / (3*(9-1)) = -0.5
#     tau: pairs (1,2) D, (1,3) D, (2,3) C -> (1 - 2) / 3 = -1/3
#     r:   metric deviations (-1,0,1), human (1,-1,0): -1 / sqrt(2*2) = -0.5
# G3 (ties): metric 1,1,2,3 vs human 1,2,2,4:
#     tau-b: C = 4, D = 0, one pair tied only in metric, one only in human
#            -> 4 / sqrt((4+1) * (4+1)) = 0.8
#     rho:   ranks (1.5,1.5,3,4) and (1,2.5,2.5,4); deviations (-1,-1,.5,1.5), (-1.5,0,0,1.5)
#            -> 3.75 / sqrt(4.5 * 4.5) = 0.8333...
#     r:     deviations (-.75,-.75,.25,1.25), (-1.25,-.25,-.25,1.75)
#            -> 3.25 / sqrt(2.75 * 4.75)
G1 = [(1.0, 1.0), (2.0, 2.0), (3.0, 3.0)]
G2 = [(1.0, 3.0), (2.0, 1.0), (3.0, 2.0)]
G3 = [(1.0, 1.0), (1.0, 2.0), (2.0, 2.0), (3.0, 4.0)]
G3_RHO = 3.75 / 4.5
G3_TAU = 4 / math.sqrt(5 * 5)
G3_R = 3.25 / math.sqrt(2.75 * 4.75)


def test_summary_level_averages_per_group_statistics() -> None:
    result = summary_level({"a": G1, "b": G2, "c": G3})
    assert result.spearman == pytest.approx((1.0 - 0.5 + G3_RHO) / 3)
    assert result.kendall == pytest.approx((1.0 - 1 / 3 + G3_TAU) / 3)
    assert result.pearson == pytest.approx((1.0 - 0.5 + G3_R) / 3)
    assert (result.n_groups, result.n_skipped, result.n_items) == (3, 0, 10)
    assert result.reason is None


def test_one_usable_group_gets_no_bootstrap_interval() -> None:
    # G2's metric is constant once G1's is: only one group is usable, and one group has no spread
    result = summary_level({"a": G1, "b": [(1.0, 3.0), (1.0, 1.0), (1.0, 2.0)]}, ci_resamples=200)
    assert (result.n_groups, result.n_skipped) == (1, 1)
    assert result.spearman == pytest.approx(1.0) and result.ci is None
    assert summary_level({"a": G1, "b": G2}, ci_resamples=200).ci is not None


def test_summary_level_two_groups() -> None:
    result = summary_level({"a": G1, "b": G2})
    assert result.spearman == pytest.approx(0.25)
    assert result.kendall == pytest.approx(1 / 3)
    assert result.pearson == pytest.approx(0.25)


def test_summary_level_skips_constant_and_incomplete_groups() -> None:
    groups: dict[str, Sequence[tuple[float | None, float]]] = {
        "a": G1,
        "b": G2,
        "c": G3,
        "human_constant": [(1.0, 2.0), (2.0, 2.0), (3.0, 2.0)],
        "metric_constant": [(4.0, 1.0), (4.0, 2.0), (4.0, 3.0)],
        "single": [(1.0, 5.0)],
        "missing_metric": [(None, 1.0), (2.0, 2.0), (3.0, 3.0)],
        "nan_metric": [(float("nan"), 1.0), (2.0, 2.0), (3.0, 3.0)],
    }
    result = summary_level(groups)
    assert result.spearman == pytest.approx((1.0 - 0.5 + G3_RHO) / 3)
    assert result.kendall == pytest.approx((1.0 - 1 / 3 + G3_TAU) / 3)
    assert (result.n_groups, result.n_skipped, result.n_items) == (3, 5, 10)
    assert result.skip_reasons == {
        "human scores constant": 1,
        "metric scores constant": 1,
        "fewer than 2 items": 1,
        "missing metric score": 2,
    }


def test_summary_level_all_skipped_gives_none_not_nan() -> None:
    result = summary_level({"x": [(1.0, 3.0), (1.0, 4.0)], "y": [(2.0, 2.0), (3.0, 2.0)]})
    assert (result.spearman, result.kendall, result.pearson) == (None, None, None)
    assert (result.n_groups, result.n_skipped, result.n_items) == (0, 2, 0)
    assert result.reason
    json.dumps(result.to_dict(), allow_nan=False)
    assert summary_level({}).reason == "no groups"


def test_pooled_kendall_tau_b_with_ties() -> None:
    result = pooled(G3)
    assert result.kendall == pytest.approx(0.8)
    assert result.spearman == pytest.approx(G3_RHO)
    assert result.pearson == pytest.approx(G3_R)
    assert (result.n_groups, result.n_skipped, result.n_items, result.n_dropped) == (1, 0, 4, 0)


def test_pooled_drops_missing_and_handles_constant_input() -> None:
    result = pooled([*G2, (None, 1.0), (2.0, float("nan"))])
    assert result.spearman == pytest.approx(-0.5)
    assert (result.n_items, result.n_dropped) == (3, 2)

    for pairs in ([(1.0, 1.0), (2.0, 1.0), (3.0, 1.0)], [(1.0, 1.0), (1.0, 2.0)], [(1.0, 1.0)], []):
        constant = pooled(pairs)
        assert (constant.spearman, constant.kendall, constant.pearson) == (None, None, None)
        assert constant.reason
        json.dumps(constant.to_dict(), allow_nan=False)


def test_correlation_result_to_dict_and_ci() -> None:
    result = CorrelationResult(0.5, 0.4, 0.3, 2, 1, 10)
    assert result.to_dict()["spearman"] == 0.5
    assert "ci" not in result.to_dict()
    with_ci = result.with_ci({"spearman": (0.1, 0.9), "kendall": None, "pearson": (0.0, 0.5)})
    assert with_ci.to_dict()["ci"] == {"spearman": [0.1, 0.9], "kendall": None, "pearson": [0.0, 0.5]}
    assert with_ci.get("kendall") == 0.4
    with pytest.raises(KeyError):
        result.get("tau")


def _random_groups(n_groups: int, size: int, seed: int) -> dict[str, list[tuple[float, float]]]:
    rng = random.Random(seed)
    groups: dict[str, list[tuple[float, float]]] = {}
    for g in range(n_groups):
        pairs: list[tuple[float, float]] = []
        for _ in range(size):
            human = float(rng.randint(1, 5))
            pairs.append((float(round(human + rng.gauss(0, 1.5))), human))
        groups[f"g{g}"] = pairs
    return groups


def test_bootstrap_summary_level_contains_estimate_and_is_reproducible() -> None:
    groups = _random_groups(30, 8, seed=1)
    point = summary_level(groups)
    first = bootstrap_ci(groups, n_resamples=500, seed=7)
    again = bootstrap_ci(groups, n_resamples=500, seed=7)
    other = bootstrap_ci(groups, n_resamples=500, seed=8)
    assert first == again
    assert first != other
    for name in ("spearman", "kendall", "pearson"):
        interval = first[name]
        assert interval is not None
        low, high = interval
        assert low < point.get(name) < high  # type: ignore[operator]
    attached = summary_level(groups, ci_resamples=500, seed=7)
    assert attached.ci == first


def test_bootstrap_pooled_contains_estimate_and_is_reproducible() -> None:
    pairs = [p for group in _random_groups(10, 12, seed=2).values() for p in group]
    point = pooled(pairs)
    first = bootstrap_ci(pairs, n_resamples=300, seed=3)
    assert first == bootstrap_ci(pairs, n_resamples=300, seed=3)
    for name in ("spearman", "kendall", "pearson"):
        interval = first[name]
        assert interval is not None
        assert interval[0] < point.get(name) < interval[1]  # type: ignore[operator]
    assert pooled(pairs, ci_resamples=300, seed=3).ci == first


def test_bootstrap_undefined_statistics_and_bad_arguments() -> None:
    assert bootstrap_ci([(1.0, 1.0), (2.0, 1.0)]) == {"spearman": None, "kendall": None, "pearson": None}
    assert bootstrap_ci({"x": [(1.0, 1.0), (1.0, 2.0)]})["kendall"] is None
    with pytest.raises(ValueError):
        bootstrap_ci(G1, n_resamples=0)
    with pytest.raises(ValueError):
        bootstrap_ci(G1, confidence=1.5)


def test_summary_level_bootstrap_computes_each_group_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """What keeps 1000 resamples of 100 groups cheap: the per-group statistics are computed once, not per
    resample (the resamples average rows of that table)."""
    from pytest_bineval.bench import stats

    calls = []
    real = stats._group_stats

    def counted(pairs: Sequence[tuple[float, float]]) -> object:
        calls.append(1)
        return real(pairs)

    monkeypatch.setattr(stats, "_group_stats", counted)
    groups = _random_groups(100, 16, seed=4)
    interval = bootstrap_ci(groups, n_resamples=1000, seed=0)["spearman"]
    assert len(calls) == 100
    assert interval is not None and interval[0] < interval[1]


def test_auroc_with_ties() -> None:
    # positives {0.4, 0.8}, negatives {0.1, 0.4}: 1 + 0.5 (tie) + 1 + 1 = 3.5 of 4 pairs
    assert auroc([0.1, 0.4, 0.4, 0.8], [0, 0, 1, 1]) == pytest.approx(0.875)
    assert auroc([0.4, 0.1, 0.8, 0.4], [True, False, True, False]) == pytest.approx(0.875)
    assert auroc([1.0, 2.0, 3.0], [1, 1, 0]) == pytest.approx(0.0)
    assert auroc([0.5, 0.5], [0, 1]) == pytest.approx(0.5)
    # a missing score drops its item
    assert auroc([0.1, None, 0.9], [0, 0, 1]) == pytest.approx(1.0)


def test_auroc_one_class_absent_and_errors() -> None:
    assert auroc([0.1, 0.2], [1, 1]) is None
    assert auroc([0.1, 0.2], [0, 0]) is None
    assert auroc([], []) is None
    with pytest.raises(ValueError):
        auroc([0.1], [0, 1])
    with pytest.raises(ValueError):
        auroc([0.1, 0.2], [0, 2])


def test_classification_and_always_yes_baseline() -> None:
    pred_no = [True, True, False, False, True, False]
    gold_fail = [True, False, True, False, True, False]
    # tp = items 0 and 4, fp = item 1, fn = item 2, tn = items 3 and 5
    result = classification(pred_no, gold_fail)
    assert (result["tp"], result["fp"], result["fn"], result["tn"]) == (2, 1, 1, 2)
    assert result["accuracy"] == pytest.approx(4 / 6)
    assert result["precision"] == pytest.approx(2 / 3)
    assert result["recall"] == pytest.approx(2 / 3)
    assert result["f1"] == pytest.approx(2 / 3)
    assert (result["n"], result["n_gold_fail"], result["n_pred_no"]) == (6, 3, 3)
    baseline = result["always_yes"]
    assert baseline["accuracy"] == pytest.approx(3 / 6)
    assert baseline["precision"] is None  # never says "no": zero denominator
    assert baseline["recall"] == 0.0


def test_classification_zero_denominators() -> None:
    result = classification([False, False], [False, False])
    assert result["accuracy"] == 1.0
    assert result["precision"] is None
    assert result["recall"] is None
    assert result["always_yes"]["recall"] is None
    assert classification([], [])["accuracy"] is None
    with pytest.raises(ValueError):
        classification([True], [True, False])


def test_distribution_ceiling_and_spread() -> None:
    metric = [1.0, 1.0, 1.0, 0.5]
    human = [5.0, 4.0, 3.0, 3.0]
    result = distribution(metric, human)
    assert result["top"] == 1.0
    assert result["metric_top_share"] == pytest.approx(0.75)
    assert result["human_top_share"] == pytest.approx(0.25)
    assert result["metric_std"] == pytest.approx(statistics.pstdev(metric))
    assert result["human_std"] == pytest.approx(statistics.pstdev(human))
    assert result["std_ratio"] == pytest.approx(statistics.pstdev(metric) / statistics.pstdev(human))
    assert (result["metric_distinct"], result["human_distinct"]) == (2, 3)
    assert distribution(metric, human, top=2.0)["metric_top_share"] == 0.0
    assert distribution([1.0], [2.0, 2.0])["std_ratio"] is None
    empty = distribution([], [])
    assert empty["top"] is None and empty["metric_top_share"] is None and empty["metric_std"] is None


def test_phi_matrix_on_a_tiny_table() -> None:
    answers: dict[str, list[bool | None]] = {
        "q1": [True, True, False, False, True],
        "q2": [True, True, False, False, False],
        "q3": [True, True, True, True, True],  # constant
        "q4": [False, False, True, True, False],  # negation of q1
        "q5": [True, None, False, False, True],  # q1 where answered
    }
    matrix = phi_matrix(answers)
    # q1 x q2: n11 = 2, n10 = 1, n01 = 0, n00 = 2 -> (2*2 - 1*0) / sqrt(3 * 2 * 2 * 3) = 4/6
    assert matrix.get("q1", "q2") == pytest.approx(4 / 6)
    assert matrix.get("q2", "q1") == pytest.approx(4 / 6)
    assert matrix.get("q1", "q3") is None
    assert matrix.get("q1", "q4") == pytest.approx(-1.0)
    assert matrix.get("q1", "q5") == pytest.approx(1.0)
    assert matrix.n_both[("q1", "q5")] == 4
    # q2 x q5 over items 0, 2, 3, 4: n11 = 1, n10 = 0, n01 = 1, n00 = 2 -> 2 / sqrt(1 * 3 * 2 * 2)
    assert matrix.get("q2", "q5") == pytest.approx(2 / math.sqrt(12))
    assert matrix.yes_rate == {"q1": 0.6, "q2": 0.4, "q3": 1.0, "q4": 0.4, "q5": 0.5}
    redundant = matrix.redundant_pairs(0.7)
    assert [(a, b) for a, b, _ in redundant] == [("q1", "q4"), ("q1", "q5"), ("q4", "q5")]
    assert [(a, b) for a, b, _ in matrix.redundant_pairs(0.6)][-2:] == [("q1", "q2"), ("q2", "q4")]
    json.dumps(matrix.to_dict(), allow_nan=False)


def test_phi_matrix_rejects_unaligned_answers() -> None:
    with pytest.raises(ValueError):
        phi_matrix({"a": [True], "b": [True, False]})
