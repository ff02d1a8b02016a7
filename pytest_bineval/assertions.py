"""``assert_passes``: evaluate an output and fail the test, with reasons, when it scores too low.

Each call is one :class:`AssertionRequest`, resolved once (its input checked first) from the call's arguments and
its :class:`~pytest_bineval.scope.Scope`: the running test's context in a pytest run (the session's engine, the
marker, the ``bineval_task`` fixture, the options, pinned checklists, the run's records), else an outside scope
(the default settings, no marker; ``task=`` or ``checklist=`` must be given). The scope makes the checklist, its
engine judges the output, the scope records it, and the assertion concludes: raise or return. The same steps in
both places: the assertion never asks which scope it has.
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
from .kinds import SCORE_KINDS, STRATEGIES, Gate, ScoreKind, Threshold
from .untrusted import inert

if TYPE_CHECKING:  # a light module at import: a test module imports it when it is collected
    from collections.abc import Callable
    from types import TracebackType

    from .conversation import Conversation, OutputArg
    from .models import Checklist, Evaluation
    from .report.record import ChecklistStatus, EvaluationRecord, Location
    from .scope import Scope
    from .sources import Source, SourceArg

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
    many tests: the run's summary notes a key that no evaluation checked, see ``RunLedger.threshold_notes``.)"""
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
    if record.first_failing_turn is not None:
        lines.append(f"first step that went wrong: {record.turn_label(record.first_failing_turn)}")
    if failed:
        lines.append(f"failing questions ({len(failed)}):")
        for v in failed:
            asks = v.asks  # repeats, or the asks of --bineval-confirm
            unstable = ", unstable" if v.confirmation is not None and v.unstable else ""
            votes = f" ({asks.count('yes')} of {len(asks)} yes{unstable})" if len(asks) > 1 else ""
            p = points.get(v.question_id)
            cost = "" if p is None else (f" (+{p} missed)" if p > 0 else f" ({p} penalty)")
            lines.append(f"  [{v.dimension}]{cost} {inert(v.asked)}")
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
        lines.append(f"  [{v.dimension}] {inert(v.asked)}")
        lines.append(f"      cause: {inert(v.error)}")
    return "\n".join(lines)


@dataclass(frozen=True)
class AssertionRequest:
    """One assertion, resolved once from the call's arguments and its scope: the test's marker, its
    ``bineval_task`` fixture and the session's options (in that order of precedence), and carried as it is to the
    engine and into the record (it is the record's :class:`~pytest_bineval.report.record.RecordRequest`)."""

    output: str | Conversation  # a text, or a conversation checked (pytest_bineval.conversation)
    source: Source | None  # a text or documents, checked (pytest_bineval.sources)
    scope: Scope  # the running test's context, or the outside scope
    location: Location | None  # the user's call
    prompt: str | None  # the generator prompt file the test's marker names
    gate: Gate  # what each threshold is compared with
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
        """Check the input (the one check of it) and resolve every argument; UsageError or NoTaskError on a bad
        one. Nothing is made before the input is checked (no engine, no request)."""
        from .judge import check_output
        from .scope import current_scope
        from .sources import read_source

        output = check_output(output, None)
        src = read_source(source)  # checked once: a text, or documents rendered as the judge reads them
        scope = current_scope(model)
        marker = scope.marker
        request = parse_dimensions(dimension)
        strategy = _choice("criteria", criteria, marker.criteria, STRATEGIES, "bineval")
        score_kind: ScoreKind = "points" if _choice(
            "score", score, marker.score, SCORE_KINDS, "share") == "points" else "share"
        if score_kind == "points" and scope.gate == "lower-bound":
            raise UsageError("--bineval-gate lower-bound compares the lower end of a share's 95% interval with the "
                             "threshold; score='points' has no such interval: run these tests with the mean gate")
        question: str | None = None
        if checklist is None and strategy != "bineval":
            if src is None:
                raise UsageError(f"criteria={strategy!r} writes criteria for the question the output answers: pass "
                                 "the question (with its context) as source=")
            question = src.text
        if checklist is None:
            task = _task(task, scope, required=strategy == "bineval")
        return cls(output=output, source=src, scope=scope, location=_caller_location(scope.rootpath),
                   prompt=marker.prompt, gate=scope.gate, checklist=checklist, task=task,
                   checklist_dimensions=marker.dimensions or dimension,
                   names=list(request.names) if request is not None else None, threshold=threshold,
                   layers=(threshold, marker.threshold, scope.threshold), strategy=strategy, question=question,
                   score_kind=score_kind, model=model)

    def thresholds(self, names: list[str]) -> dict[str, float]:
        check_threshold_keys(names, self.threshold)
        return thresholds_for(names, *self.layers)


