"""The run ledger: everything a run found out and spent, in one object with one :meth:`RunLedger.merge`.

The :class:`~pytest_bineval.engine.Engine` adds what it spends into the ledger it is given (the session's, in a
pytest run; a private one outside), and the session adds what the tests found: there is no other running count. A
pytest-xdist worker sends its ledger to the controller (``workeroutput``, :meth:`RunLedger.dumps` /
:meth:`RunLedger.loads`; after each test, its progress: :mod:`.relay`), which merges it into its own; the same
merge combines the ledgers of separate runs (the shards of a suite: :meth:`RunLedger.of_document` reads a ledger
back from a finished report, and :meth:`RunLedger.document` is the one way a ledger becomes a
:class:`~pytest_bineval.report.document.ReportDocument`, for a run and for ``bineval report merge`` alike).

Everything is driven by the fields and what their metadata says (:func:`_kept`): a list is extended, a set united,
a count and a usage added; a *per-test* field holds entries of single tests (what a worker reports test by test);
``read`` says where a finished report keeps the field. A new counter is one new field here, and nothing else
changes: the payload, the merge, the per-test relay and the round-trip all follow the field list.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import Field, dataclass, field, fields
from typing import Any

from pydantic import BaseModel

from ..dimensions import BUILTIN, did_you_mean
from ..kinds import Threshold
from ..models import ConfirmCost, Usage
from .batch import BatchSummary
from .comparison import KeptInput, RegressionReport
from .document import ChecklistGeneration, OptimizeOutcome, PinAction, ReportDocument, ReportSettings, Totals
from .record import ConfirmationSummary, EvaluationRecord, JudgedBy, UnscoredTest, UnstableQuestion, pin_key

Reader = Callable[[ReportDocument], Any]


def _kept(*, read: Reader | None = None, model: type[BaseModel] | None = None,
          per_test: bool = False) -> dict[str, Any]:
    """A field's metadata: ``read``: how a finished report keeps it (None: a report does not, and a ledger read
    back from one has it empty); ``model``: the items of this list are pydantic models of that kind (dumped and
    validated); ``per_test``: it holds entries of single tests (records, their outcome), sent test by test."""
    return {"read": read, "model": model, "per_test": per_test}


def per_test(f: Field[Any]) -> bool:
    """Whether ``f`` holds entries of single tests (see :meth:`RunLedger.part`)."""
    return bool(f.metadata.get("per_test"))


def _usage(document: ReportDocument) -> Usage:
    t = document.totals
    return Usage(llm_calls=t.llm_calls, failed_requests=t.failed_requests, cache_hits=t.cache_hits,
                 prompt_tokens=t.prompt_tokens, completion_tokens=t.completion_tokens, cost_usd=t.cost_usd,
                 unpriced_requests=t.unpriced_requests, structured_output=dict(t.structured_output),
                 cached_prompt_tokens=t.cached_prompt_tokens, cache_write_tokens=t.cache_write_tokens,
                 below_cache_minimum=dict(t.below_cache_minimum), estimated_requests=t.estimated_requests,
                 not_streamed=dict(t.not_streamed), batch_requests=t.batch_requests)


def _confirm_cost(document: ReportDocument) -> ConfirmCost:
    """What ``--bineval-confirm`` asked in the run of ``document`` (nothing when it was off)."""
    c = document.confirmation
    if c is None:
        return ConfirmCost()
    return ConfirmCost(questions=c.questions, reasked=c.reasked, reasks=c.reasks,
                       usage=Usage(llm_calls=c.requests, cache_hits=c.cache_hits))


def _pin_entries(document: ReportDocument, *statuses: str) -> list[str]:
    """A report keeps the counts of its pin entries, not the entries: here they are the records' checklists (one
    entry per test function and task, :func:`~pytest_bineval.report.record.pin_key`), so that a checklist two
    shards share counts once, as in one run."""
    return sorted({repr(pin_key(r)) for r in document.evaluations if r.checklist_status in statuses})


@dataclass
class RunLedger:
    """What a run (one process, or several merged) found and spent: records, usage, pins (and what an update run
    did to them), unscored, failed, run and collected tests, re-runs, the dimensions its assertions checked and the
    threshold keys of their markers, notes."""

    records: list[EvaluationRecord] = field(default_factory=list, metadata=_kept(
        read=lambda d: list(d.evaluations), model=EvaluationRecord, per_test=True))
    usage: Usage = field(default_factory=Usage, metadata=_kept(read=_usage))  # every request of the run's engines
    # of that, checklist generation (no record carries it)
    checklist_usage: Usage = field(default_factory=Usage, metadata=_kept(read=lambda d: d.checklists.usage))
    # what --bineval-confirm asked (its re-asks' usage is in the total too)
    confirm_cost: ConfirmCost = field(default_factory=ConfirmCost, metadata=_kept(read=_confirm_cost))
    # checklists the run generated (not read from a pin or the memo)
    checklists_generated: int = field(default=0, metadata=_kept(read=lambda d: d.checklists.generated))
    # pin entries (pins.entry_id), one per checklist
    pins_written: list[str] = field(default_factory=list, metadata=_kept(
        read=lambda d: _pin_entries(d, "written")))
    # what --bineval-update-checklists did to each pin entry (created, rewritten, listed, kept because edited)
    pin_actions: list[PinAction] = field(default_factory=list, metadata=_kept(read=lambda d: list(d.pins),
                                                                               model=PinAction))
    # pin entries of unpinned or stale checklists
    unpinned: set[str] = field(default_factory=set, metadata=_kept(
        read=lambda d: set(_pin_entries(d, "unpinned", "stale"))))
    unscored: list[UnscoredTest] = field(default_factory=list, metadata=_kept(
        read=lambda d: list(d.unscored), model=UnscoredTest, per_test=True))
    # ids of the tests whose call failed (or errored)
    failed_tests: set[str] = field(default_factory=set, metadata=_kept(read=lambda d: set(d.failed_tests),
                                                                        per_test=True))
    # ids of the tests whose call ran (a baseline's others: not run)
    ran_tests: set[str] = field(default_factory=set, metadata=_kept(read=lambda d: set(d.ran_tests or ()),
                                                                     per_test=True))
    # ids collected, deselected ones included
    collected_tests: set[str] = field(default_factory=set, metadata=_kept(
        read=lambda d: set(d.collected_tests or ())))
    # records of attempts a re-run plugin replaced (dropped from records)
    rerun_evaluations: int = field(default=0, metadata=_kept(read=lambda d: d.totals.rerun_evaluations))
    # evaluations and checklists the engines refused (--bineval-budget spent)
    budget_refused: int = field(default=0, metadata=_kept(read=lambda d: d.totals.budget_refused))
    # reply-cache entries not used because unsigned or forged (--bineval-cache-key-env): each was asked again
    cache_rejected: int = field(default=0, metadata=_kept(read=lambda d: d.totals.cache_rejected))
    # by any assertion of the run
    dimensions_checked: set[str] = field(default_factory=set, metadata=_kept(
        read=lambda d: {dim.name for r in d.evaluations for dim in r.dimensions}))
    marker_threshold_keys: set[str] = field(default_factory=set)  # per-dimension keys of the markers' thresholds
    dimensions_defined: set[str] = field(default_factory=set)  # named by the markers of every collected test
    notes: list[str] = field(default_factory=list, metadata=_kept(read=lambda d: list(d.notes)))  # shown at the end
    # what --bineval-batch did (pytest_bineval.batch)
    batch: BatchSummary = field(default_factory=BatchSummary, metadata=_kept(read=lambda d: d.batch or BatchSummary()))
    # the full texts of evaluations whose records keep less, for re-asking their flips (never in a report)
    kept_inputs: list[KeptInput] = field(default_factory=list, metadata=_kept(model=KeptInput, per_test=True))

    def __post_init__(self) -> None:
        # not a field: what add() and part() hold (the engine and a test's threads add at once)
        self._lock = threading.Lock()

    def add(self, other: RunLedger) -> None:
        """:meth:`merge` ``other`` into this ledger under its lock: the one way to add to a ledger that several
        threads use (an engine's usage, a test's records, while the test's threads evaluate)."""
        with self._lock:
            self.merge(other)

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

    def keep_attempt(self, test: str, last: RunLedger) -> None:
        """Drop what earlier attempts of ``test`` found (a re-run plugin ran it again): its records and unscored
        entries that are not those of its last attempt (``last``). The records dropped are counted in
        ``rerun_evaluations``; their requests stay in the usage."""
        with self._lock:
            stale = [r for r in self.records if r.test == test and not any(r is k for k in last.records)]
            self.records[:] = [r for r in self.records if not any(r is s for s in stale)]
            self.rerun_evaluations += len(stale)
            self.unscored[:] = [u for u in self.unscored if u.test != test or any(u is k for k in last.unscored)]

    def part(self, *, tests: bool) -> RunLedger:
        """A copy of this ledger's per-test fields (``tests``: records, unscored, failed and ran tests) or of its
        other fields (not ``tests``: the running counts); the rest empty."""
        with self._lock:
            return RunLedger().merge(RunLedger(**{f.name: getattr(self, f.name) for f in fields(self)
                                                  if per_test(f) == tests}))

    def totals(self, regressions: RegressionReport | None = None) -> Totals:
        return Totals.of(self.records, self.usage, pins_written=len(set(self.pins_written)),
                         regressions=regressions, unscored=len(self.unscored), reruns=self.rerun_evaluations,
                         unpinned=len(self.unpinned), budget_refused=self.budget_refused,
                         cache_rejected=self.cache_rejected)

    def document(self, settings: ReportSettings, *, regressions: RegressionReport | None = None,
                 optimize: list[OptimizeOutcome] | None = None, notes: Sequence[str] = (),
                 partial: str | None = None, judged_by: JudgedBy | None = None,
                 confirm: tuple[int, float] | None = None) -> ReportDocument:
        """The finished document of this ledger (a run's, or the shards' merged): ``notes`` come after the
        ledger's own; ``partial``: why the run was cut short, if it was; ``judged_by``: what judged it;
        ``confirm``: ``--bineval-confirm``'s rounds and confidence level, when it was on.

        The evaluations are in the order of their test ids (a test's own in the order it made them), and so are the
        unscored tests: not in the order tests finished or shards were merged, which changes from run to run (and
        with xdist); every output lists them as the document does."""
        records = sorted(self.records, key=lambda r: (r.test, r.index))
        return ReportDocument(settings=settings, totals=self.totals(regressions), evaluations=records,
                              optimize=optimize, regressions=regressions, unstable=UnstableQuestion.of(records),
                              unscored=sorted(self.unscored, key=lambda u: u.test),
                              failed_tests=sorted(self.failed_tests),
                              notes=list(dict.fromkeys([*self.notes, *notes])), partial=partial is not None,
                              ran_tests=sorted(self.ran_tests), collected_tests=sorted(self.collected_tests),
                              partial_reason=partial,
                              checklists=ChecklistGeneration(generated=self.checklists_generated,
                                                             usage=self.checklist_usage),
                              judged_by=judged_by,
                              pins=sorted(set(self.pin_actions), key=lambda a: (a.path, a.dimensions, a.task,
                                                                                a.action, a.why, a.test)),
                              confirmation=None if confirm is None else ConfirmationSummary.of(
                                  *confirm, self.confirm_cost, self.records),
                              batch=self.batch if self.batch.used else None)

    @classmethod
    def of_document(cls, document: ReportDocument) -> RunLedger:
        """The ledger a finished report holds (what merging the reports of shards starts from): each field as its
        ``read`` metadata finds it in ``document``; a field a report does not keep stays empty."""
        read: dict[str, Reader | None] = {f.name: f.metadata.get("read") for f in fields(cls)}
        return cls(**{name: reader(document) for name, reader in read.items() if reader is not None})

    def threshold_notes(self, cli: Threshold | None = None) -> list[str]:
        """A per-dimension threshold key of the markers or the command line that no assertion of the run checked
        and that looks like a misspelling of a dimension the run knows (a typo such as ``fluncy=0.4`` would
        otherwise leave the default threshold in force without a word). A built-in name, a name an assertion
        checked or a collected test's marker names is no typo, and neither is a name close to none of them: a
        ``-k`` or single-file run need not reach the tests that check it. ``cli``: the run's
        ``--bineval-threshold``."""
        if not self.dimensions_checked:
            return []
        sources = (("--bineval-threshold (or the bineval_threshold ini key)", set(cli) if isinstance(cli, Mapping)
                    else set()), ("@pytest.mark.bineval(threshold=...)", self.marker_threshold_keys))
        known = self.dimensions_checked | self.dimensions_defined | set(BUILTIN)
        notes = []
        for origin, keys in sources:
            for key in sorted(keys - {"*"} - known):
                hint = did_you_mean(key, sorted(known))  # never the key itself: it is not known
                if hint:
                    notes.append(f"bineval: {origin} sets a threshold for {key!r}, which no assertion of this run "
                                 f"checks{hint}")
        return notes

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, BaseModel):
                out[f.name] = value.model_dump(mode="json")
            elif f.metadata.get("model") is not None:
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
            elif f.metadata.get("model") is not None:
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
