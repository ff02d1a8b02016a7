"""Run-wide state of a pytest session: the engine (one per session), the current test's context, pinned
checklists, and the run's :class:`~pytest_bineval.ledger.RunLedger` (records, usage, pins, ...), which
pytest-xdist workers send to the controller."""

from __future__ import annotations

import contextvars
import dataclasses
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .dimensions import BUILTIN, DimensionsArg, did_you_mean, resolve_dimensions
from .engine import Engine
from .errors import PinError, UsageError
from .ledger import RunLedger
from .markers import MarkerArgs
from .models import Checklist, ConfirmCost, Evaluation, ScoreKind, Usage
from .options import Options
from .pins import PinFile, entry_id, update_pin
from .qworld import DEFAULT_TASK, qworld_dimensions
from .record import (
    ChecklistStatus,
    EvaluationRecord,
    JudgedBy,
    Location,
    OptimizeOutcome,
    RegressionReport,
    ReportDocument,
    ReportSettings,
    Totals,
    UnscoredTest,
)

Threshold = float | Mapping[str, float]


@dataclass
class TestContext:
    """What ``assert_passes`` knows about the running test (set by the plugin around each test call)."""

    service: BinevalService
    nodeid: str
    marker: MarkerArgs = field(default_factory=MarkerArgs)
    fixture_task: Callable[[], str | None] | None = None  # resolved only when needed
    pin_path: Path | None = None  # this test's pinned-checklist file
    records: list[EvaluationRecord] = field(default_factory=list)
    unscored: list[UnscoredTest] = field(default_factory=list)  # this test, if it errored before any record
    warned_missing_source: set[tuple[str | None, tuple[str, ...]]] = field(default_factory=set)  # per checklist

    @property
    def test_name(self) -> str:
        """The node id within its module (``Class::test[param]``): what a pin entry lists."""
        return self.nodeid.split("::", 1)[-1]


_current: contextvars.ContextVar[TestContext | None] = contextvars.ContextVar("bineval_test", default=None)


@dataclass(frozen=True)
class _Running:
    ctx: TestContext
    thread: threading.Thread  # the thread that runs the test
    before: frozenset[threading.Thread]  # the threads alive when the test started


# The ContextVar's fallback for threads: a new thread does not inherit the context of the thread that starts it,
# so in a thread the test starts (a ThreadPoolExecutor's) the ContextVar is unset. pytest runs one test at a time
# in a process, so the running test is also kept here: set and cleared by set_current/reset_current only.
_running: _Running | None = None


@dataclass(frozen=True)
class ContextToken:
    """What :func:`reset_current` restores: the ContextVar's token and the previous fallback (a pytester run in a
    test sets and resets its own tests around the outer test's)."""

    var: contextvars.Token[TestContext | None]
    running: _Running | None


def set_current(ctx: TestContext | None) -> ContextToken:
    global _running
    token = ContextToken(_current.set(ctx), _running)
    _running = None if ctx is None else _Running(ctx, threading.current_thread(), frozenset(threading.enumerate()))
    return token


def reset_current(token: ContextToken) -> None:
    global _running
    _current.reset(token.var)
    _running = token.running


def current() -> TestContext | None:
    """The running test's context, or None outside a pytest run with the plugin (or outside a test).

    The ContextVar comes first (asyncio tasks and ``contextvars.copy_context().run`` carry it). A thread without it
    gets the test running in this process if the thread started during that test; a thread that was alive before
    that test started (a thread of an earlier test that outlived it, or a pool shared by tests) cannot be told
    apart from one working for the running test: a :class:`UsageError` says so, never a silent attribution to
    the running test. When no test is running (between tests), a thread gets None: its evaluation belongs to no
    test, as outside pytest."""
    ctx = _current.get()
    if ctx is not None:
        return ctx
    running = _running
    thread = threading.current_thread()
    if running is None or thread is running.thread:
        return None
    if thread in running.before:
        raise UsageError(
            f"assert_passes ran in a thread started before the running test ({running.ctx.nodeid}) began, so "
            "pytest-bineval cannot tell which test it evaluates for (a thread of an earlier test, or a pool shared "
            "by tests). Start the thread in the test, or pass the test's context to it: "
            "pool.submit(contextvars.copy_context().run, assert_passes, ...)")
    return running.ctx


