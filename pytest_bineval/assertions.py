"""``assert_passes``: evaluate an output and fail the test, with reasons, when it scores too low.

Inside a pytest run the plugin provides the current test's context (its service, marker, task
fixture, pinned checklists, report). Outside pytest, ``task=`` or ``checklist=`` must be given and
the default settings apply.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .dimensions import DimensionsArg, default_threshold, did_you_mean, parse_dimensions
from .errors import BinevalAssertionError, BinevalJudgeError, NoTaskError, UsageError
from .models import SCORE_KINDS, STRATEGIES, Checklist, Evaluation, ScoreKind
from .qworld import DEFAULT_TASK
from .record import ChecklistStatus, EvaluationRecord, Location
from .session import TestContext, current
from .untrusted import inert

Threshold = float | Mapping[str, float]

NO_TASK_MESSAGE = (
    "pytest-bineval needs the task the output was made for, to build its checklist. Give it in one of "
    "three ways:\n"
    "  1. assert_passes(output, task=\"Summarize the article ...\")  (or checklist=...)\n"
    "  2. @pytest.mark.bineval(task=\"Summarize the article ...\") on the test, class or module\n"
    "  3. a `bineval_task` fixture returning the task text (conftest.py, module or class)"
)


def thresholds_for(names: list[str], *layers: Threshold | None) -> dict[str, float]:
    """Per-dimension thresholds: the first layer that sets a dimension wins, then the defaults."""
    out: dict[str, float] = {}
    for name in names:
        value: float | None = None
        for layer in layers:
            if layer is None:
                continue
            if isinstance(layer, Mapping):
                if name in layer:
                    value = float(layer[name])
                    break
                if "*" in layer:
                    value = float(layer["*"])
                    break
            else:
                value = float(layer)
                break
        if value is None:
            value = default_threshold(name)
        if not 0.0 <= value <= 1.0:
            raise UsageError(f"threshold for {name!r} must be within [0, 1], not {value}")
        out[name] = value
    return out


def check_threshold_keys(names: list[str], explicit: Threshold | None) -> None:
    """A key of the assertion's own ``threshold=`` that names a dimension it does not check would be silently
    ignored (``{"fluncy": 0.4}``): a usage error instead. (The marker's and the command line's keys are shared by
    many tests: the run's summary notes a key that no evaluation checked, see ``BinevalService.threshold_notes``.)"""
    if isinstance(explicit, Mapping):
        for key in explicit:
            if key != "*" and key not in names:
                raise UsageError(f"threshold={{{key!r}: ...}} names a dimension this assertion does not check "
                                 f"(it checks: {', '.join(names)}){did_you_mean(key, names)}")


def _fmt(score: float | None) -> str:
    return "n/a" if score is None else f"{score:.2f}"


def failure_message(record: EvaluationRecord) -> str:
    """Every requested dimension's score vs threshold, then every failing question with its explanation
    (criteria with points: the most points first, each with what it cost)."""
    lines = ["bineval: output scored below threshold"]
    kind = " points" if record.score_kind == "points" else ""
    for d in record.dimensions:
        mark = "ok" if d.outcome == "passed" else "FAIL"
        if record.gate == "lower-bound" or record.repeats > 1:
            interval = "n/a" if d.low is None or d.high is None else f"[{d.low:.2f}, {d.high:.2f}]"
            on = f"; lower bound {_fmt(d.low)}" if record.gate == "lower-bound" else ""
            lines.append(f"  {d.name}: {_fmt(d.score)}{kind} over {d.answers} answers, 95% interval {interval}{on} "
                         f"(threshold {d.threshold:.2f}) {mark}")
        else:
            lines.append(f"  {d.name}: {_fmt(d.score)}{kind} (threshold {d.threshold:.2f}) {mark}")
    failed = record.failing()
    points = record.points()
    if failed:
        lines.append(f"failing questions ({len(failed)}):")
        for v in failed:
            votes = f" ({v.repeats.count('yes')} of {len(v.repeats)} yes)" if v.repeats else ""
            p = points.get(v.question_id)
            cost = "" if p is None else (f" (+{p} missed)" if p > 0 else f" ({p} penalty)")
            lines.append(f"  [{v.dimension}]{cost} {inert(v.question)}")
            lines.append(f"      -> no{votes}: {inert(v.reason())}")
    return "\n".join(lines)


def judge_error_message(record: EvaluationRecord) -> str:
    errors = record.errors()
    lines = [f"bineval: the judge ({record.model}) failed on {len(errors)} question(s); "
             "this test cannot be scored:"]
    for v in errors:
        lines.append(f"  [{v.dimension}] {inert(v.question)}")
        lines.append(f"      cause: {inert(v.error)}")
    return "\n".join(lines)


@dataclass
class _Prepared:
    evaluation: Evaluation
    thresholds: dict[str, float]
    ctx: TestContext | None
    checklist: Checklist
    status: ChecklistStatus
    output: str
    source: str | None
    score_kind: ScoreKind = "share"


def _conclude(p: _Prepared, location: Location | None) -> Evaluation:
    __tracebackhide__ = True
    if p.ctx is not None:
        record = p.ctx.service.record(p.ctx, p.evaluation, p.thresholds, p.checklist, p.status, p.output, p.source,
                                      location, score_kind=p.score_kind)
    else:
        record = EvaluationRecord.build(test="", evaluation=p.evaluation, thresholds=p.thresholds,
                                        questions=p.checklist.questions, checklist_status=p.status,
                                        output=p.output, source=p.source, location=location,
                                        score_kind=p.score_kind, strategy=p.checklist.strategy)
    if record.outcome == "error":
        raise BinevalJudgeError(judge_error_message(record), record.errors())
    if record.outcome == "failed":
        raise BinevalAssertionError(failure_message(record), p.evaluation)
    return p.evaluation


def _task(task: str | None, ctx: TestContext | None, *, required: bool = True) -> str | None:
    """The task: explicit > marker > ``bineval_task`` fixture (tested precedence); None only when not
    ``required`` (question-specific criteria default to answering the question)."""
    if task is None and ctx is not None:
        task = ctx.marker.task
        if task is None and ctx.fixture_task is not None:
            task = ctx.fixture_task()
    if task is None and required:
        raise NoTaskError(NO_TASK_MESSAGE)
    return task


def _choice(name: str, value: str | None, marker_value: str | None, allowed: tuple[str, ...], default: str) -> str:
    """An argument > the marker's kwarg > the default; a value not in ``allowed`` is a UsageError."""
    chosen = value if value is not None else marker_value if marker_value is not None else default
    if chosen not in allowed:
        raise UsageError(f"{name}={chosen!r}: use one of {', '.join(allowed)}")
    return chosen


async def _aprepare(output: Any, dimension: DimensionsArg, source: Any, task: str | None,
                    threshold: Threshold | None, checklist: Checklist | None, model: str | None,
                    criteria: str | None = None, score: str | None = None) -> _Prepared:
    from .judge import check_output

    check_output(output, source)
    ctx = current()
    request = parse_dimensions(dimension)
    strategy = _choice("criteria", criteria, ctx.marker.criteria if ctx is not None else None, STRATEGIES, "bineval")
    score_kind: ScoreKind = "points" if _choice(
        "score", score, ctx.marker.score if ctx is not None else None, SCORE_KINDS, "share") == "points" else "share"
    if score_kind == "points" and ctx is not None and ctx.service.options.gate == "lower-bound":
        raise UsageError("--bineval-gate lower-bound compares the lower end of a share's 95% interval with the "
                         "threshold; score='points' has no such interval: run these tests with the mean gate")
    status: ChecklistStatus = "explicit"
    if checklist is None:
        question: str | None = None
        if strategy != "bineval":
            if source is None:
                raise UsageError(f"criteria={strategy!r} writes criteria for the question the output answers: pass "
                                 "the question (with its context) as source=")
            question = source
        found_task = _task(task, ctx, required=strategy == "bineval")
        gen_dims: DimensionsArg = ctx.marker.dimensions if ctx is not None and ctx.marker.dimensions else dimension
        if ctx is not None:
            checklist, status = await ctx.service.achecklist_for(
                ctx, found_task or DEFAULT_TASK, gen_dims, strategy=strategy, question=question)
        else:
            from .api import agenerate_checklist

            checklist = await agenerate_checklist(found_task, gen_dims, model=model, strategy=strategy,
                                                  question=question)
            status = "unpinned"
    names = list(request.names) if request is not None else list(checklist.dimensions)
    selected = checklist.select(names)
    layers: list[Threshold | None] = [threshold]
    if ctx is not None:
        layers += [ctx.marker.threshold, ctx.service.options.threshold]
    thresholds = thresholds_for(names, *layers)
    check_threshold_keys(names, threshold)
    if ctx is not None:
        ctx.service.note_threshold_keys(names, ctx.marker.threshold)
        evaluation = await ctx.service.engine.aevaluate(output, selected, source, model=model)
    else:
        from .api import aevaluate

        evaluation = await aevaluate(output, selected, source, model=model)
    return _Prepared(evaluation, thresholds, ctx, selected, status, output, source, score_kind)


def _caller_location() -> Location | None:
    """File (relative to the rootdir, else to the current directory) and line of the user's call."""
    frame = sys._getframe(1)
    package = str(Path(__file__).parent)
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return None
    ctx = current()
    root = ctx.service.rootpath if ctx is not None else Path.cwd()
    path = Path(frame.f_code.co_filename)
    try:
        name = path.resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError):
        name = os.fspath(path)
    return Location(file=name, line=frame.f_lineno)


