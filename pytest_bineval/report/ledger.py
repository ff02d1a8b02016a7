"""The run ledger: everything a run found out, in one object with one :meth:`RunLedger.merge`.

A pytest-xdist worker sends its ledger to the controller (``workeroutput``, :meth:`RunLedger.dumps` /
:meth:`RunLedger.loads`), which merges it into its own; the same merge combines the ledgers of separate runs
(the shards of a suite: :meth:`RunLedger.of_document` reads a ledger back from a finished report, and
:meth:`RunLedger.document` is the one way a ledger becomes a
:class:`~pytest_bineval.report.document.ReportDocument`, for a run and for ``bineval report merge`` alike).
Merging is driven by the fields: a list is extended, a set united, a count and a usage added. A new counter is one
new field here, and nothing else changes: the payload, the merge and the round-trip all follow the field list.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from pydantic import BaseModel

from ..models import ConfirmCost, Usage
from .comparison import KeptInput, RegressionReport
from .document import ChecklistGeneration, OptimizeOutcome, PinAction, ReportDocument, ReportSettings, Totals
from .record import ConfirmationSummary, EvaluationRecord, JudgedBy, UnscoredTest, UnstableQuestion, pin_key


def _models(kind: type[BaseModel]) -> Any:
    """Field metadata: the items of this list are pydantic models of ``kind`` (dumped and validated)."""
    return {"model": kind}


@dataclass
class RunLedger:
    """What a run (one process, or several merged) found: records, usage, pins (and what an update run did to
    them), unscored, failed, run and collected tests, re-runs, the dimensions its assertions checked and the
    threshold keys of their markers, notes."""

    records: list[EvaluationRecord] = field(default_factory=list, metadata=_models(EvaluationRecord))
    usage: Usage = field(default_factory=Usage)  # what the merged-in ledgers' engines spent (see BinevalService)
    checklist_usage: Usage = field(default_factory=Usage)  # of that, checklist generation (no record carries it)
    confirm_cost: ConfirmCost = field(default_factory=ConfirmCost)  # what --bineval-confirm asked (see Engine)
    checklists_generated: int = 0  # checklists the run generated (not read from a pin or the memo)
    pins_written: list[str] = field(default_factory=list)  # pin entries (pins.entry_id), one per checklist
    # what --bineval-update-checklists did to each pin entry (created, rewritten, listed, kept because edited)
    pin_actions: list[PinAction] = field(default_factory=list, metadata=_models(PinAction))
    unpinned: set[str] = field(default_factory=set)  # pin entries of unpinned or stale checklists
    unscored: list[UnscoredTest] = field(default_factory=list, metadata=_models(UnscoredTest))
    failed_tests: set[str] = field(default_factory=set)  # ids of the tests whose call failed (or errored)
    ran_tests: set[str] = field(default_factory=set)  # ids of the tests whose call ran (a baseline's others: not run)
    collected_tests: set[str] = field(default_factory=set)  # ids collected, deselected ones included
    rerun_evaluations: int = 0  # records of attempts a re-run plugin replaced (dropped from records)
    budget_refused: int = 0  # evaluations and checklists the merged-in engines refused (--bineval-budget spent)
    dimensions_checked: set[str] = field(default_factory=set)  # by any assertion of the run
    marker_threshold_keys: set[str] = field(default_factory=set)  # per-dimension keys of the markers' thresholds
    dimensions_defined: set[str] = field(default_factory=set)  # named by the markers of every collected test
    notes: list[str] = field(default_factory=list)  # problems met, shown at the end of the run
    # the full texts of evaluations whose records keep less, for re-asking their flips (never in a report)
    kept_inputs: list[KeptInput] = field(default_factory=list, metadata=_models(KeptInput))

    def merge(self, other: RunLedger) -> RunLedger:
        """Add ``other`` into this ledger (in place; returned for chaining)."""
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if isinstance(mine, list):
                mine.extend(theirs)
            elif isinstance(mine, set):
                mine.update(theirs)
            else:  # a count, a Usage or a ConfirmCost
                setattr(self, f.name, mine + theirs)
        return self

    def totals(self, regressions: RegressionReport | None = None) -> Totals:
        return Totals.of(self.records, self.usage, pins_written=len(set(self.pins_written)),
                         regressions=regressions, unscored=len(self.unscored), reruns=self.rerun_evaluations,
                         unpinned=len(self.unpinned), budget_refused=self.budget_refused)

    def document(self, settings: ReportSettings, *, regressions: RegressionReport | None = None,
                 optimize: list[OptimizeOutcome] | None = None, notes: Sequence[str] = (),
                 partial: str | None = None, judged_by: JudgedBy | None = None,
                 confirm: tuple[int, float] | None = None) -> ReportDocument:
        """The finished document of this ledger (a run's, or the shards' merged): ``notes`` come after the
        ledger's own; ``partial``: why the run was cut short, if it was; ``judged_by``: what judged it;
        ``confirm``: ``--bineval-confirm``'s rounds and confidence level, when it was on."""
        return ReportDocument(settings=settings, totals=self.totals(regressions), evaluations=list(self.records),
                              optimize=optimize, regressions=regressions, unstable=UnstableQuestion.of(self.records),
                              unscored=list(self.unscored), failed_tests=sorted(self.failed_tests),
                              notes=list(dict.fromkeys([*self.notes, *notes])), partial=partial is not None,
                              ran_tests=sorted(self.ran_tests), collected_tests=sorted(self.collected_tests),
                              partial_reason=partial,
                              checklists=ChecklistGeneration(generated=self.checklists_generated,
                                                             usage=self.checklist_usage),
                              judged_by=judged_by,
                              pins=sorted(set(self.pin_actions), key=lambda a: (a.path, a.dimensions, a.task,
                                                                                a.action, a.why, a.test)),
                              confirmation=None if confirm is None else ConfirmationSummary.of(
                                  *confirm, self.confirm_cost, self.records))

    @classmethod
    def of_document(cls, document: ReportDocument) -> RunLedger:
        """The ledger a finished report holds (what merging the reports of shards starts from).

        A report keeps the counts of its pin entries, not the entries: here they are the records' checklists (one
        entry per test function and task, :func:`~pytest_bineval.report.record.pin_key`), so that a checklist two shards
        share counts once, as in one run."""
        t, records = document.totals, document.evaluations
        usage = Usage(llm_calls=t.llm_calls, failed_requests=t.failed_requests, cache_hits=t.cache_hits,
                      prompt_tokens=t.prompt_tokens, completion_tokens=t.completion_tokens, cost_usd=t.cost_usd,
                      unpriced_requests=t.unpriced_requests, structured_output=dict(t.structured_output),
                      cached_prompt_tokens=t.cached_prompt_tokens, cache_write_tokens=t.cache_write_tokens,
                      below_cache_minimum=dict(t.below_cache_minimum), estimated_requests=t.estimated_requests,
                      not_streamed=dict(t.not_streamed))
        return cls(
            records=list(records), usage=usage, checklist_usage=document.checklists.usage,
            checklists_generated=document.checklists.generated,
            pins_written=sorted({repr(pin_key(r)) for r in records if r.checklist_status == "written"}),
            unpinned={repr(pin_key(r)) for r in records if r.checklist_status in ("unpinned", "stale")},
            unscored=list(document.unscored), failed_tests=set(document.failed_tests),
            ran_tests=set(document.ran_tests or ()), collected_tests=set(document.collected_tests or ()),
            rerun_evaluations=t.rerun_evaluations, budget_refused=t.budget_refused,
            dimensions_checked={d.name for r in records for d in r.dimensions},
            notes=list(document.notes), pin_actions=list(document.pins), confirm_cost=_confirm_cost(document),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, BaseModel):
                out[f.name] = value.model_dump(mode="json")
            elif "model" in f.metadata:
                out[f.name] = [item.model_dump(mode="json") for item in value]
            elif isinstance(value, set):
                out[f.name] = sorted(value)
            else:
                out[f.name] = value
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunLedger:
        """The ledger of :meth:`to_json`'s data; a field it lacks (an older sender) keeps its empty default."""
        ledger = cls()
        for f in fields(ledger):
            if f.name not in data:
                continue
            empty, raw = getattr(ledger, f.name), data[f.name]
            value: Any
            if isinstance(empty, BaseModel):
                value = type(empty).model_validate(raw)
            elif "model" in f.metadata:
                value = [f.metadata["model"].model_validate(item) for item in raw]
            elif isinstance(empty, set):
                value = set(raw)
            else:
                value = type(empty)(raw)
            setattr(ledger, f.name, value)
        return ledger

    def dumps(self) -> str:
        return json.dumps(self.to_json())

    @classmethod
    def loads(cls, text: str) -> RunLedger:
        return cls.from_json(json.loads(text))


def _confirm_cost(document: ReportDocument) -> ConfirmCost:
    """What ``--bineval-confirm`` asked in the run of ``document`` (nothing when it was off)."""
    c = document.confirmation
    if c is None:
        return ConfirmCost()
    return ConfirmCost(questions=c.questions, reasked=c.reasked, reasks=c.reasks,
                       usage=Usage(llm_calls=c.requests, cache_hits=c.cache_hits))
