"""Where an assertion runs: its :class:`Scope`, and which scope is current.

In a pytest run the scope of ``assert_passes`` is the running test's context
(:class:`~pytest_bineval.session.TestContext`: the session's engine, the test's marker and ``bineval_task`` fixture,
its pinned checklists, the run's records); outside (a script, a notebook) it is an :class:`OutsideScope` with the
same methods: the default settings, no marker, fixture or pin, one engine for the call. The assertion
(:mod:`pytest_bineval.assertions`) asks its scope and never which one it has.

A light module: the plugin sets the current test with it for each test (no pydantic model, litellm or model).
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .errors import UsageError
from .kinds import Gate, Threshold
from .markers import MarkerArgs

if TYPE_CHECKING:
    from .dimensions import DimensionsArg
    from .engine import Engine
    from .models import Checklist, Evaluation
    from .report.record import ChecklistStatus, EvaluationRecord, RecordRequest


class Scope(Protocol):
    """What an assertion asks of where it runs."""

    @property
    def name(self) -> str:
        """Who asserts, in messages: the test's node id, or ``assert_passes``."""

    @property
    def marker(self) -> MarkerArgs:
        """The test's ``@pytest.mark.bineval`` arguments (none outside pytest)."""

    def bineval_task(self) -> str | None:
        """The value of the test's ``bineval_task`` fixture (resolved only when asked; None outside pytest)."""

    @property
    def threshold(self) -> Threshold | None:
        """The run's threshold (``--bineval-threshold``)."""

    @property
    def gate(self) -> Gate:
        """What each threshold is compared with (``--bineval-gate``)."""

    @property
    def rootpath(self) -> Path:
        """What a call's file is named relative to."""

    @property
    def engine(self) -> Engine:
        """The engine that generates checklists and judges."""

    async def achecklist(self, task: str | None, dimensions: DimensionsArg, *, strategy: str,
                         question: str | None) -> tuple[Checklist, ChecklistStatus]:
        """The checklist of ``task`` (or ``question``'s criteria) and its pin status."""

    def note_checked(self, names: list[str]) -> None:
        """An assertion checked the dimensions ``names`` (for the run's notes on threshold keys)."""

    def first_warning(self, key: Hashable) -> bool:
        """Whether the warning ``key`` is new here (a test warns once about a checklist, not per call)."""

    def record(self, request: RecordRequest, evaluation: Evaluation, checklist: Checklist, status: ChecklistStatus,
               thresholds: dict[str, float]) -> EvaluationRecord:
        """The evaluation's record, kept for the run (its summary, reports and hook) when there is one."""

    def release(self) -> None:
        """The assertion is over (an engine made for it is closed)."""


class OutsideScope:
    """The scope of an assertion outside a pytest run: the default settings with the call's ``model``; no marker,
    fixture, options or pins (the checklist is generated, "unpinned"); one engine for the call, made when first
    needed and closed when the call ends; no run keeps the record."""

    marker = MarkerArgs()
    threshold: Threshold | None = None
    gate: Gate = "mean"
    name = "assert_passes"

    def __init__(self, model: str | None = None) -> None:
        self.rootpath = Path.cwd()
        self._model = model
        self._engine: Engine | None = None

    def bineval_task(self) -> str | None:
        return None

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            from .engine import Engine
            from .settings import Settings

            self._engine = Engine(Settings().with_overrides(model=self._model))
        return self._engine

    async def achecklist(self, task: str | None, dimensions: DimensionsArg, *, strategy: str,
                         question: str | None) -> tuple[Checklist, ChecklistStatus]:
        return await self.engine.achecklist(task, dimensions, strategy=strategy, question=question), "unpinned"

    def note_checked(self, names: list[str]) -> None:
        """No run to note them for."""

    def first_warning(self, key: Hashable) -> bool:
        return True  # each call is on its own

    def record(self, request: RecordRequest, evaluation: Evaluation, checklist: Checklist, status: ChecklistStatus,
               thresholds: dict[str, float]) -> EvaluationRecord:
        from .report.record import EvaluationRecord

        return EvaluationRecord.build(request, evaluation, checklist, thresholds=thresholds, status=status)

    def release(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None


# -- the current test ----------------------------------------------------------------------------------------------
_current: contextvars.ContextVar[Scope | None] = contextvars.ContextVar("bineval_test", default=None)


@dataclass(frozen=True)
class _Running:
    scope: Scope
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

    var: contextvars.Token[Scope | None]
    running: _Running | None


def set_current(scope: Scope | None) -> ContextToken:
    """``scope`` (the running test's context; None: no test) is current until :func:`reset_current`."""
    global _running
    token = ContextToken(_current.set(scope), _running)
    _running = None if scope is None else _Running(scope, threading.current_thread(),
                                                   frozenset(threading.enumerate()))
    return token


def reset_current(token: ContextToken) -> None:
    global _running
    _current.reset(token.var)
    _running = token.running


def current_scope(model: str | None = None) -> Scope:
    """The running test's context, or an :class:`OutsideScope` (with ``model``) outside a pytest run with the
    plugin (or outside a test).

    The ContextVar comes first (asyncio tasks and ``contextvars.copy_context().run`` carry it). A thread without it
    gets the test running in this process if the thread started during that test; a thread that was alive before
    that test started (a thread of an earlier test that outlived it, or a pool shared by tests) cannot be told
    apart from one working for the running test: a :class:`UsageError` says so, never a silent attribution to
    the running test. When no test is running (between tests), a thread's evaluation belongs to no test, as
    outside pytest."""
    scope = _current.get()
    if scope is not None:
        return scope
    running = _running
    thread = threading.current_thread()
    if running is None or thread is running.thread:
        return OutsideScope(model)
    if thread in running.before:
        raise UsageError(
            f"assert_passes ran in a thread started before the running test ({running.scope.name}) began, so "
            "pytest-bineval cannot tell which test it evaluates for (a thread of an earlier test, or a pool shared "
            "by tests). Start the thread in the test, or pass the test's context to it: "
            "pool.submit(contextvars.copy_context().run, assert_passes, ...)")
    return running.scope