def assert_passes(
    output: str,
    dimension: DimensionsArg = None,
    *,
    source: str | None = None,
    task: str | None = None,
    threshold: Threshold | None = None,
    checklist: Checklist | None = None,
    model: str | None = None,
    criteria: str | None = None,
    score: str | None = None,
) -> Evaluation:
    """Evaluate ``output`` and raise :class:`BinevalAssertionError` unless every requested dimension's
    score reaches its threshold. Judge failures raise :class:`BinevalJudgeError` (never a pass).

    ``dimension``: a name, a list, or None for all of the checklist's dimensions. ``threshold``: a float
    for all requested dimensions or ``{"name": value}``. Returns the :class:`Evaluation`.

    ``criteria``: ``"bineval"`` (default: the checklist of the task), or ``"qworld"`` / ``"qworld-lite"``:
    criteria with importance points written for the question the output answers, given as ``source``
    (pinned per question). ``score``: ``"share"`` of yes (default) or ``"points"``: points earned minus
    penalties over the positive points (:func:`~pytest_bineval.models.points_score`); thresholds apply to it.
    Both default to the marker's ``criteria=`` / ``score=``.
    """
    __tracebackhide__ = True
    from .engine import run_sync

    location = _caller_location()
    prepared = run_sync(_aprepare(output, dimension, source, task, threshold, checklist, model, criteria, score))
    return _conclude(prepared, location)


async def assert_passes_async(
    output: str,
    dimension: DimensionsArg = None,
    *,
    source: str | None = None,
    task: str | None = None,
    threshold: Threshold | None = None,
    checklist: Checklist | None = None,
    model: str | None = None,
    criteria: str | None = None,
    score: str | None = None,
) -> Evaluation:
    """``await``-able twin of :func:`assert_passes` for async tests (no nested event loop)."""
    __tracebackhide__ = True
    location = _caller_location()
    prepared = await _aprepare(output, dimension, source, task, threshold, checklist, model, criteria, score)
    return _conclude(prepared, location)
