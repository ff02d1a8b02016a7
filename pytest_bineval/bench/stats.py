"""Correlation protocols and agreement figures for meta-evaluating a judge against human judgments.

Everything here is pure and model-free: it takes numbers (metric scores, human scores, yes/no verdicts)
and returns numbers. ``None`` stands for "undefined" (constant input, an empty class, a zero denominator);
no function returns NaN.

Protocols (as in UniEval ``reproduce/correlation.py`` and G-Eval ``meta_eval_summeval.py``):

* :func:`summary_level` -- SummEval summary-level: correlate within each group (article) and average the
  per-group statistics, skipping groups whose human or metric scores are constant.
* :func:`pooled` -- turn-/sample-level (Topical-Chat, QAGS): one correlation over all items.

Pairs are always ``(metric, human)``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
from scipy import stats as _sp

__all__ = [
    "STATISTICS",
    "CorrelationResult",
    "PhiMatrix",
    "auroc",
    "bootstrap_ci",
    "classification",
    "distribution",
    "phi_matrix",
    "pooled",
    "summary_level",
]

#: Names of the three correlation statistics, in the order used throughout this module.
STATISTICS: tuple[str, str, str] = ("spearman", "kendall", "pearson")

#: One ``(metric, human)`` observation; ``None``/NaN marks a missing score.
Pair: TypeAlias = "tuple[float | None, float | None]"
FloatArray: TypeAlias = "npt.NDArray[np.float64]"


@dataclass(frozen=True)
class CorrelationResult:
    """Correlation between a metric and human scores under one protocol.

    Attributes:
        spearman: Spearman's rho, or ``None`` when undefined.
        kendall: Kendall's tau-b, or ``None`` when undefined.
        pearson: Pearson's r, or ``None`` when undefined.
        n_groups: Groups that contributed (summary-level); for :func:`pooled` 1 if the pool was
            usable, else 0.
        n_skipped: Groups left out (constant scores, fewer than 2 items, a missing score); for
            :func:`pooled` 1 if the pool was unusable, else 0.
        n_items: Items that contributed (items of the used groups; usable pairs of the pool).
        n_dropped: :func:`pooled` only: pairs dropped because the metric or human score was missing.
        reason: Why the statistics are ``None``, if they are.
        skip_reasons: Count of skipped groups per reason (summary-level).
        ci: Optional bootstrap interval per statistic, ``{"spearman": (low, high) | None, ...}``.
    """

    spearman: float | None
    kendall: float | None
    pearson: float | None
    n_groups: int
    n_skipped: int
    n_items: int
    n_dropped: int = 0
    reason: str | None = None
    skip_reasons: Mapping[str, int] = field(default_factory=dict)
    ci: Mapping[str, tuple[float, float] | None] | None = None

    def get(self, name: str) -> float | None:
        """Return the statistic called ``name`` (one of :data:`STATISTICS`)."""
        if name not in STATISTICS:
            raise KeyError(f"unknown statistic {name!r}; expected one of {', '.join(STATISTICS)}")
        value: float | None = getattr(self, name)
        return value

    def with_ci(self, ci: Mapping[str, tuple[float, float] | None]) -> CorrelationResult:
        """Return a copy carrying the bootstrap interval ``ci``."""
        return replace(self, ci=dict(ci))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (intervals become two-element lists)."""
        out: dict[str, Any] = {
            "spearman": self.spearman,
            "kendall": self.kendall,
            "pearson": self.pearson,
            "n_groups": self.n_groups,
            "n_skipped": self.n_skipped,
            "n_items": self.n_items,
            "n_dropped": self.n_dropped,
            "reason": self.reason,
            "skip_reasons": dict(self.skip_reasons),
        }
        if self.ci is not None:
            out["ci"] = {k: (None if v is None else [v[0], v[1]]) for k, v in self.ci.items()}
        return out


# --------------------------------------------------------------------------------------------------
# helpers


def _num(value: float | None) -> float | None:
    """``float(value)``, or ``None`` for ``None``/NaN."""
    if value is None:
        return None
    f = float(value)
    return None if math.isnan(f) else f


