"""How well a judge agrees with people: the 2x2 table of a person's yes/no (the label) against the judge's, and
what it says, each estimate with a 95% interval.

- **agreement**: the share of labelled verdicts the judge answered as the person did, with its Wilson interval;
- **Cohen's kappa**: the agreement beyond what two raters answering at random with their own rates of yes would
  reach, ``(p_o - p_e) / (1 - p_e)``; undefined (None) when chance alone agrees on everything (both answered one
  answer only). Its interval is the wider of two (:func:`kappa_interval`): the Wilson interval of the agreement
  carried onto the kappa scale at the observed chance agreement, and the large-sample interval of Fleiss, Cohen
  & Everitt (1969), what ``statsmodels.stats.inter_rater.cohens_kappa`` reports. The first alone ignores that
  the chance agreement is estimated too; the second alone collapses to a point at perfect agreement (kappa 1 on
  10 labels is no proof of a perfect judge). The union is what the unit tests' simulation holds to its coverage;
- **TPR**: of the verdicts the person answered *yes*, the share the judge answered yes too (P(judge yes | yes));
- **TNR**: of those the person answered *no*, the share the judge answered no too (P(judge no | no)): how many
  real failures the judge catches, the rate a test suite lives on;
- **base rate**: the share of *yes* among the labels (a judge that always says yes agrees on that share).

Everything is pure Python (:func:`math.sqrt` and integers): a pytest run must not import scipy or numpy (see
:mod:`pytest_bineval.gate_stats`). The unit tests check the values against hand-computed ones and scipy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import BaseModel, Field

from .repeats import Z95, wilson_interval


@dataclass(frozen=True)
class Table:
    """The 2x2 table of labels (rows: the person's answer) against the judge's answers (columns)."""

    yes_yes: int = 0  # the person yes, the judge yes (true positive)
    yes_no: int = 0  # the person yes, the judge no (false negative: a false alarm of the test)
    no_yes: int = 0  # the person no, the judge yes (false positive: a failure the judge missed)
    no_no: int = 0  # the person no, the judge no (true negative)

    @classmethod
    def of(cls, pairs: list[tuple[str, str]]) -> Table:
        """The table of (label, judge) answer pairs, each ``yes`` or ``no``."""
        count = {(a, b): 0 for a in ("yes", "no") for b in ("yes", "no")}
        for label, judge in pairs:
            count[(label, judge)] += 1
        return cls(count[("yes", "yes")], count[("yes", "no")], count[("no", "yes")], count[("no", "no")])

    @property
    def n(self) -> int:
        return self.yes_yes + self.yes_no + self.no_yes + self.no_no

    @property
    def agreed(self) -> int:
        return self.yes_yes + self.no_no

    def chance(self) -> float | None:
        """p_e: the agreement expected from the two raters' own rates of yes, were they independent."""
        n = self.n
        if not n:
            return None
        label_yes, judge_yes = self.yes_yes + self.yes_no, self.yes_yes + self.no_yes
        return (label_yes * judge_yes + (n - label_yes) * (n - judge_yes)) / (n * n)


def cohen_kappa(t: Table) -> float | None:
    """Cohen's kappa of the table; None without labels, or when chance agrees on everything (p_e = 1)."""
    pe = t.chance()
    if pe is None or pe >= 1.0:
        return None
    return (t.agreed / t.n - pe) / (1.0 - pe)


def kappa_standard_error(t: Table) -> float | None:
    """The large-sample standard error of kappa (Fleiss, Cohen & Everitt 1969; statsmodels' ``std_kappa``)."""
    kappa, pe = cohen_kappa(t), t.chance()
    if kappa is None or pe is None:
        return None
    n = t.n
    p = [[t.yes_yes / n, t.yes_no / n], [t.no_yes / n, t.no_no / n]]
    rows = [p[0][0] + p[0][1], p[1][0] + p[1][1]]
    cols = [p[0][0] + p[1][0], p[0][1] + p[1][1]]
    a = sum(p[i][i] * (1 - (rows[i] + cols[i]) * (1 - kappa)) ** 2 for i in range(2))
    b = (1 - kappa) ** 2 * sum(p[i][j] * (cols[i] + rows[j]) ** 2 for i in range(2) for j in range(2) if i != j)
    c = (kappa - pe * (1 - kappa)) ** 2
    return math.sqrt(max(0.0, (a + b - c) / ((1 - pe) ** 2 * n)))


def kappa_interval(t: Table, z: float = Z95) -> tuple[float, float] | None:
    """The 95% interval of kappa: the union of the agreement's Wilson interval on the kappa scale (at the observed
    chance agreement) and the large-sample interval kappa +- z SE; within [-1, 1]. None when kappa is."""
    kappa, pe, se = cohen_kappa(t), t.chance(), kappa_standard_error(t)
    agreement = wilson_interval(t.agreed, t.n, z)
    if kappa is None or pe is None or se is None or agreement is None:
        return None
    low = min((agreement[0] - pe) / (1 - pe), kappa - z * se)
    high = max((agreement[1] - pe) / (1 - pe), kappa + z * se)
    return max(-1.0, low), min(1.0, high)


class Share(BaseModel):
    """``k`` of ``n``, as a share with its 95% Wilson interval (all None when ``n`` is 0)."""

    k: int
    n: int
    value: float | None = None
    low: float | None = None
    high: float | None = None

    @classmethod
    def of(cls, k: int, n: int) -> Share:
        interval = wilson_interval(k, n)
        if interval is None:
            return cls(k=k, n=n)
        return cls(k=k, n=n, value=k / n, low=interval[0], high=interval[1])

    def text(self) -> str:
        """``0.85 [0.64, 0.95] (17/20)``, or ``n/a (0/0)``."""
        if self.value is None or self.low is None or self.high is None:
            return f"n/a ({self.k}/{self.n})"
        return f"{self.value:.2f} [{self.low:.2f}, {self.high:.2f}] ({self.k}/{self.n})"


class Agreement(BaseModel):
    """What a set of labels says of the judge (see the module's docstring for each figure)."""

    labels: int = Field(description="labelled verdicts the judge answered (judge errors are not counted)")
    yes_yes: int = Field(default=0, description="labelled yes, judged yes")
    yes_no: int = Field(default=0, description="labelled yes, judged no (the judge failed a good output)")
    no_yes: int = Field(default=0, description="labelled no, judged yes (the judge missed a failure)")
    no_no: int = Field(default=0, description="labelled no, judged no")
    agreement: Share
    kappa: float | None = Field(default=None, description="Cohen's kappa (None: undefined, chance agrees on all)")
    kappa_low: float | None = None
    kappa_high: float | None = None
    tpr: Share = Field(description="P(judge yes | labelled yes)")
    tnr: Share = Field(description="P(judge no | labelled no): the failures the judge catches")
    base_rate: Share = Field(description="the share of yes among the labels")
    judge_rate: Share = Field(description="the share of yes among the judge's answers to the labelled questions")

    @classmethod
    def of(cls, t: Table) -> Agreement:
        interval = kappa_interval(t)
        return cls(labels=t.n, yes_yes=t.yes_yes, yes_no=t.yes_no, no_yes=t.no_yes, no_no=t.no_no,
                   agreement=Share.of(t.agreed, t.n), kappa=cohen_kappa(t),
                   kappa_low=None if interval is None else interval[0],
                   kappa_high=None if interval is None else interval[1],
                   tpr=Share.of(t.yes_yes, t.yes_yes + t.yes_no), tnr=Share.of(t.no_no, t.no_yes + t.no_no),
                   base_rate=Share.of(t.yes_yes + t.yes_no, t.n), judge_rate=Share.of(t.yes_yes + t.no_yes, t.n))

    def kappa_text(self) -> str:
        """``0.62 [0.31, 0.93]``, or why there is none."""
        if self.kappa is None:
            return "n/a (no labels)" if not self.labels else "n/a (one answer only)"
        if self.kappa_low is None or self.kappa_high is None:
            return f"{self.kappa:.2f}"
        return f"{self.kappa:.2f} [{self.kappa_low:.2f}, {self.kappa_high:.2f}]"