def checklist_of_test(scope: Scope) -> Checklist:
    """The ``bineval_checklist`` fixture: the test's checklist, from its marker or ``bineval_task``."""
    if scope.marker.criteria not in (None, "bineval"):
        raise UsageError(
            f"{scope.name}: bineval_checklist is the task's checklist; with criteria={scope.marker.criteria!r} the "
            "criteria depend on the question: use bineval.checklist(task, strategy=..., question=...) instead")
    task = _task(None, scope)
    if not task:
        raise NoTaskError(NO_TASK_MESSAGE)  # an error of the test that is counted as not scored
    achecklist = scope.achecklist
    try:
        checklist, _ = scope.engine.run(achecklist(task, scope.marker.dimensions, strategy="bineval", question=None))
    except Exception as exc:
        raise exc.with_traceback(_from_coroutine(exc.__traceback__, achecklist))  # noqa: B904 (the same error)
    return checklist


def _from_coroutine(tb: TracebackType | None, coroutine: Callable[..., Any]) -> TracebackType | None:
    """``tb`` from the first frame of ``coroutine`` on: without the frames that ran it from sync code
    (``run_sync``, ``asyncio.run``, the event loop, the thread of a running loop), which the user would read
    before the error (about 50 lines of ``asyncio/runners.py`` and ``base_events.py`` under ``--tb=long``).
    Raised again with it, the error's traceback is the user's call, then the assertion's (hidden) frames, then
    whatever raised it: an error from deeper in the engine keeps every frame that says where. Unchanged when the
    coroutine never ran."""
    code = getattr(coroutine, "__code__", None) or getattr(getattr(coroutine, "__func__", None), "__code__", None)
    first = tb
    while first is not None and first.tb_frame.f_code is not code:
        first = first.tb_next
    return first if first is not None else tb


async def _aassert(req: AssertionRequest) -> Evaluation:
    """Get the checklist, judge the output, record it and conclude: raise or return; then the scope is released
    (outside pytest, the engine made for this call is closed)."""
    __tracebackhide__ = True
    try:
        batch = req.scope.engine.batch
        if batch is not None and batch.collecting:  # a first pass of --bineval-batch: nothing raised
            from .batch.collect import collected

            return await collected(req, _ajudge)
        return await _ajudge(req)
    finally:
        req.scope.release()


async def _ajudge(req: AssertionRequest) -> Evaluation:
    __tracebackhide__ = True
    scope = req.scope
    checklist: Checklist
    status: ChecklistStatus = "explicit"
    if req.checklist is not None:
        checklist = req.checklist
    else:
        checklist, status = await scope.achecklist(req.task, req.checklist_dimensions, strategy=req.strategy,
                                                   question=req.question)
    names = req.names if req.names is not None else list(checklist.dimensions)
    selected = checklist.select(names)
    thresholds = req.thresholds(names)
    scope.note_checked(names)
    if req.source is None:
        _warn_missing_source(req, selected)
    evaluation = await scope.engine.aevaluate(req.output, selected, req.source, model=req.model)
    record = scope.record(req, evaluation, selected, status, thresholds)
    if record.outcome == "error":
        raise BinevalJudgeError(judge_error_message(record), record.errors())
    if record.outcome == "failed":
        raise BinevalAssertionError(failure_message(record), evaluation)
    return evaluation


