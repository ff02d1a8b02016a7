"""The run ledger: everything a run found out, in one object with one :meth:`RunLedger.merge`.

A pytest-xdist worker sends its ledger to the controller (``workeroutput``, :meth:`RunLedger.dumps` /
:meth:`RunLedger.loads`), which merges it into its own; the same merge combines the ledgers of separate runs
(the shards of a suite). Merging is driven by the fields: a list is extended, a set united, a count and a usage
added. A new counter is one new field here, and nothing else changes: the payload, the merge and the
round-trip all follow the field list.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

from pydantic import BaseModel

from .models import Usage
from .record import EvaluationRecord, UnscoredTest


def _models(kind: type[BaseModel]) -> Any:
    """Field metadata: the items of this list are pydantic models of ``kind`` (dumped and validated)."""
    return {"model": kind}


@dataclass
class RunLedger:
    """What a run (one process, or several merged) found: records, usage, pins, unscored and failed tests,
    re-runs, the dimensions its assertions checked and the threshold keys of their markers, notes."""

    records: list[EvaluationRecord] = field(default_factory=list, metadata=_models(EvaluationRecord))
    usage: Usage = field(default_factory=Usage)  # what the merged-in ledgers' engines spent (see BinevalService)
    checklist_usage: Usage = field(default_factory=Usage)  # of that, checklist generation (no record carries it)
    checklists_generated: int = 0  # checklists the run generated (not read from a pin or the memo)
    pins_written: list[str] = field(default_factory=list)  # pin entries (pins.entry_id), one per checklist
    unpinned: set[str] = field(default_factory=set)  # pin entries of unpinned or stale checklists
    unscored: list[UnscoredTest] = field(default_factory=list, metadata=_models(UnscoredTest))
    failed_tests: set[str] = field(default_factory=set)  # ids of the tests whose call failed (or errored)
    rerun_evaluations: int = 0  # records of attempts a re-run plugin replaced (dropped from records)
    budget_refused: int = 0  # evaluations and checklists the merged-in engines refused (--bineval-budget spent)
    dimensions_checked: set[str] = field(default_factory=set)  # by any assertion of the run
    marker_threshold_keys: set[str] = field(default_factory=set)  # per-dimension keys of the markers' thresholds
    notes: list[str] = field(default_factory=list)  # problems met, shown at the end of the run

    def merge(self, other: RunLedger) -> RunLedger:
        """Add ``other`` into this ledger (in place; returned for chaining)."""
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if isinstance(mine, list):
                mine.extend(theirs)
            elif isinstance(mine, set):
                mine.update(theirs)
            else:  # a count or a Usage
                setattr(self, f.name, mine + theirs)
        return self

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
