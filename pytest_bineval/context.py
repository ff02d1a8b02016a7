"""The running test's context: what ``assert_passes`` knows about the test it runs in (set by the plugin around
each test call), found through a ContextVar and, for threads the test starts, a fallback. A light module:
``assert_passes`` imports it when the test module is collected."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import UsageError
from .markers import MarkerArgs

if TYPE_CHECKING:
    from .record import EvaluationRecord, UnscoredTest
    from .session import BinevalService


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