def _finite_or_none(value: Any) -> float | None:
    f = float(value)
    return None if math.isnan(f) or math.isinf(f) else f


def _is_constant(values: FloatArray) -> bool:
    return bool(values.size == 0 or np.all(values == values[0]))


def _three(metric: FloatArray, human: FloatArray) -> tuple[float | None, float | None, float | None]:
    """Spearman, Kendall tau-b and Pearson of two non-constant arrays (NaN results become ``None``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rho = _sp.spearmanr(metric, human).statistic
        tau = _sp.kendalltau(metric, human, variant="b").statistic
        r = _sp.pearsonr(metric, human).statistic
    return _finite_or_none(rho), _finite_or_none(tau), _finite_or_none(r)


def _why_unusable(metric: FloatArray, human: FloatArray) -> str | None:
    if metric.size < 2:
        return "fewer than 2 items"
    if _is_constant(human):
        return "human scores constant"
    if _is_constant(metric):
        return "metric scores constant"
    return None


def _group_stats(pairs: Sequence[Pair]) -> tuple[str | None, tuple[float | None, ...], int]:
    """``(skip_reason, (rho, tau, r), n_items)`` for one summary-level group."""
    metric_values: list[float] = []
    human_values: list[float] = []
    for m, h in pairs:
        mm, hh = _num(m), _num(h)
        if mm is None:
            return "missing metric score", (None, None, None), len(pairs)
        if hh is None:
            return "missing human score", (None, None, None), len(pairs)
        metric_values.append(mm)
        human_values.append(hh)
    metric = np.asarray(metric_values, dtype=np.float64)
    human = np.asarray(human_values, dtype=np.float64)
    why = _why_unusable(metric, human)
    if why is not None:
        return why, (None, None, None), len(pairs)
    values = _three(metric, human)
    if any(v is None for v in values):
        return "statistic undefined", (None, None, None), len(pairs)
    return None, values, len(pairs)


def _usable_pairs(pairs: Sequence[Pair]) -> tuple[FloatArray, FloatArray, int]:
    """Arrays of the pairs where both scores are present, and how many pairs were dropped."""
    metric_values: list[float] = []
    human_values: list[float] = []
    dropped = 0
    for m, h in pairs:
        mm, hh = _num(m), _num(h)
        if mm is None or hh is None:
            dropped += 1
            continue
        metric_values.append(mm)
        human_values.append(hh)
    return (
        np.asarray(metric_values, dtype=np.float64),
        np.asarray(human_values, dtype=np.float64),
        dropped,
    )


# --------------------------------------------------------------------------------------------------
# correlation protocols


def summary_level(
    groups: Mapping[str, Sequence[Pair]],
    *,
    ci_resamples: int = 0,
    seed: int = 0,
    confidence: float = 0.95,
) -> CorrelationResult:
    """SummEval summary-level correlation: per-group correlation, averaged over groups.

    For each group (an article and its summaries) Spearman's rho, Kendall's tau-b and Pearson's r are
    computed between metric and human scores over the group's items; each statistic is then averaged
    over the groups. A group is skipped when it has fewer than 2 items, when its human or its metric
    scores are constant (correlation undefined), or when any of its scores is ``None``/NaN (a judge that
    failed on one summary would otherwise silently change the group).

    Args:
        groups: ``{group_id: [(metric, human), ...]}``.
        ci_resamples: If > 0, attach a bootstrap interval (groups resampled) with this many resamples;
            none when fewer than 2 groups are usable (resampling one group only repeats it).
        seed: Seed of the bootstrap.
        confidence: Coverage of the bootstrap interval.

    Returns:
        The averaged statistics (``None`` when no group is usable, with ``reason`` set); ``n_groups``
        counts the used groups, ``n_skipped`` the skipped ones, ``n_items`` the items of the used groups.
    """
    per_group: list[tuple[float | None, ...]] = []
    skip_reasons: dict[str, int] = {}
    n_items = 0
    for pairs in groups.values():
        why, values, n = _group_stats(pairs)
        if why is not None:
            skip_reasons[why] = skip_reasons.get(why, 0) + 1
            continue
        per_group.append(values)
        n_items += n
    n_skipped = sum(skip_reasons.values())
    if not per_group:
        reason = "no groups" if not groups else "every group was skipped"
        return CorrelationResult(None, None, None, 0, n_skipped, 0, reason=reason, skip_reasons=skip_reasons)
    table = np.asarray(per_group, dtype=np.float64)
    means = table.mean(axis=0)
    result = CorrelationResult(
        spearman=float(means[0]),
        kendall=float(means[1]),
        pearson=float(means[2]),
        n_groups=len(per_group),
        n_skipped=n_skipped,
        n_items=n_items,
        skip_reasons=skip_reasons,
    )
    if ci_resamples > 0 and len(per_group) >= 2:  # resampling one group only repeats it: no interval
        result = result.with_ci(
            _bootstrap_group_means(table, n_resamples=ci_resamples, seed=seed, confidence=confidence)
        )
    return result


def pooled(
    pairs: Sequence[Pair],
    *,
    ci_resamples: int = 0,
    seed: int = 0,
    confidence: float = 0.95,
) -> CorrelationResult:
    """Pooled (turn-/sample-level) correlation over all items, as used for Topical-Chat and QAGS.

    Pairs whose metric or human score is ``None``/NaN are dropped (counted in ``n_dropped``). When the
    remaining scores are constant or fewer than 2, the statistics are ``None`` and ``reason`` says why.

    Args:
        pairs: ``[(metric, human), ...]``.
        ci_resamples: If > 0, attach a bootstrap interval (items resampled) with this many resamples.
        seed: Seed of the bootstrap.
        confidence: Coverage of the bootstrap interval.
    """
    metric, human, dropped = _usable_pairs(pairs)
    why = _why_unusable(metric, human)
    if why is not None:
        return CorrelationResult(None, None, None, 0, 1, int(metric.size), n_dropped=dropped, reason=why)
    rho, tau, r = _three(metric, human)
    result = CorrelationResult(
        rho,
        tau,
        r,
        n_groups=1,
        n_skipped=0,
        n_items=int(metric.size),
        n_dropped=dropped,
        reason=None if None not in (rho, tau, r) else "statistic undefined",
    )
    if ci_resamples > 0:
        result = result.with_ci(
            _bootstrap_pooled(metric, human, n_resamples=ci_resamples, seed=seed, confidence=confidence)
        )
    return result


# --------------------------------------------------------------------------------------------------
# bootstrap


def _percentile_interval(samples: FloatArray, confidence: float) -> dict[str, tuple[float, float] | None]:
    """Percentile interval per column of ``samples`` (rows = resamples; NaN rows ignored)."""
    alpha = (1.0 - confidence) / 2.0
    out: dict[str, tuple[float, float] | None] = {}
    for j, name in enumerate(STATISTICS):
        column = samples[:, j]
        column = column[~np.isnan(column)]
        if column.size == 0:
            out[name] = None
            continue
        low, high = np.quantile(column, [alpha, 1.0 - alpha])
        out[name] = (float(low), float(high))
    return out


def _check_bootstrap_args(n_resamples: int, confidence: float) -> None:
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def _bootstrap_group_means(
    table: FloatArray, *, n_resamples: int, seed: int, confidence: float
) -> dict[str, tuple[float, float] | None]:
    """Resample rows (groups) of the per-group statistics table and average them (vectorised)."""
    _check_bootstrap_args(n_resamples, confidence)
    rng = np.random.default_rng(seed)
    n = table.shape[0]
    index = rng.integers(0, n, size=(n_resamples, n))
    means: FloatArray = table[index].mean(axis=1)
    return _percentile_interval(means, confidence)


def _rowwise_pearson(a: FloatArray, b: FloatArray) -> FloatArray:
    """Pearson's r of each row of ``a`` with the same row of ``b`` (NaN for a constant row)."""
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    denominator = np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (a * b).sum(axis=1) / denominator
    r[denominator == 0] = np.nan
    clipped: FloatArray = np.clip(r, -1.0, 1.0)
    return clipped


