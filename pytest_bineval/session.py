"""Run-wide state of a pytest session: the engine (one per session), the running test's context (the
assertion's :class:`~pytest_bineval.scope.Scope` in a pytest run), pinned checklists, and the run's
:class:`~pytest_bineval.report.ledger.RunLedger` (records, usage, pins, ...), which pytest-xdist workers send to the
controller (:mod:`.report.relay`)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .dimensions import DimensionsArg, resolve_dimensions
from .engine import Engine
from .errors import PinError, UsageError
from .gate import confirm_flips, keep_input
from .kinds import Gate, Threshold
from .markers import MarkerArgs
from .models import Checklist, Evaluation
from .options import Options
from .pins import PinFile, entry_id, update_pin
from .qworld import DEFAULT_TASK, qworld_dimensions
from .report.comparison import RegressionReport
from .report.document import OptimizeOutcome, ReportDocument, ReportSettings
from .report.ledger import RunLedger
from .report.record import ChecklistStatus, EvaluationRecord, JudgedBy, RecordRequest, UnscoredTest
from .report.relay import WorkerRelay
from .shared_checklists import SharedChecklists, run_directory


@dataclass
class TestContext:
    """The running test, as ``assert_passes`` sees it (its :class:`~pytest_bineval.scope.Scope`; set by the plugin
    around each test): the session's engine, the test's marker and ``bineval_task`` fixture, its pinned checklists,
    and what this attempt of it found."""

    service: BinevalService
    nodeid: str
    marker: MarkerArgs = field(default_factory=MarkerArgs)
    fixture_task: Callable[[], str | None] | None = None  # resolved only when needed
    pin_path: Path | None = None  # this test's pinned-checklist file
    params: Mapping[str, object] = field(default_factory=dict)  # pytest's parametrize values of the test
    found: RunLedger = field(default_factory=RunLedger)  # this attempt's own entries (the ledger's per-test fields)
    warned: set[Hashable] = field(default_factory=set)  # the warnings given (missing source: once per checklist)

    @property
    def records(self) -> list[EvaluationRecord]:
        """This attempt's evaluations."""
        return self.found.records

    @property
    def unscored(self) -> list[UnscoredTest]:
        """This attempt's unscored entry, if it errored before any record."""
        return self.found.unscored

    @property
    def test_name(self) -> str:
        """The node id within its module (``Class::test[param]``): what a pin entry lists."""
        return self.nodeid.split("::", 1)[-1]

    # -- the Scope ------------------------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.nodeid

    @property
    def engine(self) -> Engine:
        return self.service.engine

    @property
    def rootpath(self) -> Path:
        return self.service.rootpath

    @property
    def threshold(self) -> Threshold | None:
        return self.service.options.threshold

    @property
    def gate(self) -> Gate:
        return self.service.options.gate

    def bineval_task(self) -> str | None:
        return self.fixture_task() if self.fixture_task is not None else None

    async def achecklist(self, task: str | None, dimensions: DimensionsArg, *, strategy: str,
                         question: str | None) -> tuple[Checklist, ChecklistStatus]:
        return await self.service.achecklist_for(self, task or DEFAULT_TASK, dimensions, strategy=strategy,
                                                 question=question)

    def note_checked(self, names: list[str]) -> None:
        """What the assertion checked and which keys its marker's threshold has (for the run's threshold notes)."""
        keys = set(self.marker.threshold) if isinstance(self.marker.threshold, Mapping) else set()
        self.service.add(RunLedger(dimensions_checked=set(names), marker_threshold_keys=keys))

    def first_warning(self, key: Hashable) -> bool:
        with self.service.lock:  # the test's threads may warn at once: one of them does
            new = key not in self.warned
            self.warned.add(key)
        return new

    def record(self, request: RecordRequest, evaluation: Evaluation, checklist: Checklist, status: ChecklistStatus,
               thresholds: dict[str, float]) -> EvaluationRecord:
        """Keep the evaluation's record (for the summary, the report, xdist and the hook) and return it."""
        with self.service.lock:  # one index per evaluation, also when the test's threads evaluate at once
            rec = EvaluationRecord.build(request, evaluation, checklist, thresholds=thresholds, status=status,
                                         test=self.nodeid, index=len(self.records), params=self.params)
            self.found.records.append(rec)
            # what re-asking a flip needs, when the record keeps less than the judge read (never in a report)
            kept = [k] if (k := keep_input(rec, request.output, request.source)) is not None else []
            self.found.kept_inputs.extend(kept)
        self.service.ledger.add(RunLedger(records=[rec], kept_inputs=kept))
        if self.service.on_record is not None:
            self.service.on_record(rec)
        return rec

    def release(self) -> None:
        """The session's engine outlives the assertion."""


