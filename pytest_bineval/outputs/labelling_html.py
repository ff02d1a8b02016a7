"""The HTML page's labelling (:mod:`.html`): what the page's script needs to build a label besides what the page
shows (each row's test id, evaluation index and output digest), the label the run's ``--bineval-labels`` file
already gives a verdict, and the calibration the page shows when the run had labels. The page builds the labels
file itself, no server involved: ``templates/labels.js`` makes each verdict's controls and computes the question's
digest (SHA-256, as :func:`pytest_bineval.labels.question_digest` does)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..calibrate import Calibration, LabelledVerdict
from ..models import Verdict
from ..report.document import ReportDocument
from ..report.record import EvaluationRecord


@dataclass(frozen=True)
class LabellingView:
    """What the page's labelling needs, by (evaluation key, question id)."""

    report_id: str
    rows: list[tuple[str, int, str]] = field(default_factory=list)  # per row of the page: test, index, output digest
    calibration: Calibration | None = None
    labelled: dict[tuple[str, str], LabelledVerdict] = field(default_factory=dict)

    @classmethod
    def of(cls, document: ReportDocument) -> LabellingView:
        cal = document.calibration
        labelled = {(x.key, x.question_id): x for x in cal.labelled} if cal is not None else {}
        return cls(report_id=f"{document.created}|{document.generator}|{len(document.evaluations)}",
                   rows=[(r.test, r.index, r.output_digest) for r in document.evaluations], calibration=cal,
                   labelled=labelled)

    @property
    def rows_json(self) -> str:
        """The rows as JSON, for an attribute of the page (escaped there like any text)."""
        return json.dumps(self.rows, ensure_ascii=False)

    def of_verdict(self, record: EvaluationRecord, verdict: Verdict) -> LabelledVerdict | None:
        """The label the run's labels file gives ``verdict`` (of ``record``), if any."""
        return self.labelled.get((record.key, verdict.question_id))
