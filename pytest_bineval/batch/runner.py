"""The rounds of a batch run, whatever runs the first passes (pytest, ``bineval bench``).

:meth:`BatchRunner.run`: a first pass (``collect``, with the seam collecting) records the requests the run needs
and no batch has answered; they are submitted, one batch per model (a request pending in a batch another process
submitted is waited for instead: :mod:`.registry`), within ``--bineval-budget`` (each line estimated at its
prompt and ``max_tokens``, at the batch price); the runner waits for every batch of the round, showing progress,
and fetches the finished ones into the reply cache. Then the next first pass: the requests that depended on those
replies are collected, and so on, until a first pass records nothing (at most :data:`MAX_ROUNDS`). Waiting longer
than ``--bineval-batch-timeout`` (over all rounds) raises :class:`BatchTimeout`: the batches stay written down, and
the next run with the same cache resumes waiting for them.

:meth:`BatchRunner.finish`, after the final pass: what the final pass did (from the seam) and what the replies this
process fetched cost (each counted once: where the final pass used it, else now) go into the run's
:class:`~pytest_bineval.report.batch.BatchSummary`.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import BinevalError
from ..models import Usage
from ..outputs.batch import duration_text, progress_line
from ..report.batch import BatchSummary
from .options import BatchOptions
from .provider import BatchAPI, BatchStatus, Endpoint, batch_line, chunks, describe, estimate, read_results, reply_usage
from .provider import unsupported as unsupported_provider
from .registry import BatchEntry, Registry
from .seam import BatchSeam, Group, Recorded, Stored

if TYPE_CHECKING:
    from ..engine import Engine

__all__ = ["MAX_ROUNDS", "BatchError", "BatchRunner", "BatchTimeout", "default_run_id"]

MAX_ROUNDS = 16  # first passes: a checklist's requirements, its questions, the verdicts, explanations, re-asks ...
SHOW_EVERY = 600.0  # seconds between progress lines when nothing changes


class BatchError(BinevalError):
    """A batch could not be submitted or followed (the batches already submitted stay written down)."""


class BatchTimeout(BatchError):
    """The batches were not finished within ``--bineval-batch-timeout``: nothing was judged."""


def default_run_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{int(time.time())}"


@dataclass
class _Waiting:
    """The batches of one round: their last status, and which this process submitted."""

    statuses: dict[str, BatchStatus] = field(default_factory=dict)
    mine: set[str] = field(default_factory=set)


def _schema_name(body: dict[str, object]) -> str | None:
    fmt = body.get("response_format")
    schema = fmt.get("json_schema") if isinstance(fmt, dict) else None
    name = schema.get("name") if isinstance(schema, dict) else None
    return name if isinstance(name, str) else None


def _explained(text: str | None) -> bool:
    """Whether a verdict's reply holds its answer and an explanation (no request follows it)."""
    if text is None:
        return False
    try:
        reply = json.loads(text)
    except ValueError:
        return False
    return (isinstance(reply, dict) and str(reply.get("answer", "")).strip().lower() in ("yes", "no")
            and bool(str(reply.get("explanation") or "").strip()))