@dataclass
class BinevalService:
    """The session's state: configuration, the engine, checklists and the run's ledger."""

    options: Options
    engine: Engine
    rootpath: Path = field(default_factory=Path.cwd)
    on_record: Callable[[EvaluationRecord], object] | None = None
    baseline: ReportDocument | None = None  # --bineval-baseline, read by load_baseline()
    regressions: RegressionReport | None = None  # this run vs the baseline, made by compare()
    attempts: dict[str, int] = field(default_factory=dict)  # contexts made per running test (re-runs make more)
    relay: WorkerRelay = field(default_factory=WorkerRelay)  # pytest-xdist: what workers reported, test by test
    shared: SharedChecklists | None = None  # pytest-xdist workers: a checklist generated once per run (share())
    _memo: dict[tuple[Any, ...], Checklist] = field(default_factory=dict)
    # when this session started: a pin entry written since then was written in this run (see pins.pin_in_run)
    started_ns: int = field(default_factory=time.time_ns)
    # a test's own entries (the index of its next record) and warnings, changed by its threads at once
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def ledger(self) -> RunLedger:
        """What this run found and spent (the engine adds into it; the xdist workers' ledgers are merged in)."""
        return self.engine.ledger

    @property
    def records(self) -> list[EvaluationRecord]:
        return self.ledger.records

    @staticmethod
    def cache_dir_of(options: Options, rootpath: Path) -> Path:
        """``--bineval-cache-dir``: relative to the rootdir unless absolute."""
        cache_dir = Path(os.path.expanduser(options.settings.cache_dir))
        return cache_dir if cache_dir.is_absolute() else rootpath / cache_dir

    @classmethod
    def create(cls, options: Options, rootpath: Path, *, workers: int = 1) -> BinevalService:
        """Paths of the options are resolved against the rootdir (not the current directory); ``workers``: the
        pytest-xdist workers of the run (each keeps budget / workers, see :mod:`.budget`)."""
        s = options.settings
        cache_dir = cls.cache_dir_of(options, rootpath)
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
        from .report.comparison import diff_runs

        if self.baseline is None or not self.options.baseline:
            return None
        report = diff_runs(self.baseline.evaluations, self.records, baseline=self.options.baseline,
                           tolerance=self.options.regression_tolerance, created=self.baseline.created,
                           generator=self.baseline.generator, alpha=self.options.alpha,
                           fail_on=self.options.fail_on_regression or "significant", ran=self.ledger.ran_tests,
                           collected=self.ledger.collected_tests, judged=(self.baseline.judge(), self.judged_by()))
        kept = {k.key: k for k in self.ledger.kept_inputs}  # a re-run's last attempt last
        report = self.engine.run(confirm_flips(report, self.baseline.evaluations, self.records, self.engine, kept))
        report.failed = bool(self.options.fail_on_regression) and report.fail_reason() is not None
        self.regressions = report
        return report

    # -- checklists: the memo, and a test's pinned ones ------------------------------------------------------------
    def _memo_key(self, task: str, dims: dict[str, str], strategy: str,
                  question: str | None) -> tuple[Any, ...]:
        return (task.strip(), tuple(sorted(dims.items())), self.engine.settings.generator_model, strategy,
                None if question is None else question.strip())

    async def agenerate(self, task: str, dims: dict[str, str], strategy: str = "bineval",
                        question: str | None = None) -> Checklist:
        """The checklist of ``task`` (or ``question``'s criteria), generated once per session."""
        key = self._memo_key(task, dims, strategy, question)
        if key not in self._memo:
            def generate() -> Awaitable[Checklist]:
                return self.engine.achecklist(task, dims, strategy=strategy, question=question)

            if self.shared is None:
                checklist, generated = await generate(), True
            else:  # another worker of this run may be generating it, or have: generated once
                checklist, generated = await self.shared.once(key, generate)
            self._memo[key] = checklist
            if generated:
                self.add(RunLedger(checklists_generated=1))
        return self._memo[key]

    def share(self, run: str) -> None:
        """A pytest-xdist worker of run ``run`` (its testrun uid): checklists are generated once per run
        (:mod:`.shared_checklists`)."""
        self.shared = SharedChecklists(run_directory(self.engine.settings.cache_dir, run))

    async def achecklist_for(self, ctx: TestContext, task: str, dimensions: DimensionsArg, *,
                             strategy: str = "bineval",
                             question: str | None = None) -> tuple[Checklist, ChecklistStatus]:
        """The checklist of the current test and its pin status: pinned, written, unpinned or stale.
        ``strategy="qworld"``/``"qworld-lite"``: criteria written for ``question`` (one pin per question)."""
        dims = resolve_dimensions(dimensions) if strategy == "bineval" else qworld_dimensions(dimensions)
        if ctx.pin_path is None:
            checklist = await self.agenerate(task, dims, strategy, question)
            self.add(RunLedger(unpinned={entry_id(Path(ctx.nodeid), checklist)}))
            return checklist, "unpinned"
        update, strict = self.options.update_checklists, self.options.strict
        if update:
            checklist, pinned, actions = await update_pin(
                ctx.pin_path, ctx.test_name, task, dims, question=question, strategy=strategy, mode=update,
                generate=lambda: self.agenerate(task, dims, strategy, question), since_ns=self.started_ns,
                marker_dir=Path(self.engine.settings.cache_dir) / "pins-written", rootpath=self.rootpath)
            entry = entry_id(ctx.pin_path, checklist)  # one per checklist, not per file
            written = any(a.action in ("created", "rewritten") for a in actions)
            self.add(RunLedger(pin_actions=list(actions), pins_written=[entry] if written else [],
                               unpinned=set() if pinned else {entry}))
            if not pinned:  # a stale pin kept because it was edited by hand
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
        checklist = await self.agenerate(task, dims, strategy, question)
        self.add(RunLedger(unpinned={entry_id(ctx.pin_path, checklist)}))  # what --bineval-update-checklists writes
        return checklist, "stale" if stale else "unpinned"

    # -- what a test found ---------------------------------------------------------------------------------------
    def add(self, entries: RunLedger, ctx: TestContext | None = None) -> None:
        """Add ``entries`` to the run's ledger, and to the context of the test they are of."""
        if ctx is not None:
            ctx.found.add(entries)
        self.ledger.add(entries)

    def unscored_error(self, ctx: TestContext, error: str, message: str) -> None:
        """The test errored (a bineval error) and no record of it says why: keep it for the totals and reports."""
        if any(r.outcome == "error" for r in ctx.records):
            return  # a judge error: its record says so
        self.add(RunLedger(unscored=[UnscoredTest.build(ctx.nodeid, error, message)]), ctx)

    def call_ended(self, ctx: TestContext, *, failed: bool) -> None:
        """The test's call ran (a baseline test that did not run is "not run", not "removed"), and failed or not;
        this attempt decides (a passing attempt of a re-run is no longer failed)."""
        self.ledger.failed_tests.discard(ctx.nodeid)  # after the test's call: its threads are done
        self.add(RunLedger(ran_tests={ctx.nodeid}, failed_tests={ctx.nodeid} if failed else set()), ctx)

    def keep_last_attempt(self, nodeid: str, ctx: TestContext | None) -> None:
        """After a test's protocol: what earlier attempts of it recorded (a re-run plugin ran it again) is
        replaced by the last attempt's (``ctx``, None when it failed before its context was made); their
        requests stay in the usage, and the records replaced are counted in ``rerun_evaluations``."""
        made = self.attempts.pop(nodeid, 0)
        if made == 0 or (made == 1 and ctx is not None):
            return  # one attempt (the usual case): nothing to replace, and no scan of the run's records
        self.ledger.keep_attempt(nodeid, ctx.found if ctx is not None else RunLedger())

    # -- the run's report ----------------------------------------------------------------------------------------
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
                        partial: str | None = None, workers: int = 1) -> ReportDocument:
        """The run's finished document: what every output reads (built once, at the end of the run);
        ``partial``: why the run was cut short, if it was; ``workers``: the pytest-xdist workers of the run (each
        kept its share of the budget)."""
        s = self.engine.settings
        settings = ReportSettings(model=s.judge_model, checklist_model=s.generator_model, cache=s.cache,
                                  temperature=s.temperature, concurrency=s.concurrency, timeout=s.timeout,
                                  retries=s.retries, judge_prompt=self.options.settings.judge_prompt,
                                  repeats=s.repeats, gate=self.options.gate,
                                  budget=s.budget, budget_workers=workers if s.budget is not None else 1)
        notes = [*self.engine.cache_notes(), *self.ledger.threshold_notes(self.options.threshold)]
        if self.options.fail_on_regression and not self.options.baseline:
            notes.append("bineval: --bineval-fail-on-regression without --bineval-baseline: nothing was compared")
        return self.ledger.document(settings, regressions=self.regressions, optimize=optimized, notes=notes,
                                    partial=partial, judged_by=self.judged_by(),
                                    confirm=(s.confirm, s.confidence) if s.confirm else None)

    def close(self) -> None:
        self.engine.close()

