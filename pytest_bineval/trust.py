"""Which dimensions the regression gate may act on: those whose judge agrees with the team's labels.

``--bineval-trust-kappa K`` (with ``--bineval-labels``) is a filter over dimensions: a dimension is *trusted* when
its Cohen's kappa against the labels (:mod:`pytest_bineval.calibrate`) is at least ``K``. A dimension without a
usable label, or whose kappa is undefined (one answer only), is not trusted: nothing shows its judge is good
enough. The gate consults the filter (:attr:`RegressionReport.untrusted
<pytest_bineval.report.comparison.RegressionReport.untrusted>`): changes of untrusted dimensions are still shown
and counted, but never fail the run, and the run's summary says which dimensions were not trusted and why.

:class:`RunLabels` is what a run with ``--bineval-labels`` keeps: the labels read up front (a bad file is a usage
error before any test runs), and at the end the calibration of the run's records and the gate's filter.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .calibrate import Calibration, calibrate
from .errors import UsageError
from .labels import LabelLine, read_labels
from .report.comparison import RegressionReport
from .report.record import EvaluationRecord


def untrusted_dimensions(calibration: Calibration, dimensions: Iterable[str], min_kappa: float) -> dict[str, str]:
    """Each of ``dimensions`` the gate must not trust at the bar ``min_kappa``, and why (in ``dimensions``' order)."""
    out: dict[str, str] = {}
    for name in dict.fromkeys(dimensions):
        found = calibration.dimension(name)
        if found is None or not found.stats.labels:
            out[name] = "no usable label"
        elif found.stats.kappa is None:
            out[name] = f"kappa undefined on {found.stats.labels} labels (one answer only)"
        elif found.stats.kappa < min_kappa:
            out[name] = f"kappa {found.stats.kappa:.2f} < {min_kappa:.2f} on {found.stats.labels} labels"
    return out


def consult(report: RegressionReport, untrusted: dict[str, str], *, gating: bool) -> RegressionReport:
    """``report`` whose gate leaves out the ``untrusted`` dimensions; ``gating``: the run has a gate
    (--bineval-fail-on-regression), whose verdict is made again."""
    consulted = report.model_copy(update={"untrusted": dict(untrusted)})
    if gating:
        consulted.failed = consulted.fail_reason() is not None
    return consulted


@dataclass(frozen=True)
class RunLabels:
    """``--bineval-labels`` (and ``--bineval-trust-kappa``) of a run: the labels, read when the run starts."""

    path: str
    labels: Sequence[LabelLine]
    trust_kappa: float | None = None

    @classmethod
    def read(cls, path: str | None, trust_kappa: float | None, rootpath: Path) -> RunLabels | None:
        """The run's labels (None without ``--bineval-labels``); a :class:`UsageError` for a file that cannot be
        read, or a trust bar without labels."""
        if path is None:
            if trust_kappa is not None:
                raise UsageError("--bineval-trust-kappa needs --bineval-labels FILE: the kappa of a dimension is "
                                 "its judge's agreement with those labels")
            return None
        file = rootpath / path
        if not file.is_file():
            raise UsageError(f"--bineval-labels {path}: there is no such file ({file}; a relative path is relative "
                             "to the rootdir). Make one with bineval label REPORT.json --labels FILE, or the HTML "
                             "report's Download labels")
        try:
            return cls(path, read_labels(file), trust_kappa)
        except UsageError as exc:
            raise UsageError(f"--bineval-labels: {exc}") from None

    def judge(self, records: Sequence[EvaluationRecord], regressions: RegressionReport | None, *,
              gating: bool) -> tuple[Calibration, RegressionReport | None]:
        """The calibration of this run's ``records``, and the comparison with a baseline as the gate sees it
        (with a trust bar, the untrusted dimensions left out of its verdict)."""
        calibration = calibrate(records, self.labels, self.path)
        if self.trust_kappa is None:
            return calibration, regressions
        names = [d.name for r in records for d in r.dimensions]
        untrusted = untrusted_dimensions(calibration, names, self.trust_kappa)
        calibration = calibration.model_copy(update={"trust_kappa": self.trust_kappa, "untrusted": untrusted})
        if regressions is None:
            return calibration, None
        return calibration, consult(regressions, untrusted, gating=gating)


def merged_calibration(calibrations: Sequence[Calibration], records: Sequence[EvaluationRecord],
                       rootpath: Path) -> tuple[Calibration | None, str | None]:
    """The calibration of shards' merged ``records`` (``bineval report merge``), recomputed from the labels file
    the shards were calibrated against (a relative path is relative to ``rootpath``), with their trust bar; and a
    note when it cannot be (shards with different labels files or trust bars, a labels file not found here).

    A shard's calibration speaks of its own tests only, and kappa is not additive: the merged one is computed again
    over every shard's verdicts, so that the merged report's gate trusts what the whole suite shows."""
    if not calibrations:
        return None, None
    files = sorted({c.labels_file for c in calibrations})
    bars = sorted({c.trust_kappa for c in calibrations}, key=lambda k: -1.0 if k is None else k)
    if len(files) > 1 or len(bars) > 1:
        return None, ("bineval: the shards were calibrated against different labels files or trust bars ("
                      f"{', '.join(files)}; --bineval-trust-kappa {', '.join(str(b) for b in bars)}): the merged "
                      "report has no calibration and its gate trusts every dimension")
    path, bar = files[0], bars[0]
    try:
        labels = read_labels(rootpath / path)
    except (UsageError, OSError) as exc:
        return None, (f"bineval: the shards' labels file {path} cannot be read here ({exc}): the merged report has "
                      "no calibration and its gate trusts every dimension; run bineval report merge where the "
                      "labels file is, or bineval calibrate MERGED.json --labels FILE")
    calibration, _ = RunLabels(path, labels, bar).judge(records, None, gating=False)
    return calibration, None