@dataclass
class WorkerProgress:
    """What a pytest-xdist worker reported finished, test by test (see :meth:`BinevalService.note_progress`)."""

    tests: dict[str, RunLedger] = field(default_factory=dict)  # per test: its last attempt's records and outcome
    latest: RunLedger = field(default_factory=RunLedger)  # the worker's running counts, as of its last test

    def ledger(self) -> RunLedger:
        """The worker's ledger as far as it reported: the running counts once, every test's own entries."""
        merged = dataclasses.replace(self.latest, records=[], unscored=[], failed_tests=set(), ran_tests=set())
        for test in self.tests.values():
            merged.records.extend(test.records)
            merged.unscored.extend(test.unscored)
            merged.failed_tests |= test.failed_tests
            merged.ran_tests |= test.ran_tests
        return merged


@dataclass
class BinevalService:
    """The ``bineval`` session fixture: configuration, cache, checklists and the run's records."""

    options: Options
    engine: Engine
    rootpath: Path = field(default_factory=Path.cwd)
    ledger: RunLedger = field(default_factory=RunLedger)  # what this run found (and the xdist workers sent)
    on_record: Callable[[EvaluationRecord], object] | None = None
    baseline: ReportDocument | None = None  # --bineval-baseline, read by load_baseline()
    regressions: RegressionReport | None = None  # this run vs the baseline, made by compare()
    attempts: dict[str, int] = field(default_factory=dict)  # contexts made per running test (re-runs make more)
    # pytest-xdist controller: what each worker reported finished, until its ledger arrives (see note_progress)
    progress: dict[str, WorkerProgress] = field(default_factory=dict)
    _memo: dict[tuple[Any, ...], Checklist] = field(default_factory=dict)
    # when this session started: a pin entry written since then was written in this run (see pins.pin_in_run)
    started_ns: int = field(default_factory=time.time_ns)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)  # records (threads)

    @property
    def records(self) -> list[EvaluationRecord]:
        return self.ledger.records

    @classmethod
    def create(cls, options: Options, rootpath: Path, *, workers: int = 1) -> BinevalService:
        """Paths of the options are resolved against the rootdir (not the current directory); ``workers``: the
        pytest-xdist workers of the run (each keeps budget / workers, see :mod:`.budget`)."""
        s = options.settings
        cache_dir = Path(os.path.expanduser(s.cache_dir))
        if not cache_dir.is_absolute():
            cache_dir = rootpath / cache_dir
        judge_prompt = None
        if s.judge_prompt is not None:
            path = Path(os.path.expanduser(s.judge_prompt))
            judge_prompt = str(path if path.is_absolute() else rootpath / path)
        settings = s.with_overrides(cache_dir=str(cache_dir), judge_prompt=judge_prompt, budget_workers=workers)
        try:
            engine = Engine(settings)
        except UsageError as exc:  # the only file the engine reads up front
            raise UsageError(f"--bineval-judge-prompt: {exc}") from None
        return cls(options=options, engine=engine, rootpath=rootpath)

    def path(self, name: str) -> Path:
        """A path given in an option: relative to the rootdir unless absolute."""
        path = Path(os.path.expanduser(name))
        return path if path.is_absolute() else self.rootpath / path

    def load_baseline(self) -> None:
        """Read ``--bineval-baseline`` (UsageError naming the file when it cannot be read)."""
        if self.options.baseline:
            path = self.path(self.options.baseline)
            if not path.exists():
                raise UsageError(
                    f"--bineval-baseline {self.options.baseline}: there is no such file ({path}; a relative path is "
                    f"relative to the rootdir). A baseline is the --bineval-report file of an earlier run: write it "
                    "with --bineval-report=PATH on the run to compare with (e.g. on main), then pass that file")
            try:
                baseline = ReportDocument.load(path)
            except UsageError as exc:
                raise UsageError(f"--bineval-baseline: {exc}") from None
            if baseline.partial and not self.options.allow_partial_baseline:
                raise UsageError(
                    f"--bineval-baseline {self.options.baseline} is the report of a partial run "
                    f"({baseline.partial_reason or 'cut short'}): the tests it lacks would count as added and never "
                    "be compared. Use the report of a complete run, or pass --bineval-allow-partial-baseline to "
                    "compare with it anyway")
            self.baseline = baseline

    def compare(self) -> RegressionReport | None:
        """This run's records against the baseline's; ``failed`` when --bineval-fail-on-regression applies."""
        from .baseline import diff_runs

        if self.baseline is None or not self.options.baseline:
            return None
        report = diff_runs(self.baseline.evaluations, self.records, baseline=self.options.baseline,
                           tolerance=self.options.regression_tolerance, created=self.baseline.created,
                           generator=self.baseline.generator, alpha=self.options.alpha,
                           fail_on=self.options.fail_on_regression or "significant", ran=self.ledger.ran_tests,
                           collected=self.ledger.collected_tests, judged=(self.baseline.judge(), self.judged_by()))
        report.failed = bool(self.options.fail_on_regression) and report.fail_reason() is not None
        self.regressions = report
        return report

    # -- public fixture API ------------------------------------------------------------------------------
    def checklist(self, task: str | None, dimensions: DimensionsArg = None, *, strategy: str = "bineval",
                  question: str | None = None) -> Checklist:
        """The (cached) checklist for a task, or with ``strategy="qworld"``/``"qworld-lite"`` the criteria for
        ``question``; pinned files are used by tests, not by this call."""
        if strategy == "bineval":
            if task is None:
                raise UsageError("a task checklist needs the task text")
            return self.engine.run(self._agenerate(task, resolve_dimensions(dimensions)))
        return self.engine.run(self._agenerate(task or DEFAULT_TASK, qworld_dimensions(dimensions), strategy, question))

    def evaluate(self, output: str, checklist: Checklist, source: str | None = None, *,
                 dimensions: list[str] | None = None, model: str | None = None) -> Evaluation:
        return self.engine.evaluate(output, checklist.select(dimensions), source, model=model)

    # -- used by assert_passes ---------------------------------------------------------------------------
    def _memo_key(self, task: str, dims: dict[str, str], strategy: str,
                  question: str | None) -> tuple[Any, ...]:
        return (task.strip(), tuple(sorted(dims.items())), self.engine.settings.generator_model, strategy,
                None if question is None else question.strip())

    async def _agenerate(self, task: str, dims: dict[str, str], strategy: str = "bineval",
                         question: str | None = None) -> Checklist:
        key = self._memo_key(task, dims, strategy, question)
        if key not in self._memo:
            self._memo[key] = await self.engine.achecklist(task, dims, strategy=strategy, question=question)
            with self._lock:
                self.ledger.checklists_generated += 1
        return self._memo[key]

    async def achecklist_for(self, ctx: TestContext, task: str, dimensions: DimensionsArg, *,
                             strategy: str = "bineval",
                             question: str | None = None) -> tuple[Checklist, ChecklistStatus]:
        """The checklist of the current test and its pin status: pinned, written, unpinned or stale.
        ``strategy="qworld"``/``"qworld-lite"``: criteria written for ``question`` (one pin per question)."""
        dims = resolve_dimensions(dimensions) if strategy == "bineval" else qworld_dimensions(dimensions)
        if ctx.pin_path is None:
            checklist = await self._agenerate(task, dims, strategy, question)
            self.ledger.unpinned.add(entry_id(Path(ctx.nodeid), checklist))
            return checklist, "unpinned"
        update, strict = self.options.update_checklists, self.options.strict
        if update:
            checklist, pinned, actions = await update_pin(
                ctx.pin_path, ctx.test_name, task, dims, question=question, strategy=strategy, mode=update,
                generate=lambda: self._agenerate(task, dims, strategy, question), since_ns=self.started_ns,
                marker_dir=Path(self.engine.settings.cache_dir) / "pins-written", rootpath=self.rootpath)
            with self._lock:
                self.ledger.pin_actions.extend(actions)
            if any(a.action in ("created", "rewritten") for a in actions):
                self.ledger.pins_written.append(entry_id(ctx.pin_path, checklist))  # one per checklist, not per file
            if not pinned:  # a stale pin kept because it was edited by hand
                self.ledger.unpinned.add(entry_id(ctx.pin_path, checklist))
                return checklist, "stale"
            # another test of this run (another xdist worker) may have pinned this task already, with a checklist
            # of its own: this test is judged with the pinned one, and so are this process's next tests
            self._memo[self._memo_key(task, dims, strategy, question)] = checklist
            return checklist, "written" if any(a.action != "kept" for a in actions) else "pinned"
        found, stale = PinFile.read(ctx.pin_path).find(task, dims, ctx.test_name, question=question,
                                                       strategy=strategy)
        if found is not None:
            return found, "pinned"
        if strict:
            what = "task or question text" if question is not None else "task text"
            why = f"is stale (the {what} changed since it was pinned)" if stale else "is not pinned"
            raise PinError(
                f"--bineval-strict: the checklist of {ctx.nodeid} {why}; review and pin it with "
                f"--bineval-update-checklists (file: {ctx.pin_path})"
            )
        checklist = await self._agenerate(task, dims, strategy, question)
        self.ledger.unpinned.add(entry_id(ctx.pin_path, checklist))  # what --bineval-update-checklists would write
        return checklist, "stale" if stale else "unpinned"

    def record(self, ctx: TestContext, evaluation: Evaluation, thresholds: dict[str, float], checklist: Checklist,
               status: ChecklistStatus, output: str, source: str | None,
               location: Location | None, *, score_kind: ScoreKind = "share") -> EvaluationRecord:
        """Keep the evaluation's record (for the summary, the report, xdist and the hook) and return it."""
        with self._lock:  # one index per evaluation, also when the test's threads evaluate at once
            rec = EvaluationRecord.build(
                test=ctx.nodeid, index=len(ctx.records), evaluation=evaluation, thresholds=thresholds,
                questions=checklist.questions, checklist_status=status, checklist_model=checklist.model,
                prompt_version=checklist.prompt_version, output=output, source=source, prompt=ctx.marker.prompt,
                location=location, gate=self.options.gate, score_kind=score_kind, strategy=checklist.strategy,
            )
            ctx.records.append(rec)
            self.ledger.records.append(rec)
        if self.on_record is not None:
            self.on_record(rec)
        return rec

    def note_threshold_keys(self, names: list[str], marker_threshold: Threshold | None) -> None:
        """What an assertion checked and which keys its marker's threshold has (for :meth:`threshold_notes`)."""
        with self._lock:
            self.ledger.dimensions_checked.update(names)
            if isinstance(marker_threshold, Mapping):
                self.ledger.marker_threshold_keys.update(marker_threshold)

    def threshold_notes(self) -> list[str]:
        """A per-dimension threshold key of the markers or the command line that no assertion of the run checked
        and that looks like a misspelling of a dimension the run knows (a typo such as ``fluncy=0.4`` would
        otherwise leave the default threshold in force without a word). A built-in name, a name an assertion
        checked or a collected test's marker names is no typo, and neither is a name close to none of them: a
        ``-k`` or single-file run need not reach the tests that check it."""
        ledger = self.ledger
        if not ledger.dimensions_checked:
            return []
        cli = self.options.threshold
        sources = (("--bineval-threshold (or the bineval_threshold ini key)", set(cli) if isinstance(cli, dict)
                    else set()), ("@pytest.mark.bineval(threshold=...)", ledger.marker_threshold_keys))
        known = ledger.dimensions_checked | ledger.dimensions_defined | set(BUILTIN)
        notes = []
        for origin, keys in sources:
            for key in sorted(keys - {"*"} - known):
                hint = did_you_mean(key, sorted(known))  # never the key itself: it is not known
                if hint:
                    notes.append(f"bineval: {origin} sets a threshold for {key!r}, which no assertion of this run "
                                 f"checks{hint}")
        return notes

    def cache_notes(self) -> list[str]:
        """A read-only (or replay) cache directory that holds no cache: said plainly, since nothing else fails (in
        CI it means the step that restores the cache found none, or put it elsewhere)."""
        s = self.engine.settings
        if s.cache not in ("read-only", "replay") or s.cache_url:
            return []
        directory = Path(s.cache_dir)
        if (directory / "cache.db").is_file():
            return []
        what = "it holds no cache.db" if directory.is_dir() else "no such directory"
        then = ("every question was sent to the judge" if s.cache == "read-only"
                else "every reply was missing (replay sends no request)")
        return [f"bineval: --bineval-cache {s.cache} (or the bineval_cache ini key), but there is no cache at "
                f"{directory} ({what}): {then} and nothing was written. In CI this means the cache was not restored: "
                f"the restore step found no cache for its key, or restored it to another path than the cache "
                f"directory (--bineval-cache-dir / bineval_cache_dir); check that step's log."]

    def unscored_error(self, ctx: TestContext, error: str, message: str) -> None:
        """The test errored (a bineval error) and no record of it says why: keep it for the totals and reports."""
        if any(r.outcome == "error" for r in ctx.records):
            return  # a judge error: its record says so
        entry = UnscoredTest.build(ctx.nodeid, error, message)
        ctx.unscored.append(entry)
        self.ledger.unscored.append(entry)

    def keep_last_attempt(self, nodeid: str, ctx: TestContext | None) -> None:
        """After a test's protocol: what earlier attempts of it recorded (a re-run plugin ran it again) is
        replaced by the last attempt's (``ctx``, None when it failed before its context was made); their
        requests stay in the usage, and the records replaced are counted in ``rerun_evaluations``."""
        kept_records = ctx.records if ctx is not None else []
        kept_unscored = ctx.unscored if ctx is not None else []
        with self._lock:
            made = self.attempts.pop(nodeid, 0)
            if made == 0 or (made == 1 and ctx is not None):
                return  # one attempt (the usual case): nothing to replace, and no scan of the run's records
            ledger = self.ledger
            stale = [r for r in ledger.records if r.test == nodeid and not any(r is k for k in kept_records)]
            if stale:
                ledger.records[:] = [r for r in ledger.records if not any(r is s for s in stale)]
                ledger.rerun_evaluations += len(stale)
            ledger.unscored[:] = [u for u in ledger.unscored
                                  if u.test != nodeid or any(u is k for k in kept_unscored)]

    # -- run totals and the report ----------------------------------------------------------------------
    def usage(self) -> Usage:
        """Everything this process's engine and the merged-in ledgers (xdist workers) spent."""
        return self.engine.usage + self.ledger.usage

    def confirm_cost(self) -> ConfirmCost:
        """What --bineval-confirm asked in this process and the merged-in ledgers."""
        return self.engine.confirm_cost + self.ledger.confirm_cost

    def checklist_usage(self) -> Usage:
        """Of :meth:`usage`, what checklist generation spent."""
        return self.engine.checklist_usage + self.ledger.checklist_usage

    def totals(self) -> Totals:
        return self._run_ledger().totals(self.regressions)

    def _run_ledger(self) -> RunLedger:
        """The run's ledger with this process's engine's usage in it."""
        return RunLedger(usage=self.engine.usage, checklist_usage=self.engine.checklist_usage,
                         confirm_cost=self.engine.confirm_cost,
                         budget_refused=self.engine.budget_refused).merge(self.ledger)

    def judged_by(self) -> JudgedBy:
        """What judged this run: the judge model(s), the judge prompt (its digest), the prompts' version, and the
        checklist of each evaluation."""
        from .prompting import prompt_version

        return JudgedBy.of_records(self.ledger.records, model=self.engine.settings.judge_model,
                                   prompt_version=prompt_version(),
                                   judge_prompt=self.options.settings.judge_prompt or "judge.md (packaged)",
                                   judge_prompt_digest=self.engine.judge_prompt_digest(),
                                   stream=self.engine.settings.stream)

    def report_document(self, optimized: list[OptimizeOutcome] | None = None, *,
                        partial: str | None = None) -> ReportDocument:
        """The run's finished document: what every output reads (built once, at the end of the run);
        ``partial``: why the run was cut short, if it was."""
        s = self.engine.settings
        settings = ReportSettings(model=s.judge_model, checklist_model=s.generator_model, cache=s.cache,
                                  temperature=s.temperature, concurrency=s.concurrency, timeout=s.timeout,
                                  retries=s.retries, judge_prompt=self.options.settings.judge_prompt,
                                  repeats=s.repeats, gate=self.options.gate,
                                  budget=s.budget)
        notes = [*self.cache_notes(), *self.threshold_notes()]
        if self.options.fail_on_regression and not self.options.baseline:
            notes.append("bineval: --bineval-fail-on-regression without --bineval-baseline: nothing was compared")
        return self._run_ledger().document(settings, regressions=self.regressions, optimize=optimized, notes=notes,
                                           partial=partial, judged_by=self.judged_by(),
                                           confirm=(s.confirm, s.confidence) if s.confirm else None)

    # -- pytest-xdist: a worker's ledger, merged by the controller ------------------------------------------
    def worker_payload(self) -> str:
        """This worker's ledger, its engine's usage included."""
        return self._run_ledger().dumps()

    def merge_worker(self, payload: str, worker: str | None = None) -> None:
        """Merge a worker's ledger (sent at its session's end); what it reported test by test is then replaced."""
        if worker is not None:
            self.progress.pop(worker, None)
        self.ledger.merge(RunLedger.loads(payload))

    def progress_payload(self, ctx: TestContext) -> str:
        """A worker's progress after a test's teardown, sent with its report: the test's records and unscored
        entry (this attempt's), whether it ran and failed, and the worker's running counts (usage, checklists,
        pins). The controller keeps them until the worker's ledger arrives, which it never does when the run is
        interrupted (Ctrl-C) or the worker crashes: then what the worker finished still counts."""
        led, nodeid = self.ledger, ctx.nodeid
        progress = RunLedger(
            records=list(ctx.records), unscored=list(ctx.unscored), failed_tests=led.failed_tests & {nodeid},
            ran_tests=led.ran_tests & {nodeid}, usage=self.engine.usage, checklist_usage=self.engine.checklist_usage,
            confirm_cost=self.engine.confirm_cost, budget_refused=self.engine.budget_refused,
            checklists_generated=led.checklists_generated, pins_written=list(led.pins_written),
            pin_actions=list(led.pin_actions), unpinned=set(led.unpinned), rerun_evaluations=led.rerun_evaluations,
            dimensions_checked=set(led.dimensions_checked), notes=list(led.notes))
        return json.dumps({"test": nodeid, "ledger": progress.to_json()})

    def note_progress(self, worker: str, payload: str) -> None:
        """The controller's side of :meth:`progress_payload`: the latest running counts of ``worker`` and the last
        attempt of each of its tests."""
        data = json.loads(payload)
        ledger = RunLedger.from_json(data["ledger"])
        progress = self.progress.setdefault(worker, WorkerProgress())
        progress.tests[data["test"]] = progress.latest = ledger

    def merge_unfinished_workers(self) -> None:
        """At the controller's session end: the progress of the workers whose ledger never arrived (interrupted,
        or crashed) is merged, with a note saying so."""
        for worker, progress in sorted(self.progress.items()):
            self.ledger.merge(progress.ledger())
            self.ledger.notes.append(
                f"bineval: pytest-xdist worker {worker} ended before sending its results (interrupted, or it "
                f"crashed): the report counts the {len(progress.tests)} test(s) it finished, and what it spent up "
                "to the last of them")
        self.progress.clear()

    def close(self) -> None:
        self.engine.close()


class Bineval:
    """The ``bineval`` session fixture: ``checklist(task, dimensions)``, ``evaluate(output, checklist,
    source)``, ``options`` and the run's ``records`` so far (this process's)."""

    def __init__(self, service: BinevalService) -> None:
        self._service = service

    @property
    def options(self) -> Options:
        return self._service.options

    @property
    def records(self) -> list[EvaluationRecord]:
        return self._service.records

    def checklist(self, task: str | None, dimensions: DimensionsArg = None, *, strategy: str = "bineval",
                  question: str | None = None) -> Checklist:
        """The (cached) checklist for a task, or with ``strategy="qworld"``/``"qworld-lite"`` the criteria for
        ``question``; pinned files are used by tests, not by this call."""
        return self._service.checklist(task, dimensions, strategy=strategy, question=question)

    def evaluate(self, output: str, checklist: Checklist, source: str | None = None, *,
                 dimensions: list[str] | None = None, model: str | None = None) -> Evaluation:
        """Answer the checklist's questions (or its ``dimensions``') about ``output`` with the session's engine
        (its cache, its usage); no threshold, no record."""
        return self._service.evaluate(output, checklist, source, dimensions=dimensions, model=model)
