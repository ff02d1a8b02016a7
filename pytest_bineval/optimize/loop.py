"""The self-update loop as the paper runs it, inside one pytest session (``--bineval-optimize``,
``--bineval-max-iterations N``).

For each generator prompt file the run's tests name, its tests are split deterministically (by node id) into
*train* and *held-out* (:func:`split`); then, up to N times:

1. the failures of the train tests (their "no" verdicts) go to the note-taker, lessons are deduplicated and
   written into a candidate prompt by surgical edits (:class:`~pytest_bineval.optimize.lessons.LessonLoop`,
   with its growth budget);
2. the prompt's tests run again in the same session with the candidate in the prompt file (``measure``: the
   plugin re-runs the items, as pytest-rerunfailures does);
3. the candidate is kept only if the held-out score does not drop and the train score rises; otherwise the
   best prompt so far is restored and the loop stops;

and it stops early when no train failure remains or no new lesson comes. The best prompt is what the file
holds at the end; ``__bineval__/<prompt file>.optimize.json`` records every iteration (train and held-out
scores, failing questions, prompt length, lessons applied and rejected, requests and cost). A Ctrl-C keeps the
best prompt so far and a history that says the loop was cut.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine import Engine, run_sync
from ..files import write_text_atomic
from ..models import Usage
from ..report.document import OptimizeOutcome
from ..report.record import EvaluationRecord
from .lessons import digest, history_path, load_history, save_history
from .prompt import Failure, PromptOptimizer, failures_by_prompt

__all__ = ["HELD_OUT_RATIO", "MIN_TESTS_FOR_HELD_OUT", "IterativeOptimizer", "Measure", "split"]

HELD_OUT_RATIO = 0.25  # share of a prompt's tests held out (rounded up), when it has at least 4
MIN_TESTS_FOR_HELD_OUT = 4

# ``measure(prompt path, prompt text, node ids)``: the records of the tests run again with ``text`` in the file
# (the plugin writes the file, re-runs the items and returns what they recorded; the run's own records stay).
Measure = Callable[[Path, str, Sequence[str]], Sequence[EvaluationRecord]]


def _rank(nodeid: str) -> str:
    return hashlib.sha256(nodeid.encode("utf-8")).hexdigest()


def split(tests: Sequence[str]) -> tuple[list[str], list[str]]:
    """(train, held-out) node ids: the ``ceil(HELD_OUT_RATIO * n)`` tests whose node id hashes lowest are held out
    (deterministic, and independent of the order the tests ran in); fewer than 4 tests: no held-out set."""
    unique = sorted(set(tests))
    if len(unique) < MIN_TESTS_FOR_HELD_OUT:
        return unique, []
    n_held = math.ceil(HELD_OUT_RATIO * len(unique))
    held = set(sorted(unique, key=_rank)[:n_held])
    return [t for t in unique if t not in held], sorted(held)


def _test_of(record: EvaluationRecord) -> str:
    return record.test


def score_of(records: Sequence[EvaluationRecord], prompt: str, tests: Sequence[str]) -> float | None:
    """Mean share of yes of the evaluations of ``tests`` made with ``prompt`` (judge errors left out)."""
    wanted = set(tests)
    values = [float(r.overall) for r in records
              if r.prompt == prompt and _test_of(r) in wanted and r.outcome != "error" and r.overall is not None]
    return sum(values) / len(values) if values else None


def _fmt(score: float | None) -> str:
    return "n/a" if score is None else f"{score:.3f}"


@dataclass
class _State:
    text: str
    records: list[EvaluationRecord]
    train: float | None
    held_out: float | None


@dataclass
class IterativeOptimizer:
    """Runs up to ``max_iterations`` iterations per prompt file, measuring each candidate with ``measure``."""

    engine: Engine
    measure: Measure
    max_iterations: int = 3
    model: str | None = None
    on_iteration: Callable[[str, dict[str, Any]], object] | None = None  # shown live by the plugin
    _optimizer: PromptOptimizer = field(init=False)

    def __post_init__(self) -> None:
        self._optimizer = PromptOptimizer(self.engine, self.model)

    def run(self, name: str, path: Path, records: Sequence[EvaluationRecord]) -> OptimizeOutcome:
        """The loop for the prompt file ``path`` (named ``name`` by the tests), from the run's ``records``."""
        original = path.read_text(encoding="utf-8")
        mine = [r for r in records if r.prompt == name]
        tests = sorted({r.test for r in mine})
        train, held = split(tests)
        hist_file = history_path(path)
        history = load_history(hist_file)
        first = len(history["iterations"]) + 1
        start = best = current = _State(original, mine, score_of(mine, name, train), score_of(mine, name, held))
        result = OptimizeOutcome(prompt=name, status="unchanged", score=score_of(mine, name, tests),
                                 failures=len(failures_by_prompt(mine).get(name, [])), chars_before=len(original),
                                 chars_after=len(original), history=str(hist_file), train=train, held_out=held)
        if not held:
            result.notes.append(f"{len(tests)} test(s) use this prompt: fewer than {MIN_TESTS_FOR_HELD_OUT}, so no "
                                "held-out tests; a candidate is judged on the tests it learned from")
        memory = [str(item["text"]) for item in history["lessons"] if item.get("status") != "not applied"]
        stop = f"the iteration limit ({self.max_iterations}) was reached"
        try:
            for k in range(self.max_iterations):
                iteration = first + k
                failures = [f for f in failures_by_prompt(current.records).get(name, []) if f.test in set(train)]
                if not failures:
                    stop = "no failure of the train tests remains"
                    break
                entry, candidate = self._learn(name, current, failures, memory, iteration)
                result.lessons += entry["lessons"]
                result.usage += Usage.model_validate(entry["optimizer_usage"])
                if candidate is None:
                    stop = "no new lesson"
                    self._record(history, hist_file, entry, name, result)
                    break
                before = self.engine.usage.model_copy()
                new_records = list(self.measure(path, candidate, tests))
                spent = self.engine.usage.since(before)
                measured = _State(candidate, new_records, score_of(new_records, name, train),
                                  score_of(new_records, name, held))
                keep, why = self._keep(best, measured, bool(held))
                entry.update(
                    train_after=measured.train, held_out_after=measured.held_out, chars_after=len(candidate),
                    failing_after=sorted({f.question for f in failures_by_prompt(new_records).get(name, [])}),
                    measure_usage=spent.model_dump(mode="json"), kept=keep, why=why, after_digest=digest(candidate),
                    after=candidate,
                )
                written = [e for e in entry["lessons"] if e.get("status") in ("applied", "appended")]
                entry["written"] = len(written)
                memory += [str(e["text"]) for e in written]
                self._record(history, hist_file, entry, name, result)
                if not keep:
                    stop = f"iteration {iteration} was rolled back: {why}"
                    break
                best = current = measured
        except KeyboardInterrupt:
            write_text_atomic(path, best.text)
            history["cut"] = {"iteration": first + len(result.iterations), "why": "interrupted (Ctrl-C)"}
            save_history(hist_file, history)
            raise
        if path.read_text(encoding="utf-8") != best.text:
            write_text_atomic(path, best.text)
        result.chars_after = len(best.text)
        result.status = "updated" if best.text != original else "unchanged"
        kept = sum(1 for it in result.iterations if it.get("kept"))
        result.message = (f"{kept} of {len(result.iterations)} iteration(s) kept; train {_fmt(start.train)} -> "
                          f"{_fmt(best.train)}, held-out {_fmt(start.held_out)} -> {_fmt(best.held_out)}; "
                          f"stopped: {stop}")
        if history.pop("cut", None) is not None or result.iterations:
            save_history(hist_file, history)
        return result

    def _learn(self, name: str, current: _State, failures: Sequence[Failure], memory: list[str],
               iteration: int) -> tuple[dict[str, Any], str | None]:
        """One note-taker/updater pass over the train failures: (the history entry, the candidate or None)."""
        by_question: dict[tuple[str, str], list[Failure]] = {}
        for f in failures:
            by_question.setdefault((f.dimension, f.question), []).append(f)
        ranked = sorted(by_question.values(), key=lambda fs: -len(fs))
        requests = [self._optimizer._note_request(current.text, group) for group in ranked]
        learned = run_sync(self._optimizer.loop.learn(current.text, requests, memory, iteration))
        lessons = [*({"text": t, "status": "duplicate"} for t in learned.duplicates), *learned.rejected,
                   *learned.entries]
        entry: dict[str, Any] = {
            "iteration": iteration,
            "optimizer": self._optimizer.model,
            "train_before": current.train,
            "held_out_before": current.held_out,
            "failing_before": sorted({f.question for f in failures}),
            "chars_before": len(current.text),
            "lessons": lessons,
            "rejected": len(learned.rejected),
            "edits_discarded": sum(1 for e in learned.entries if e.get("discarded_edit")),
            "errors": learned.errors,
            "optimizer_usage": learned.usage.model_dump(mode="json"),
            "before_digest": digest(current.text),
            "before": current.text,
        }
        return entry, (learned.text if learned.text != current.text else None)

    @staticmethod
    def _keep(best: _State, measured: _State, has_held_out: bool) -> tuple[bool, str]:
        if measured.train is None or (best.train is not None and measured.train <= best.train):
            return False, f"the train score did not rise ({_fmt(best.train)} -> {_fmt(measured.train)})"
        if has_held_out and (measured.held_out is None or
                             (best.held_out is not None and measured.held_out < best.held_out)):
            return False, f"the held-out score dropped ({_fmt(best.held_out)} -> {_fmt(measured.held_out)})"
        return True, "the train score rose and the held-out score did not drop"

    def _record(self, history: dict[str, Any], hist_file: Path, entry: dict[str, Any], name: str,
                result: OptimizeOutcome) -> None:
        if entry.get("kept") is False:  # a candidate rolled back: its lessons are retired, not proposed again
            for e in entry["lessons"]:
                if e.get("status") in ("applied", "appended"):
                    e["status"] = "rolled back"
        history["iterations"].append(entry)
        history["lessons"] += [e for e in entry["lessons"] if e.get("status") not in ("duplicate", "not a lesson")]
        history.setdefault("rejected", []).extend({**e, "iteration": entry["iteration"]} for e in entry["lessons"]
                                                  if e.get("status") == "not a lesson")
        save_history(hist_file, history)
        summary = {k: v for k, v in entry.items() if k not in ("before", "after")}
        result.iterations.append(summary)
        if self.on_iteration is not None:
            self.on_iteration(name, summary)

