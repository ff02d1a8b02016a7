"""The pytest-xdist relay of the run's ledger.

A worker sends its whole ledger once, at its session's end (:meth:`WorkerRelay.merge_worker`). So that a worker
that never gets there (Ctrl-C, SIGTERM, a crash) loses nothing it finished, it also reports after each test's call
and again after its teardown (a worker runs its last test's teardown only once it gets another test or is shut
down), with the test's report (:meth:`WorkerRelay.progress`): the test's own entries (the ledger's per-test fields, this
attempt's) and the worker's running counts (every other field). The controller keeps the last report of each test
until the worker's ledger arrives, and at the end merges what the workers that never sent it reported
(:meth:`WorkerRelay.merge_unfinished`). Which fields are which is the ledger's field metadata
(:func:`~pytest_bineval.report.ledger.per_test`): nothing here names a field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .ledger import RunLedger


@dataclass
class _Reported:
    """What one worker reported finished, test by test."""

    tests: dict[str, RunLedger] = field(default_factory=dict)  # per test: its last attempt's entries
    latest: RunLedger = field(default_factory=RunLedger)  # the worker's running counts, as of its last test

    def ledger(self) -> RunLedger:
        """The worker's ledger as far as it reported: the running counts once, every test's own entries."""
        merged = self.latest.part(tests=False)
        for test in self.tests.values():
            merged.merge(test.part(tests=True))
        return merged


@dataclass
class WorkerRelay:
    """The controller's side of the relay (and :meth:`progress`, the worker's)."""

    reported: dict[str, _Reported] = field(default_factory=dict)  # per worker, until its ledger arrives

    @staticmethod
    def progress(test: str, ledger: RunLedger, found: RunLedger) -> str:
        """A worker's report after ``test``'s call or teardown: the running counts of its ``ledger`` with the per-test
        fields of ``found`` (what this attempt of the test found)."""
        report = ledger.part(tests=False).merge(found.part(tests=True))
        return json.dumps({"test": test, "ledger": report.to_json()})

    def note(self, worker: str, payload: str) -> None:
        """Keep a :meth:`progress` report of ``worker``: its latest running counts, the last attempt of the test."""
        data = json.loads(payload)
        ledger = RunLedger.from_json(data["ledger"])
        reported = self.reported.setdefault(worker, _Reported())
        reported.tests[data["test"]] = reported.latest = ledger

    def merge_worker(self, into: RunLedger, payload: str, worker: str | None = None) -> None:
        """Merge a worker's ledger (sent at its session's end) into ``into``; what it reported test by test is
        then dropped."""
        if worker is not None:
            self.reported.pop(worker, None)
        into.add(RunLedger.loads(payload))

    def merge_unfinished(self, into: RunLedger) -> None:
        """At the controller's session end: what the workers whose ledger never arrived (interrupted, or crashed)
        reported is merged into ``into``, with a note saying so."""
        for worker, reported in sorted(self.reported.items()):
            into.add(reported.ledger().merge(RunLedger(notes=[
                f"bineval: pytest-xdist worker {worker} ended before sending its results (interrupted, or it "
                f"crashed): the report counts the {len(reported.tests)} test(s) it finished, and what it spent up "
                "to the last of them"])))
        self.reported.clear()