def _bootstrap_pooled(
    metric: FloatArray, human: FloatArray, *, n_resamples: int, seed: int, confidence: float
) -> dict[str, tuple[float, float] | None]:
    """Resample items; resamples whose scores come out constant are left out of the interval.

    Pearson and Spearman (Pearson of average ranks) are computed for all resamples at once; Kendall's
    tau-b goes through scipy one resample at a time.
    """
    _check_bootstrap_args(n_resamples, confidence)
    rng = np.random.default_rng(seed)
    n = metric.size
    index = rng.integers(0, n, size=(n_resamples, n))
    m, h = metric[index], human[index]
    usable = ~(np.all(m == m[:, :1], axis=1) | np.all(h == h[:, :1], axis=1))
    samples = np.full((n_resamples, len(STATISTICS)), np.nan)
    samples[:, 0] = _rowwise_pearson(_sp.rankdata(m, axis=1), _sp.rankdata(h, axis=1))
    samples[:, 2] = _rowwise_pearson(m, h)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in np.flatnonzero(usable):
            samples[k, 1] = _sp.kendalltau(m[k], h[k], variant="b").statistic
    samples[~usable] = np.nan
    return _percentile_interval(samples, confidence)


def bootstrap_ci(
    data: Mapping[str, Sequence[Pair]] | Sequence[Pair],
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, tuple[float, float] | None]:
    """Bootstrap percentile interval for the correlation statistics.

    * ``data`` a mapping ``{group: [(metric, human), ...]}`` -> summary-level: the usable groups are
      resampled with replacement and the per-group statistics averaged (the per-group statistics are
      computed once, so this is fast).
    * ``data`` a sequence of ``(metric, human)`` -> pooled: items are resampled with replacement;
      resamples that come out constant are ignored.

    Returns:
        ``{"spearman": (low, high) | None, "kendall": ..., "pearson": ...}``; ``None`` when the
        statistic is undefined on the data (and every resample).
    """
    _check_bootstrap_args(n_resamples, confidence)
    if isinstance(data, Mapping):
        per_group = [values for why, values, _ in map(_group_stats, data.values()) if why is None]
        if not per_group:
            return dict.fromkeys(STATISTICS)
        table = np.asarray(per_group, dtype=np.float64)
        return _bootstrap_group_means(table, n_resamples=n_resamples, seed=seed, confidence=confidence)
    metric, human, _ = _usable_pairs(data)
    if _why_unusable(metric, human) is not None:
        return dict.fromkeys(STATISTICS)
    return _bootstrap_pooled(metric, human, n_resamples=n_resamples, seed=seed, confidence=confidence)


