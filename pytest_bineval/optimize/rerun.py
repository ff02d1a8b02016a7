"""``--bineval-optimize`` inside the pytest session: a small plugin object that, after the run's test loop, runs the
self-update loop (:mod:`.loop`) for every prompt file and measures each candidate by running the prompt's tests
again in this process (``runtestprotocol``, as pytest-rerunfailures does), with the candidate in the prompt file.

Under pytest-xdist the workers are gone when the loop starts: the controller collects the prompt's tests itself
and re-runs them serially in its own process (the judge, the cache and the model as configured). The re-runs'
verdicts are the loop's measurements, not the run's: they are taken out of the run's records and outcomes again
(their requests stay in the usage, and each iteration says how many it made).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any, Protocol

import pytest

from ..files import write_text_atomic
from ..report.document import OptimizeOutcome
from ..report.record import EvaluationRecord

__all__ = ["OptimizeRunner", "RunState"]


class RunState(Protocol):
    """What the loop needs of the run: its records (the re-runs' are taken out again) and the tests that failed."""

    records: list[EvaluationRecord]
    failed_tests: set[str]


class OptimizeRunner:
    """Registered by the plugin when ``--bineval-optimize`` is on (on the controller, not on xdist workers)."""

    def __init__(self, state: Callable[[], RunState], engine: Callable[[], Any], rootpath: Path, max_iterations: int,
                 show: Callable[[str], object] | None = None) -> None:
        self._state = state
        self._engine = engine  # the session's engine, made when first needed
        self.rootpath = rootpath
        self.max_iterations = max_iterations
        self.show = show
        self.outcomes: list[OptimizeOutcome] | None = None  # None: the loop did not run (the run was cut)
        self.cut = False

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, Any, Any]:
        result = yield
        if session.shouldstop or session.shouldfail:
            return result  # a run cut by -x, --maxfail or a stop: its records are not the whole run
        self.outcomes = []
        self.run(session, self.outcomes)
        return result

    def finish(self, records: Sequence[EvaluationRecord]) -> list[OptimizeOutcome]:
        """What the loop did, for the summary and the report; when it did not run (the run was cut), one entry per
        prompt file saying so."""
        if self.outcomes is not None:
            return self.outcomes
        return [OptimizeOutcome(prompt=name, status="not run",
                                message="the run was cut (-x, --maxfail, Ctrl-C or an error): nothing was optimized")
                for name in sorted({r.prompt for r in records if r.prompt})]

    def run(self, session: pytest.Session, outcomes: list[OptimizeOutcome]) -> None:
        from ..errors import BinevalError
        from .loop import IterativeOptimizer

        state = self._state()
        records = list(state.records)
        names = sorted({r.prompt for r in records if r.prompt})
        items = self._items(session, records)

        def measure(path: Path, text: str, nodeids: Sequence[str]) -> list[EvaluationRecord]:
            write_text_atomic(path, text)
            wanted = [items[n] for n in nodeids if n in items]
            kept_records, kept_failed = list(state.records), set(state.failed_tests)
            from _pytest.runner import runtestprotocol

            try:
                for i, item in enumerate(wanted):
                    runtestprotocol(item, log=False, nextitem=wanted[i + 1] if i + 1 < len(wanted) else None)
                return [r for r in state.records if not any(r is k for k in kept_records)]
            finally:  # the run's own records and outcomes stand
                state.records[:] = kept_records
                state.failed_tests.clear()
                state.failed_tests.update(kept_failed)

        def live(name: str, entry: dict[str, Any]) -> None:
            if self.show is not None:
                self.show(iteration_line(name, entry))

        optimizer = IterativeOptimizer(self._engine(), measure, max_iterations=self.max_iterations, on_iteration=live)
        for name in names:
            path = Path(name) if Path(name).is_absolute() else self.rootpath / name
            try:
                outcome = optimizer.run(name, path, records)
            except KeyboardInterrupt:  # the prompt file holds its best text so far; its history says the loop was cut
                self.cut = True
                outcomes.append(OptimizeOutcome(prompt=name, status="cut", message=(
                    "interrupted (Ctrl-C): the best prompt so far is kept; the history says the loop was cut")))
                raise
            except (OSError, BinevalError) as exc:
                outcomes.append(OptimizeOutcome(prompt=name, status="error", message=str(exc)))
                continue
            if Path(outcome.history).is_relative_to(self.rootpath):
                outcome.history = Path(outcome.history).relative_to(self.rootpath).as_posix()
            missing = sorted({r.test for r in records if r.prompt == name} - set(items))
            if missing:
                outcome.notes.append(f"{len(missing)} test(s) could not be run again: {', '.join(missing[:3])}")
            outcomes.append(outcome)

    @staticmethod
    def _items(session: pytest.Session, records: Sequence[EvaluationRecord]) -> dict[str, pytest.Item]:
        """The run's items by node id; under xdist (the controller collected nothing) the prompts' tests, collected
        here from their node ids."""
        items = {item.nodeid: item for item in session.items}
        wanted = sorted({r.test for r in records if r.prompt} - set(items))
        if wanted and not session.items:
            collected = session.perform_collect(wanted, genitems=True)
            items.update({item.nodeid: item for item in collected if isinstance(item, pytest.Item)})
        return items


def _score(value: Any) -> str:
    return "n/a" if value is None else f"{float(value):.2f}"


def iteration_line(name: str, entry: dict[str, Any]) -> str:
    """One line per iteration, shown as it ends: scores, prompt length, lessons, requests and cost."""
    applied = entry.get("written", 0)  # lessons written into the candidate (a rollback retires them afterwards)
    rejected = entry.get("rejected", 0)
    u = entry.get("measure_usage") or {}
    o = entry.get("optimizer_usage") or {}
    verdict = "kept" if entry.get("kept") else ("rolled back" if "kept" in entry else "no candidate")
    requests = int(u.get("llm_calls", 0)) + int(o.get("llm_calls", 0))
    cost_parts = [c for c in (u.get("cost_usd"), o.get("cost_usd")) if c is not None]
    cost = f"${sum(cost_parts):.4f}" if cost_parts else "unknown"
    return (f"bineval optimize {name} iteration {entry['iteration']}: {verdict}; "
            f"train {_score(entry.get('train_before'))} -> {_score(entry.get('train_after'))}, "
            f"held-out {_score(entry.get('held_out_before'))} -> "
            f"{_score(entry.get('held_out_after'))}; prompt {entry.get('chars_before')} -> "
            f"{entry.get('chars_after', entry.get('chars_before'))} characters; lessons written {applied}, "
            f"rejected {rejected}; requests {requests}, cost {cost}")
