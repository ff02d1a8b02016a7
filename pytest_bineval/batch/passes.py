"""``--bineval-batch`` in pytest: the first passes over the tests, before the run's own loop (the final pass).

A first pass runs each test's protocol (``_pytest.runner.runtestprotocol(item, log=False)``: set-up, call,
tear-down, no report logged) with the engine's seam collecting: the test bodies really run (so each test's output
is known), every assertion records the requests it needs, and nothing the pass does stays: the engine adds into a
ledger of the pass's own (dropped), the checklists memo and the items' user properties are put back as they were,
the reply cache is read but not written (the final pass writes what it derives), pins are not written, no record
reaches the ``pytest_bineval_evaluated`` hook, and warnings are not shown (the final pass shows its own). So the
test bodies run twice, or more when a request depends on an earlier reply (one first pass per round).

Under pytest-xdist every worker collected every test: each first-passes its share (every n-th test), and the
workers meet before their final passes (:meth:`~.runner.BatchRunner.meet`), since a worker may run a test whose
requests another worker sent. Shards of a suite (separate pytest runs sharing a Redis cache) each collect their
own tests; a request two of them need is submitted once (:mod:`.registry`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from ..errors import BinevalError, UsageError
from ..report.batch import BatchSummary
from .options import BatchOptions
from .seam import BatchSeam, first_pass_of, group_of, in_process

if TYPE_CHECKING:
    from ..engine import Engine
    from ..options import Options
    from ..session import BinevalService
    from .runner import BatchRunner

__all__ = ["BatchPasses", "ProgressWatcher", "before_final_pass", "check_batch_api", "start"]


@dataclass
class _Saved:
    """What a first pass may change, kept to be put back."""

    service: BinevalService
    items: list[pytest.Item]
    memo: dict[Any, Any] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
    options: Any = None
    on_record: Any = None
    properties: list[list[tuple[str, object]]] = field(default_factory=list)

    @classmethod
    def take(cls, service: BinevalService, items: list[pytest.Item]) -> _Saved:
        # the checklists memo: a first pass's checklists are not kept
        return cls(service, items, memo=dict(service._memo),
                   attempts=dict(service.attempts), options=service.options, on_record=service.on_record,
                   properties=[list(item.user_properties) for item in items])

    def restore(self) -> None:
        service = self.service
        service.attempts = self.attempts
        service._memo = self.memo
        service.options, service.on_record = self.options, self.on_record
        for item, properties in zip(self.items, self.properties, strict=True):
            item.user_properties[:] = properties


def first_pass(service: BinevalService, seam: BatchSeam, items: list[pytest.Item]) -> list[pytest.Item]:
    """Run ``items``' protocols once, collecting (see the module); nothing of it stays. Returns the items that
    met a request no reply answered yet (the others are complete: a later first pass need not run them)."""
    from _pytest.runner import runtestprotocol

    saved = _Saved.take(service, items)
    service.options = dataclasses.replace(service.options, update_checklists=None)  # no pin is written
    service.on_record = None
    waiting: list[pytest.Item] = []
    try:
        with first_pass_of(service.engine), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i, item in enumerate(items):
                before = seam.deferrals
                runtestprotocol(item, log=False, nextitem=items[i + 1] if i + 1 < len(items) else None)
                if seam.deferrals != before:
                    waiting.append(item)
    finally:
        saved.restore()
    return waiting


def check_batch_api(engine: Engine) -> None:
    """Before anything runs: the run's judge and checklist models can be batched (UsageError saying why not: a
    provider without a batch API, a server without the Batches API, a refused key). In-process models need no
    check (their requests are asked directly)."""
    import asyncio

    from .provider import BatchAPI, Endpoint

    s = engine.settings
    endpoints = {Endpoint(g.provider, g.api_base) for g in
                 (group_of(m, s.api_base) for m in {s.judge_model, s.generator_model} if not in_process(m))}

    async def probe_all() -> None:
        for endpoint in sorted(endpoints, key=lambda e: (e.provider, e.api_base or "")):
            await BatchAPI(endpoint, s.extra, timeout=max(30.0, min(s.timeout, 120.0))).probe()

    asyncio.run(probe_all())


@dataclass
class BatchPasses:
    """The batch side of one pytest process: its seam, and its runner (None when every model runs in-process)."""

    seam: BatchSeam
    runner: BatchRunner | None

    def finish(self, service: BinevalService) -> None:
        """After the final pass: what the batch did goes into the run's ledger (and its notes). The seam leaves the
        engine: what is asked after the tests (the regression gate's re-asks of flipped questions, each waiting for
        the answer before it) is asked directly, at the full price."""
        service.engine.batch = None
        if self.runner is not None:
            summary = self.runner.finish()
            service.ledger.notes.extend(self.runner.notes)
        else:
            summary = BatchSummary(in_process=self.seam.counts.in_process)
        service.ledger.batch = service.ledger.batch + summary


def before_final_pass(session: pytest.Session, service: BinevalService, options: Options,
                      show: Callable[[str], None] | None) -> BatchPasses:
    """The first passes and their batches (see the module), before the run's own loop. A batch not finished in time
    (or that cannot be followed) ends the session as interrupted, saying how to resume: nothing is judged."""
    from .registry import registry_for
    from .runner import BatchError, BatchRunner

    engine = service.engine
    s = engine.settings
    seam = BatchSeam(engine.cache, options.batch_failures, rewrite_pins=options.update_checklists == "all")
    engine.batch = seam
    if all(in_process(m) for m in {s.judge_model, s.generator_model}):
        service.ledger.notes.append(
            f"bineval: --bineval-batch: the judge {s.judge_model} runs in this process and has no batch API: its "
            "requests were asked directly, in one pass (the test bodies ran once)")
        return BatchPasses(seam, None)
    workerinput: dict[str, Any] | None = getattr(session.config, "workerinput", None)
    index, count = 0, 1
    run_id = None
    if workerinput is not None:
        index = int(str(workerinput.get("workerid", "gw0")).removeprefix("gw") or 0)
        count = int(workerinput.get("workercount", 1) or 1)
        run_id = str(workerinput.get("testrunuid") or "")
    items = list(session.items)[index::count]
    runner = BatchRunner(engine, seam, registry_for(s.cache_dir, s.cache_url, s.cache_prefix),
                         BatchOptions(options.batch_timeout, options.batch_failures), run_id=run_id or None,
                         show=show)
    passes = BatchPasses(seam, runner)

    def collect() -> None:  # each round runs the tests that were waiting for a reply in the last one
        items[:] = first_pass(service, seam, items)

    try:
        runner.run(collect)
        if workerinput is not None and run_id:
            runner.meet(run_id, str(workerinput.get("workerid")), count)
    except (BatchError, UsageError) as exc:
        if workerinput is not None and run_id and not isinstance(exc, UsageError):
            with contextlib.suppress(BinevalError):  # the others time out on their own
                runner.registry.arrive(run_id, str(workerinput.get("workerid")), count, gave_up=str(exc)[:300])
        passes.finish(service)
        service.ledger.notes.append(f"bineval: {exc}")
        pytest.exit(str(exc), returncode=pytest.ExitCode.INTERRUPTED)
    return passes


class ProgressWatcher:
    """pytest-xdist's controller: the workers wait for their batches in silence (their output is not shown), so
    the controller shows the batches' progress from the record until the first test result arrives."""

    def __init__(self, service: BinevalService, show: Callable[[str], None], every: float = 30.0) -> None:
        from .registry import registry_for

        s = service.engine.settings
        self.registry = registry_for(s.cache_dir, s.cache_url, s.cache_prefix)
        self.show = show
        self.every = every
        self.since = service.started_ns / 1e9  # batches submitted since this session started are its own
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="bineval-batch-progress", daemon=True)

    def start(self) -> ProgressWatcher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def finish(self, service: BinevalService) -> None:
        del service
        self.stop()

    def _watch(self) -> None:
        from ..outputs.batch import progress_line

        last = ""
        while not self._stop.wait(self.every):
            try:
                data = self.registry.read()
            except BinevalError:
                continue
            ours = [e for e in data.batches.values() if e.submitted >= self.since - 1 or e.state == "pending"]
            for e in ours:  # a fetched batch's counts are its replies and failures
                e.completed, e.failed = (e.completed, e.failed) if e.state == "pending" else (len(e.keys) - len(
                    e.failures), len(e.failures))
            if not ours:
                continue
            line = progress_line(len(ours), sum(e.state == "fetched" for e in ours), sum(len(e.keys) for e in ours),
                                 sum(e.completed for e in ours), sum(e.failed for e in ours), time.time() - self.since)
            if line != last and not self._stop.is_set():
                self.show(line)
                last = line


def start(session: pytest.Session, service: BinevalService, options: Options,
          show: Callable[[str], None]) -> BatchPasses | ProgressWatcher | None:
    """The batch work of this process before the run's loop (None: none): pytest-xdist's controller watches the
    workers' progress; a worker, or a run without pytest-xdist, does the first passes. ``finish(service)`` of what
    it returns comes after the loop."""
    if session.config.pluginmanager.has_plugin("dsession"):  # pytest-xdist's controller: its workers do the work
        return ProgressWatcher(service, show).start()
    if not session.items:
        return None
    worker = hasattr(session.config, "workerinput")
    return before_final_pass(session, service, options, None if worker else show)