class BatchRunner:
    """The batch rounds of one process (see the module). ``show``: where progress lines go; ``poll``: the first
    and the longest wait between status requests (seconds)."""

    def __init__(self, engine: Engine, seam: BatchSeam, registry: Registry, options: BatchOptions, *,
                 run_id: str | None = None, show: Callable[[str], None] | None = None,
                 poll: tuple[float, float] = (0.5, 30.0)) -> None:
        self.engine = engine
        self.seam = seam
        self.registry = registry
        self.options = options
        self.run_id = run_id or default_run_id()
        self.show = show or (lambda line: None)
        self.poll = poll
        self.summary = BatchSummary()
        self.notes: list[str] = []
        self._apis: dict[Endpoint, BatchAPI] = {}
        self._committed = 0.0  # --bineval-budget: the estimates of the lines this process submitted
        self._seen: set[str] = set()  # batches this process waited for
        self._failed_usage = Usage()  # the failed lines of the batches this process fetched
        self._started: float | None = None  # monotonic, at the first wait
        self._waited = 0.0

    def api(self, provider: str, api_base: str | None) -> BatchAPI:
        endpoint = Endpoint(provider, api_base)
        if endpoint not in self._apis:
            self._apis[endpoint] = BatchAPI(endpoint, self.engine.settings.extra,
                                            timeout=max(60.0, self.engine.settings.timeout))
        return self._apis[endpoint]

    # -- the rounds ----------------------------------------------------------------------------------------------
    def run(self, collect: Callable[[], None], *, rounds: int = MAX_ROUNDS) -> None:
        """First passes and batches until a first pass records nothing, or the last round's replies cannot lead to
        another request (see :meth:`last_round`)."""
        for n in range(1, rounds + 1):
            self.seam.collecting = True
            try:
                collect()
            finally:
                self.seam.collecting = False
            recorded = self.seam.take_recorded()
            if not recorded:
                return
            self.summary.rounds = n
            waiting = asyncio.run(self._submit(recorded))
            asyncio.run(self._wait(waiting))
            if self.last_round(recorded):
                return
        self.notes.append(f"bineval: --bineval-batch stopped after {rounds} rounds of batches: the requests that "
                          "depend on the last round's replies are asked directly (does an output under test change "
                          "from one run of the test to the next?)")

    def last_round(self, recorded: list[Recorded]) -> bool:
        """Whether no request can follow the replies to ``recorded``, so that no further first pass is needed (the
        test bodies then run twice in all): every one was a judge's verdict answered with its explanation, or an
        explanation, and no verdict is confirmed by re-asking (--bineval-confirm). Anything else (a checklist's
        requests, an answer without its explanation, a failed request) takes another first pass; a request the
        rule would miss is asked directly by the final pass, and counted."""
        if self.engine.settings.confirm:
            return False
        for r in recorded:
            kind = _schema_name(r.body)
            if kind == "explanation":
                continue
            if kind != "verdict" or not _explained(self.seam.reply_text(r.key)):
                return False
        return True

    def elapsed(self) -> float:
        return self._waited + (time.monotonic() - self._started if self._started is not None else 0.0)

    def deadline_left(self) -> float:
        return self.options.timeout - self.elapsed()

    async def _submit(self, recorded: list[Recorded]) -> _Waiting:
        """Submit what no batch covers (one batch per model, cut to the provider's limits), within the budget;
        the batches to wait for (those just submitted, and those other processes submitted with these requests)."""
        groups: dict[Group, list[Recorded]] = {}
        for r in recorded:
            groups.setdefault(r.group, []).append(r)
        waiting = _Waiting()
        error: str | None = None
        with self.registry.edit() as data:
            pending = data.pending()
            for group, items in groups.items():
                new: list[Recorded] = []
                for r in items:
                    if r.key in pending:
                        waiting.statuses.setdefault(pending[r.key], BatchStatus("submitted"))
                    elif not self.seam.has_reply(r.key):  # (fetched meanwhile by another process: used next pass)
                        new.append(r)
                why = unsupported_provider(group.provider)
                if why is not None:
                    for r in new:
                        self.seam.fail(r.key, f"not batched: {why}")
                    self.summary.failed += len(new)
                    continue
                new = self._within_budget(group, new)
                for chunk in chunks([batch_line(r.key, r.body) for r in new]):
                    keys = [line["custom_id"] for line in chunk]
                    api = self.api(group.provider, group.api_base)
                    try:
                        batch_id, file_id = await api.submit(chunk, {"bineval": self.run_id[:64]})
                    except Exception as exc:
                        error = (f"--bineval-batch: submitting a batch of {len(chunk)} requests to "
                                 f"{api.endpoint.label()} failed ({describe(exc, api.endpoint, api.secrets)}); "
                                 "nothing was judged")
                        break
                    checklist = [r.key for r in new if r.checklist and r.key in set(keys)]
                    data.batches[batch_id] = BatchEntry(
                        id=batch_id, provider=group.provider, model=group.model, api_base=group.api_base,
                        input_file_id=file_id, keys=keys, checklist_keys=checklist, submitted=time.time(),
                        by=self.run_id, status="submitted")
                    waiting.statuses[batch_id] = BatchStatus("submitted", total=len(keys))
                    waiting.mine.add(batch_id)
                    self.summary.batches += 1
                    self.summary.submitted += len(keys)
                if error is not None:
                    break
        if error is not None:
            raise BatchError(error)
        resumed = set(waiting.statuses) - waiting.mine - self._seen
        self.summary.resumed += len(resumed)
        self._seen |= set(waiting.statuses)
        if resumed:
            self.show(f"bineval batch: waiting for {len(resumed)} batch(es) submitted earlier (an interrupted run, "
                      "another worker or shard): nothing is submitted twice")
        return waiting

    def _within_budget(self, group: Group, new: list[Recorded]) -> list[Recorded]:
        """The requests of ``new`` that fit in what is left of ``--bineval-budget``, each estimated at its prompt and
        ``max_tokens`` at the batch price; the others fail (asked directly, or errors: --bineval-batch-failures)."""
        budget = self.engine.budget
        if budget is None:
            return new
        u = self.engine.usage
        spent = budget.spent(u.cost_usd, u.prompt_tokens + u.completion_tokens) + self._committed
        kept: list[Recorded] = []
        refused = 0
        for r in new:
            tokens, cost = estimate(r.body, group.model)
            amount = float(tokens) if budget.unit == "tokens" else cost
            if amount is None:
                self.seam.fail(r.key, f"not batched: the budget {budget.text()} is in dollars and litellm has no "
                                      f"batch price for {group.model} (give the budget in tokens)")
                refused += 1
            elif spent + amount > budget.share:
                self.seam.fail(r.key, f"not batched: it could pass the budget {budget.limit_text()} "
                                      f"(--bineval-budget; each request counted at its prompt and max_tokens)")
                refused += 1
            else:
                spent += amount
                self._committed += amount
                kept.append(r)
        if refused:
            self.notes.append(f"bineval: --bineval-budget: {refused} request(s) of {group.model} were not batched: "
                              "they could pass the budget")
        return kept

    async def _wait(self, waiting: _Waiting) -> None:
        """Until every batch of ``waiting`` is fetched (by this process or another); BatchTimeout past the timeout."""
        started = time.monotonic()
        if self._started is None:
            self._started = started
        remaining = set(waiting.statuses)
        delay, longest = self.poll
        shown, last_line = 0.0, ""
        failures = 0
        try:
            while remaining:
                data = self.registry.read()
                for batch_id in sorted(remaining):
                    entry = data.batches.get(batch_id)
                    if entry is not None and entry.state == "fetched":
                        self._take(entry)
                        remaining.discard(batch_id)
                        continue
                    api = self.api(entry.provider, entry.api_base) if entry is not None else None
                    if api is None:
                        remaining.discard(batch_id)  # no longer written down (removed by hand): nothing to fetch
                        continue
                    try:
                        status = await api.retrieve(batch_id)
                        failures = 0
                    except Exception as exc:
                        failures += 1
                        if failures >= 5:
                            raise BatchError(f"--bineval-batch: the status of batch {batch_id} cannot be read "
                                             f"({describe(exc, api.endpoint, api.secrets)}); it stays written down: "
                                             "run again to resume waiting") from None
                        continue
                    if entry is not None and (entry.status, entry.completed, entry.failed) != (
                            status.status, status.completed, status.failed):
                        self._note(batch_id, status)  # for `bineval batch status` and pytest-xdist's controller
                    waiting.statuses[batch_id] = status
                    if status.finished:
                        self._take(await self._fetch(batch_id))
                        remaining.discard(batch_id)
                line = self._progress(waiting)
                now = time.monotonic()
                if line != last_line or now - shown > SHOW_EVERY:
                    self.show(line)
                    shown, last_line = now, line
                if not remaining:
                    return
                left = self.deadline_left()
                if left <= 0:
                    raise BatchTimeout(
                        f"--bineval-batch: {len(remaining)} batch(es) not finished after "
                        f"{duration_text(self.elapsed())} (--bineval-batch-timeout "
                        f"{duration_text(self.options.timeout)}): nothing was judged. They stay written down in "
                        f"{self.registry.where}: run the same command again to resume waiting for them (nothing is "
                        "submitted twice), or `bineval batch cancel`")
                await asyncio.sleep(min(delay, left))
                delay = min(delay * 2, longest)
        finally:
            self._waited += time.monotonic() - started
            self._started = None
            self.summary.seconds = self._waited

    def _progress(self, waiting: _Waiting) -> str:
        statuses = list(waiting.statuses.values())
        return progress_line(len(statuses), sum(s.finished for s in statuses), sum(s.total for s in statuses),
                             sum(s.completed for s in statuses), sum(s.failed for s in statuses), self.elapsed())

    def _note(self, batch_id: str, status: BatchStatus) -> None:
        with self.registry.edit() as data:
            entry = data.batches.get(batch_id)
            if entry is not None and entry.state == "pending":
                entry.status, entry.completed, entry.failed = status.status, status.completed, status.failed

    async def _fetch(self, batch_id: str) -> BatchEntry:
        """Fetch a finished batch into the reply cache, once (under the record's lock: another process that finds
        it fetched reads the cache)."""
        with self.registry.edit() as data:
            entry = data.batches[batch_id]
            if entry.state == "fetched":
                return entry
            api = self.api(entry.provider, entry.api_base)
            try:
                status = await api.retrieve(batch_id)
                output = await api.content(status.output_file_id) if status.output_file_id else None
                errors = await api.content(status.error_file_id) if status.error_file_id else None
            except Exception as exc:
                raise BatchError(f"--bineval-batch: the results of batch {batch_id} cannot be read "
                                 f"({describe(exc, api.endpoint, api.secrets)}); it stays written down: run again "
                                 "to resume") from None
            results = read_results(output, errors, entry.keys, status)
            checklist = set(entry.checklist_keys)
            for key, body in results.replies.items():
                usage = reply_usage(body, entry.model)
                if self.seam.cache is not None:
                    self.seam.cache.set(key, {"response": body, "batch": batch_id})
                self.seam.keep(key, Stored(body, usage, checklist=key in checklist))
                self.summary.usage = self.summary.usage + usage
            failed = Usage(llm_calls=len(results.failures), failed_requests=len(results.failures),
                           batch_requests=len(results.failures), cost_usd=0.0)
            self._failed_usage = self._failed_usage + failed
            self.summary.usage = self.summary.usage + failed
            self.summary.answered += len(results.replies)
            self.summary.failed += len(results.failures)
            if results.malformed:
                self.notes.append(f"bineval: batch {batch_id}: {results.malformed} line(s) of its output could not "
                                  "be read (malformed): their requests count as failed")
            entry.state, entry.status, entry.fetched_at = "fetched", status.status, time.time()
            entry.completed, entry.failed = len(results.replies), len(results.failures)
            entry.failures = results.failures
            return entry

    def _take(self, entry: BatchEntry) -> None:
        """A fetched batch: its failures are known to the seam (its replies are in the cache)."""
        for key, why in entry.failures.items():
            self.seam.fail(key, f"the batch {entry.id} failed it: {why}")

    def meet(self, run: str, worker: str, workers: int) -> None:
        """pytest-xdist: wait until every worker of ``run`` has fetched the batches of its rounds (none starts its
        final pass before: a test of one worker may need the replies of a batch another worker submitted)."""
        self.registry.arrive(run, worker, workers)
        started, delay = time.monotonic(), 0.1
        try:
            while True:
                meeting = self.registry.meeting(run)
                if meeting is not None and meeting.gave_up:
                    who, why = next(iter(sorted(meeting.gave_up.items())))
                    raise BatchTimeout(f"--bineval-batch: pytest-xdist worker {who} stopped waiting for its batches "
                                       f"({why}); this worker stops too: nothing was judged")
                if meeting is not None and len(meeting.done) >= meeting.workers:
                    return
                left = self.options.timeout - self._waited - (time.monotonic() - started)
                if left <= 0:
                    raise BatchTimeout(f"--bineval-batch: the other pytest-xdist workers' batches were not finished "
                                       f"within --bineval-batch-timeout {duration_text(self.options.timeout)}: "
                                       "nothing was judged; run the same command again to resume waiting")
                time.sleep(min(delay, left))
                delay = min(delay * 2, 2.0)
        finally:
            self._waited += time.monotonic() - started
            self.summary.seconds = self._waited

    # -- the end -------------------------------------------------------------------------------------------------
    def finish(self) -> BatchSummary:
        """After the final pass: the replies fetched here and not used by it (and the failed lines) are counted
        now; the summary of what this process did."""
        judging, checklists, unused = self.seam.take_uncounted()
        self.engine.add_usage(judging + self._failed_usage)
        self.engine.add_usage(checklists, checklist=True)
        self._failed_usage = Usage()
        counts = self.seam.counts
        self.summary.retried = counts.retried
        self.summary.missed = counts.missed
        self.summary.in_process = counts.in_process
        self.summary.failed += counts.unusable
        self.summary.unused = unused
        if counts.missed:
            self.notes.append(f"bineval: --bineval-batch: {counts.missed} request(s) of the final pass were not in "
                              "any batch and were asked directly, at the full price (an output under test that "
                              "changed between the two runs of its test, or a request after one the batch failed)")
        return self.summary
