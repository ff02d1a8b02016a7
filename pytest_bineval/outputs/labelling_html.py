"""The HTML page's labelling (:mod:`.html`): per verdict, what the page's script needs to build a label (the
question's digest, the evaluation's output digest) and the label the run's ``--bineval-labels`` file already gives
it; and the calibration the page shows when the run had labels. The page builds the labels file itself (no server):
see ``templates/labels.js``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..calibrate import Calibration, LabelledVerdict
from ..labels import question_digest
from ..models import Verdict
from ..report.document import ReportDocument
from ..report.record import EvaluationRecord


@dataclass(frozen=True)
class VerdictLabel:
    """One verdict's labelling data: its question's digest and the label the run's file gives it (if any)."""

    digest: str
    answer: str = ""  # "yes" / "no": labelled in the run's --bineval-labels file
    labeler: str = ""
    note: str = ""


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

    def of_verdict(self, record: EvaluationRecord, verdict: Verdict) -> VerdictLabel:
        known = self.labelled.get((record.key, verdict.question_id))
        digest = question_digest(verdict.question)
        if known is None:
            return VerdictLabel(digest)
        return VerdictLabel(digest, known.answer, known.labeler, known.note)