# --------------------------------------------------------------------------------------------------
# binary verdicts


def auroc(scores: Sequence[float | None], labels: Sequence[int | bool]) -> float | None:
    """Area under the ROC curve of a continuous score against binary labels (1 = positive).

    Mann-Whitney form: the share of (positive, negative) pairs in which the positive scores higher,
    a tie counting 1/2. Items whose score is ``None``/NaN are dropped.

    Returns:
        The AUROC in [0, 1], or ``None`` when either class is absent.

    Raises:
        ValueError: If the lengths differ or a label is not 0/1.
    """
    if len(scores) != len(labels):
        raise ValueError(f"scores and labels differ in length ({len(scores)} != {len(labels)})")
    kept_scores: list[float] = []
    kept_labels: list[int] = []
    for s, y in zip(scores, labels, strict=True):
        if y not in (0, 1):  # True/False compare equal to 1/0
            raise ValueError(f"labels must be 0/1 or bool, got {y!r}")
        value = _num(s)
        if value is None:
            continue
        kept_scores.append(value)
        kept_labels.append(int(y))
    n_pos = sum(kept_labels)
    n_neg = len(kept_labels) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    ranks = _sp.rankdata(np.asarray(kept_scores, dtype=np.float64))  # average ranks for ties
    rank_sum = float(np.sum(ranks[np.asarray(kept_labels) == 1]))
    u = rank_sum - n_pos * (n_pos + 1) / 2.0
    return u / (n_pos * n_neg)


