"""``assert_passes``: evaluate an output and fail the test, with reasons, when it scores too low.

Inside a pytest run the plugin provides the current test's context (its service, marker, task
fixture, pinned checklists, report). Outside pytest, ``task=`` or ``checklist=`` must be given and
the default settings apply.

Each call is one :class:`AssertionRequest`, resolved once from the call's arguments, the marker, the
``bineval_task`` fixture and the options, and carried to the engine: the session's (inside pytest), or one
engine for the call (outside), which makes the checklist and judges the output.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .dimensions import DimensionsArg, default_threshold, did_you_mean, parse_dimensions
from .errors import BinevalAssertionError, BinevalJudgeError, NoTaskError, UsageError
from .kinds import SCORE_KINDS, STRATEGIES, ScoreKind
from .untrusted import inert

if TYPE_CHECKING:  # a light module at import: a test module imports it when it is collected
    from .engine import Engine
    from .models import Checklist, Evaluation
    from .record import ChecklistStatus, EvaluationRecord, Location
    from .session import TestContext

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
            asks = v.asks  # repeats, or the asks of --bineval-confirm
            unstable = ", unstable" if v.confirmation is not None and v.unstable else ""
            votes = f" ({asks.count('yes')} of {len(asks)} yes{unstable})" if len(asks) > 1 else ""
            p = points.get(v.question_id)
            cost = "" if p is None else (f" (+{p} missed)" if p > 0 else f" ({p} penalty)")
            lines.append(f"  [{v.dimension}]{cost} {inert(v.question)}")
            lines.append(f"      -> no{votes}: {inert(v.reason())}")
    if record.source is None and failed:
        from .judge import refers_to_the_input

        blind = [v for v in failed if refers_to_the_input(v.question)]
        if blind:
            lines.append(f"note: no source= was given, and {len(blind)} failing question(s) are about the input: they "
                         "were judged about nothing; pass assert_passes(output, ..., source=...)")
    return "\n".join(lines)


def judge_error_message(record: EvaluationRecord) -> str:
    errors = record.errors()
    lines = [f"bineval: the judge ({record.model}) failed on {len(errors)} question(s); "
             "this test cannot be scored:"]
    for v in errors:
        lines.append(f"  [{v.dimension}] {inert(v.question)}")
        lines.append(f"      cause: {inert(v.error)}")
    return "\n".join(lines)


@dataclass(frozen=True)
class AssertionRequest:
    """One assertion, resolved once from the call's arguments, the test's marker, its ``bineval_task`` fixture
    and the session's options (in that order of precedence), and carried as it is to the engine."""

    output: str
    source: str | None
    ctx: TestContext | None  # None outside a pytest run with the plugin
    location: Location | None  # the user's call
    checklist: Checklist | None  # given: no checklist is generated
    task: str | None  # the checklist's task (None: question-specific criteria without one)
    checklist_dimensions: DimensionsArg  # what a generated checklist covers: the marker's, else the call's
    names: list[str] | None  # the dimensions checked (None: all of the checklist's)
    threshold: Threshold | None  # the call's own threshold=
    layers: tuple[Threshold | None, ...]  # the thresholds that apply, first wins: call, marker, options
    strategy: str  # bineval | qworld | qworld-lite
    question: str | None  # what question-specific criteria are written for (the source)
    score_kind: ScoreKind
    model: str | None  # the judge of this call (None: the settings')

    @classmethod
    def build(cls, output: Any, dimension: DimensionsArg = None, *, source: Any = None, task: str | None = None,
              threshold: Threshold | None = None, checklist: Checklist | None = None, model: str | None = None,
              criteria: str | None = None, score: str | None = None) -> AssertionRequest:
        """Check the input (once) and resolve every argument; UsageError or NoTaskError on a bad one."""
        from .judge import check_output
        from .session import current

        check_output(output, source)
        ctx = current()
        marker = ctx.marker if ctx is not None else None
        request = parse_dimensions(dimension)
        strategy = _choice("criteria", criteria, marker.criteria if marker else None, STRATEGIES, "bineval")
        score_kind: ScoreKind = "points" if _choice(
            "score", score, marker.score if marker else None, SCORE_KINDS, "share") == "points" else "share"
        if score_kind == "points" and ctx is not None and ctx.service.options.gate == "lower-bound":
            raise UsageError("--bineval-gate lower-bound compares the lower end of a share's 95% interval with the "
                             "threshold; score='points' has no such interval: run these tests with the mean gate")
        question: str | None = None
        if checklist is None and strategy != "bineval":
            if source is None:
                raise UsageError(f"criteria={strategy!r} writes criteria for the question the output answers: pass "
                                 "the question (with its context) as source=")
            question = source
        if checklist is None:
            task = _task(task, ctx, required=strategy == "bineval")
        layers: tuple[Threshold | None, ...] = (threshold,)
        if ctx is not None:
            layers += (ctx.marker.threshold, ctx.service.options.threshold)
        return cls(output=output, source=source, ctx=ctx, location=_caller_location(ctx), checklist=checklist,
                   task=task, checklist_dimensions=marker.dimensions if marker and marker.dimensions else dimension,
                   names=list(request.names) if request is not None else None, threshold=threshold, layers=layers,
                   strategy=strategy, question=question, score_kind=score_kind, model=model)

    def thresholds(self, names: list[str]) -> dict[str, float]:
        check_threshold_keys(names, self.threshold)
        return thresholds_for(names, *self.layers)