def _warn_missing_source(req: AssertionRequest, checklist: Checklist) -> None:
    """A :class:`~pytest_bineval.errors.MissingSourceWarning` at the user's call when questions of ``checklist``
    are about the input and no ``source=`` was given: once per test and checklist (an assertion in a loop
    warns once). A warning, not an error: a question may name "the input" and still be answerable from the
    output alone, and a pinned checklist should not stop a test that passed before."""
    import warnings

    from .errors import MissingSourceWarning
    from .judge import missing_source_message, questions_need_source

    if not questions_need_source(checklist.questions):
        return
    if not req.scope.first_warning((checklist.task, tuple(q.id for q in checklist.questions))):
        return
    message = missing_source_message(req.scope.name, checklist.questions)
    if req.location is not None:
        warnings.warn_explicit(MissingSourceWarning(message), MissingSourceWarning, req.location.file,
                               req.location.line)
    else:
        warnings.warn(MissingSourceWarning(message), stacklevel=2)


def _task(task: str | None, scope: Scope, *, required: bool = True) -> str | None:
    """The task: explicit > marker > ``bineval_task`` fixture (tested precedence); None only when not
    ``required`` (question-specific criteria default to answering the question)."""
    if task is None:
        task = scope.marker.task
    if task is None:
        task = scope.bineval_task()
    if task is None and required:
        raise NoTaskError(NO_TASK_MESSAGE)
    return task


def _choice(name: str, value: str | None, marker_value: str | None, allowed: tuple[str, ...], default: str) -> str:
    """An argument > the marker's kwarg > the default; a value not in ``allowed`` is a UsageError."""
    chosen = value if value is not None else marker_value if marker_value is not None else default
    if chosen not in allowed:
        raise UsageError(f"{name}={chosen!r}: use one of {', '.join(allowed)}")
    return chosen


def _caller_location(root: Path) -> Location | None:
    """File (relative to ``root``: the rootdir, or the current directory outside pytest) and line of the user's
    call."""
    from .report.record import Location

    frame = sys._getframe(1)
    package = str(Path(__file__).parent)
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return None
    path = Path(frame.f_code.co_filename)
    try:
        name = path.resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError):
        name = os.fspath(path)
    return Location(file=name, line=frame.f_lineno)


def assert_passes(
    output: OutputArg,
    dimension: DimensionsArg = None,
    *,
    source: SourceArg = None,
    task: str | None = None,
    threshold: Threshold | None = None,
    checklist: Checklist | None = None,
    model: str | None = None,
    criteria: str | None = None,
    score: str | None = None,
) -> Evaluation:
    """Evaluate ``output`` and raise :class:`BinevalAssertionError` unless every requested dimension's
    score reaches its threshold. Judge failures raise :class:`BinevalJudgeError` (never a pass).

    ``output``: a text, or a conversation (a list of chat messages in the OpenAI format, or a
    :class:`~pytest_bineval.Conversation`): questions of scope ``each_turn`` are asked of each assistant turn, and
    a failure names the turn ("turn 3 (assistant): ...").

    ``dimension``: a name, a list, or None for all of the checklist's dimensions. ``threshold``: a float
    for all requested dimensions or ``{"name": value}``. Returns the :class:`Evaluation`.

    ``source``: the input the output was made from: a text, or a list of documents (what a retrieval pipeline
    retrieved: strings, or mappings with ``"text"`` and optionally ``"id"`` and ``"title"``), which the judge reads
    numbered (:mod:`pytest_bineval.sources`).

    ``criteria``: ``"bineval"`` (default: the checklist of the task), or ``"qworld"`` / ``"qworld-lite"``:
    criteria with importance points written for the question the output answers, given as ``source``
    (pinned per question). ``score``: ``"share"`` of yes (default) or ``"points"``: points earned minus
    penalties over the positive points (:func:`~pytest_bineval.models.points_score`); thresholds apply to it.
    Both default to the marker's ``criteria=`` / ``score=``.
    """
    __tracebackhide__ = True
    from .engine import run_sync
    from .scope import OutsideScope

    request = AssertionRequest.build(output, dimension, source=source, task=task, threshold=threshold,
                                     checklist=checklist, model=model, criteria=criteria, score=score)
    # in a test, the run's engine loop: its HTTP clients serve every assertion
    run = run_sync if isinstance(request.scope, OutsideScope) else request.scope.engine.run
    try:
        return run(_aassert(request))
    except Exception as exc:
        raise exc.with_traceback(_from_coroutine(exc.__traceback__, _aassert))  # noqa: B904 (the same error)


async def assert_passes_async(
    output: OutputArg,
    dimension: DimensionsArg = None,
    *,
    source: SourceArg = None,
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