def _ratio(numerator: int, denominator: int) -> float | None:
    return None if denominator == 0 else numerator / denominator


def _prf(pred: Sequence[bool], gold: Sequence[bool]) -> dict[str, Any]:
    tp = sum(1 for p, g in zip(pred, gold, strict=True) if p and g)
    fp = sum(1 for p, g in zip(pred, gold, strict=True) if p and not g)
    fn = sum(1 for p, g in zip(pred, gold, strict=True) if not p and g)
    tn = len(pred) - tp - fp - fn
    precision = _ratio(tp, tp + fp)
    recall = _ratio(tp, tp + fn)
    f1 = _ratio(2 * tp, 2 * tp + fp + fn) if precision is not None and recall is not None else None
    return {
        "accuracy": _ratio(tp + tn, len(pred)),
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
    }


def classification(pred_no: Sequence[bool], gold_fail: Sequence[bool]) -> dict[str, Any]:
    """Accuracy, precision and recall of "no" verdicts (predicted failures) against gold failures.

    The positive class is *failure*: precision is the share of "no" verdicts that are real failures,
    recall the share of real failures answered "no". The same figures are given for the trivial
    "always yes" baseline (which never predicts a failure, so its precision is ``None`` and its recall
    0), to show how much of the accuracy is just the pass rate. Zero denominators give ``None``.

    Returns:
        ``{"n", "n_gold_fail", "n_pred_no", "accuracy", "precision", "recall", "f1", "tp", "fp", "fn",
        "tn", "always_yes": {same figures for the baseline}}``.
    """
    if len(pred_no) != len(gold_fail):
        raise ValueError(f"pred_no and gold_fail differ in length ({len(pred_no)} != {len(gold_fail)})")
    pred = [bool(p) for p in pred_no]
    gold = [bool(g) for g in gold_fail]
    out: dict[str, Any] = {"n": len(pred), "n_gold_fail": sum(gold), "n_pred_no": sum(pred)}
    out.update(_prf(pred, gold))
    out["always_yes"] = _prf([False] * len(gold), gold)
    return out


# --------------------------------------------------------------------------------------------------
# score distributions


def _std(values: FloatArray) -> float | None:
    return float(np.std(values)) if values.size else None


def _top_share(values: FloatArray, top: float) -> float | None:
    if values.size == 0:
        return None
    return float(np.mean(np.isclose(values, top, rtol=0.0, atol=1e-9)))


def distribution(
    metric: Sequence[float | None],
    human: Sequence[float | None],
    top: float | None = None,
    *,
    human_top: float | None = None,
) -> dict[str, Any]:
    """Ceiling effect and spread of the metric compared with the human scores.

    Args:
        metric: Metric scores (``None``/NaN ignored).
        human: Human scores (``None``/NaN ignored); need not be aligned with ``metric``.
        top: Top of the metric's scale (e.g. 1.0 for a yes-share); defaults to the largest observed
            metric score.
        human_top: Top of the human scale; defaults to the largest observed human score.

    Returns:
        ``{"n_metric", "n_human", "top", "metric_top_share", "human_top", "human_top_share",
        "metric_std", "human_std", "std_ratio", "metric_distinct", "human_distinct"}``: shares of items
        at the top score, population standard deviations (ddof=0), ``metric_std / human_std``
        (``None`` when the human std is 0) and the number of distinct values.
    """
    m = np.asarray([v for v in (_num(x) for x in metric) if v is not None], dtype=np.float64)
    h = np.asarray([v for v in (_num(x) for x in human) if v is not None], dtype=np.float64)
    m_top = top if top is not None else (float(m.max()) if m.size else None)
    h_top = human_top if human_top is not None else (float(h.max()) if h.size else None)
    m_std, h_std = _std(m), _std(h)
    return {
        "n_metric": int(m.size),
        "n_human": int(h.size),
        "top": m_top,
        "metric_top_share": None if m_top is None else _top_share(m, m_top),
        "human_top": h_top,
        "human_top_share": None if h_top is None else _top_share(h, h_top),
        "metric_std": m_std,
        "human_std": h_std,
        "std_ratio": None if m_std is None or not h_std else m_std / h_std,
        "metric_distinct": len(np.unique(m)),
        "human_distinct": len(np.unique(h)),
    }