def checklist_of_test(ctx: TestContext) -> Checklist:
    """The ``bineval_checklist`` fixture: the test's checklist, from its marker or ``bineval_task``."""
    if ctx.marker.criteria not in (None, "bineval"):
        raise UsageError(
            f"{ctx.nodeid}: bineval_checklist is the task's checklist; with criteria={ctx.marker.criteria!r} the "
            "criteria depend on the question: use bineval.checklist(task, strategy=..., question=...) instead")
    task = _task(None, ctx)
    if not task:
        raise NoTaskError(NO_TASK_MESSAGE)  # an error of the test that is counted as not scored
    checklist, _ = ctx.service.engine.run(ctx.service.achecklist_for(ctx, task, ctx.marker.dimensions))
    return checklist


async def _aassert(req: AssertionRequest) -> Evaluation:
    """Get the checklist, judge the output, record it (inside pytest) and conclude: raise or return. Inside pytest
    the session's engine does the work; outside, one engine for this call, closed afterwards."""
    __tracebackhide__ = True
    ctx = req.ctx
    if ctx is not None:
        return await _ajudge(req, ctx.service.engine)
    from .engine import Engine
    from .settings import Settings

    engine = Engine(Settings().with_overrides(model=req.model))
    try:
        return await _ajudge(req, engine)
    finally:
        engine.close()


async def _ajudge(req: AssertionRequest, engine: Engine) -> Evaluation:
    __tracebackhide__ = True
    from .qworld import DEFAULT_TASK
    from .record import EvaluationRecord

    ctx = req.ctx
    checklist = req.checklist
    status: ChecklistStatus = "explicit"
    if checklist is None and ctx is not None:
        checklist, status = await ctx.service.achecklist_for(ctx, req.task or DEFAULT_TASK, req.checklist_dimensions,
                                                             strategy=req.strategy, question=req.question)
    elif checklist is None:
        checklist, status = await engine.achecklist(req.task, req.checklist_dimensions, strategy=req.strategy,
                                                    question=req.question), "unpinned"
    names = req.names if req.names is not None else list(checklist.dimensions)
    selected = checklist.select(names)
    thresholds = req.thresholds(names)
    if ctx is not None:
        ctx.service.note_threshold_keys(names, ctx.marker.threshold)
    if req.source is None:
        _warn_missing_source(req, selected)
    evaluation = await engine.aevaluate(req.output, selected, req.source, model=req.model if ctx else None)
    if ctx is not None:
        record = ctx.service.record(ctx, evaluation, thresholds, selected, status, req.output, req.source,
                                    req.location, score_kind=req.score_kind)
    else:
        record = EvaluationRecord.build(test="", evaluation=evaluation, thresholds=thresholds,
                                        questions=selected.questions, checklist_status=status, output=req.output,
                                        source=req.source, location=req.location, score_kind=req.score_kind,
                                        strategy=selected.strategy)
    if record.outcome == "error":
        raise BinevalJudgeError(judge_error_message(record), record.errors())
    if record.outcome == "failed":
        raise BinevalAssertionError(failure_message(record), evaluation)
    return evaluation


def _warn_missing_source(req: AssertionRequest, checklist: Checklist) -> None:
    """A :class:`~pytest_bineval.judge.MissingSourceWarning` at the user's call when questions of ``checklist``
    are about the input and no ``source=`` was given: once per test and checklist (an assertion in a loop
    warns once). A warning, not an error: a question may name "the input" and still be answerable from the
    output alone, and a pinned checklist should not stop a test that passed before."""
    import warnings

    from .judge import MissingSourceWarning, missing_source_message, questions_need_source

    if not questions_need_source(checklist.questions):
        return
    ctx = req.ctx
    if ctx is not None:
        key = (checklist.task, tuple(q.id for q in checklist.questions))
        if key in ctx.warned_missing_source:
            return
        ctx.warned_missing_source.add(key)
    test = ctx.nodeid if ctx is not None else "assert_passes"
    message = missing_source_message(test, checklist.questions)
    if req.location is not None:
        warnings.warn_explicit(MissingSourceWarning(message), MissingSourceWarning, req.location.file,
                               req.location.line)
    else:
        warnings.warn(MissingSourceWarning(message), stacklevel=2)


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


def _caller_location(ctx: TestContext | None) -> Location | None:
    """File (relative to the rootdir, else to the current directory) and line of the user's call."""
    from .record import Location

    frame = sys._getframe(1)
    package = str(Path(__file__).parent)
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return None
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

    request = AssertionRequest.build(output, dimension, source=source, task=task, threshold=threshold,
                                     checklist=checklist, model=model, criteria=criteria, score=score)
    if request.ctx is not None:  # the session engine's event loop: its HTTP clients serve every assertion
        return request.ctx.service.engine.run(_aassert(request))
    return run_sync(_aassert(request))


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
    request = AssertionRequest.build(output, dimension, source=source, task=task, threshold=threshold,
                                     checklist=checklist, model=model, criteria=criteria, score=score)
    return await _aassert(request)