# --------------------------------------------------------------------------------------------------
# redundancy between checklist questions


@dataclass(frozen=True)
class PhiMatrix:
    """Phi coefficients between checklist questions, computed over items where both were answered.

    Attributes:
        questions: Question ids in input order.
        phi: ``{(a, b): phi | None}`` for every pair with ``a`` before ``b`` in ``questions``; ``None``
            when a question is constant over the jointly answered items (or none are).
        n_both: ``{(a, b): number of items where both questions were answered}``.
        yes_rate: ``{question: share of "yes" among its answered items | None}``.
    """

    questions: tuple[str, ...]
    phi: Mapping[tuple[str, str], float | None]
    n_both: Mapping[tuple[str, str], int]
    yes_rate: Mapping[str, float | None]

    def get(self, a: str, b: str) -> float | None:
        """Phi between ``a`` and ``b`` in either order (1.0 for ``a == b`` unless ``a`` is constant)."""
        if a == b:
            rate = self.yes_rate[a]
            return None if rate is None or rate in (0.0, 1.0) else 1.0
        if (a, b) in self.phi:
            return self.phi[(a, b)]
        return self.phi[(b, a)]

    def redundant_pairs(self, threshold: float = 0.7) -> list[tuple[str, str, float]]:
        """Pairs with ``|phi| > threshold``, strongest first: ``[(a, b, phi), ...]``."""
        found = [
            (a, b, value)
            for (a, b), value in self.phi.items()
            if value is not None and abs(value) > threshold
        ]
        order = {q: i for i, q in enumerate(self.questions)}
        found.sort(key=lambda t: (-abs(t[2]), order[t[0]], order[t[1]]))
        return found

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (pairs become ``[{"a", "b", "phi", "n"}, ...]``)."""
        return {
            "questions": list(self.questions),
            "yes_rate": dict(self.yes_rate),
            "pairs": [
                {"a": a, "b": b, "phi": value, "n": self.n_both[(a, b)]} for (a, b), value in self.phi.items()
            ],
        }


def _phi(x: Iterable[bool | None], y: Iterable[bool | None]) -> tuple[float | None, int]:
    n11 = n10 = n01 = n00 = 0
    for a, b in zip(x, y, strict=True):
        if a is None or b is None:
            continue
        if a and b:
            n11 += 1
        elif a:
            n10 += 1
        elif b:
            n01 += 1
        else:
            n00 += 1
    n = n11 + n10 + n01 + n00
    denominator = (n11 + n10) * (n01 + n00) * (n11 + n01) * (n10 + n00)
    if denominator == 0:
        return None, n
    return (n11 * n00 - n10 * n01) / math.sqrt(denominator), n


def phi_matrix(answers: Mapping[str, Sequence[bool | None]]) -> PhiMatrix:
    """Phi coefficient between every pair of checklist questions.

    Args:
        answers: ``{question_id: [True (yes) / False (no) / None (not answered), ...]}``, the lists
            aligned by item.

    Returns:
        A :class:`PhiMatrix`; use :meth:`PhiMatrix.redundant_pairs` to list near-duplicate questions.

    Raises:
        ValueError: If the answer lists differ in length.
    """
    questions = tuple(answers)
    lengths = {len(answers[q]) for q in questions}
    if len(lengths) > 1:
        raise ValueError(f"answer lists differ in length: {sorted(lengths)}")
    phi: dict[tuple[str, str], float | None] = {}
    n_both: dict[tuple[str, str], int] = {}
    for i, a in enumerate(questions):
        for b in questions[i + 1 :]:
            phi[(a, b)], n_both[(a, b)] = _phi(answers[a], answers[b])
    yes_rate: dict[str, float | None] = {}
    for q in questions:
        answered = [bool(v) for v in answers[q] if v is not None]
        yes_rate[q] = _ratio(sum(answered), len(answered))
    return PhiMatrix(questions=questions, phi=phi, n_both=n_both, yes_rate=yes_rate)
