"""``assert_passes``: evaluate an output and fail the test, with reasons, when it scores too low.

Inside a pytest run the plugin provides the current test's context (its service, marker, task
fixture, pinned checklists, report). Outside pytest, ``task=`` or ``checklist=`` must be given and
the default settings apply.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import BinevalAssertionError, BinevalJudgeError
from .models import Checklist, Evaluation

if TYPE_CHECKING:
    from .session import BinevalService

DEFAULT_THRESHOLDS: dict[str, float] = {
    "consistency": 0.8,
    "coherence": 0.7,
    "fluency": 0.7,
    "relevance": 0.7,
}
DEFAULT_THRESHOLD = 0.7  # for dimensions of your own

Threshold = float | Mapping[str, float]
DimensionArg = str | Mapping[str, str] | Sequence[str | Mapping[str, str]] | None

NO_TASK_MESSAGE = (
    "pytest-bineval needs the task the output was made for, to build its checklist. Give it in one of "
    "three ways:\n"
    "  1. assert_passes(output, task=\"Summarize the article ...\")  (or checklist=...)\n"
    "  2. @pytest.mark.bineval(task=\"Summarize the article ...\") on the test, class or module\n"
    "  3. a `bineval_task` fixture returning the task text (conftest.py, module or class)"
)


class NoTaskError(Exception):
    """Raised when no task can be found; the plugin turns it into a usage error of the test."""


@dataclass
class TestContext:
    """What assert_passes knows about the running test (set by the plugin around each test call)."""

    service: BinevalService
    nodeid: str
    marker: dict[str, Any] = field(default_factory=dict)
    fixture_task: Any = None  # () -> str | None, resolved only when needed
    pin_path: Any = None  # pathlib.Path of this test's pinned-checklist file
    prompt: str | None = None  # the generator prompt file the test names (rootdir-relative when inside it)
    records: list[dict[str, Any]] = field(default_factory=list)


_current: contextvars.ContextVar[TestContext | None] = contextvars.ContextVar("bineval_test", default=None)


def set_current(ctx: TestContext | None) -> contextvars.Token[TestContext | None]:
    return _current.set(ctx)


def reset_current(token: contextvars.Token[TestContext | None]) -> None:
    _current.reset(token)


def current() -> TestContext | None:
    return _current.get()


def split_dimensions(dimension: DimensionArg) -> tuple[list[str] | None, list[str | Mapping[str, str]] | None]:
    """(names to check, dimension spec for checklist generation) from the ``dimension`` argument."""
    if dimension is None:
        return None, None
    items: list[str | Mapping[str, str]] = (
        [dimension] if isinstance(dimension, (str, Mapping)) else list(dimension)
    )
    names: list[str] = []
    for item in items:
        if isinstance(item, str):
            names.append(item)
        elif isinstance(item, Mapping):
            names.extend(item)
        else:
            raise TypeError(f"dimension must be a name, a {{name: definition}} or a list of them, not {item!r}")
    return names, items


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
            value = DEFAULT_THRESHOLDS.get(name, DEFAULT_THRESHOLD)
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"threshold for {name!r} must be within [0, 1], not {value}")
        out[name] = value
    return out


def _fmt(score: float | None) -> str:
    return "n/a" if score is None else f"{score:.2f}"


def failure_message(evaluation: Evaluation, thresholds: dict[str, float]) -> str:
    """Every requested dimension's score vs threshold, then every failing question with its explanation."""
    lines = ["bineval: output scored below threshold"]
    scores = evaluation.scores
    for name, limit in thresholds.items():
        s = scores.get(name)
        mark = "FAIL" if s is None or s < limit else "ok"
        lines.append(f"  {name}: {_fmt(s)} (threshold {limit:.2f}) {mark}")
    failed = [v for v in evaluation.failed if v.dimension in thresholds]
    if failed:
        lines.append(f"failing questions ({len(failed)}):")
        for v in failed:
            lines.append(f"  [{v.dimension}] {v.question}")
            lines.append(f"      -> no: {v.explanation or '(no explanation)'}")
    return "\n".join(lines)


def judge_error_message(evaluation: Evaluation) -> str:
    lines = [f"bineval: the judge ({evaluation.model}) failed on {len(evaluation.errors)} question(s); "
             "this test cannot be scored:"]
    for v in evaluation.errors:
        lines.append(f"  [{v.dimension}] {v.question}")
        lines.append(f"      cause: {v.error}")
    return "\n".join(lines)


def _conclude(evaluation: Evaluation, thresholds: dict[str, float], ctx: TestContext | None,
              checklist: Checklist, pinned: str, output: str, source: str | None) -> Evaluation:
    __tracebackhide__ = True
    errors = [v for v in evaluation.errors if v.dimension in thresholds]
    scores = evaluation.scores
    passed = not errors and all(
        (s := scores.get(n)) is not None and s >= t for n, t in thresholds.items()
    )
    outcome = "error" if errors else ("passed" if passed else "failed")
    if ctx is not None:
        ctx.service.record(ctx, evaluation, thresholds, outcome, checklist, pinned, output, source)
    if errors:
        raise BinevalJudgeError(judge_error_message(evaluation), errors)
    if not passed:
        raise BinevalAssertionError(failure_message(evaluation, thresholds), evaluation)
    return evaluation


async def _aprepare(output: Any, dimension: DimensionArg, source: Any, task: str | None,
                    threshold: Threshold | None, checklist: Checklist | None, model: str | None,
                    ) -> tuple[Evaluation, dict[str, float], TestContext | None, Checklist, str, str, str | None]:
    from .judge import check_output

    check_output(output, source)
    ctx = current()
    names, spec = split_dimensions(dimension)
    marker = ctx.marker if ctx is not None else {}
    pinned = "explicit"
    if checklist is None:
        if task is None:
            task = marker.get("task")
        if task is None and ctx is not None and ctx.fixture_task is not None:
            task = ctx.fixture_task()
        if task is None:
            raise NoTaskError(NO_TASK_MESSAGE)
        gen_dims = marker.get("dimensions") or spec
        if ctx is not None:
            checklist, pinned = await ctx.service.achecklist_for(ctx, task, gen_dims)
        else:
            from . import agenerate_checklist

            checklist = await agenerate_checklist(task, gen_dims, model=model)
            pinned = "unpinned"
    if names is None:
        names = list(checklist.dimensions)
    selected = checklist.select(names)
    layers: list[Threshold | None] = [threshold, marker.get("threshold")]
    if ctx is not None:
        layers.append(ctx.service.options.threshold)
    thresholds = thresholds_for(names, *layers)
    if ctx is not None:
        evaluation = await ctx.service.engine.aevaluate(output, selected, source, model=model)
    else:
        from . import aevaluate

        evaluation = await aevaluate(output, selected, source, model=model)
    return evaluation, thresholds, ctx, selected, pinned, output, source


def assert_passes(
    output: str,
    dimension: DimensionArg = None,
    *,
    source: str | None = None,
    task: str | None = None,
    threshold: Threshold | None = None,
    checklist: Checklist | None = None,
    model: str | None = None,
) -> Evaluation:
    """Evaluate ``output`` and raise :class:`BinevalAssertionError` unless every requested dimension's
    score reaches its threshold. Judge failures raise :class:`BinevalJudgeError` (never a pass).

    ``dimension``: a name, a list, or None for all of the checklist's dimensions. ``threshold``: a float
    for all requested dimensions or ``{"name": value}``. Returns the :class:`Evaluation`.
    """
    __tracebackhide__ = True
    from .engine import run_sync

    prepared = run_sync(_aprepare(output, dimension, source, task, threshold, checklist, model))
    return _conclude(*prepared)


async def assert_passes_async(
    output: str,
    dimension: DimensionArg = None,
    *,
    source: str | None = None,
    task: str | None = None,
    threshold: Threshold | None = None,
    checklist: Checklist | None = None,
    model: str | None = None,
) -> Evaluation:
    """``await``-able twin of :func:`assert_passes` for async tests (no nested event loop)."""
    __tracebackhide__ = True
    prepared = await _aprepare(output, dimension, source, task, threshold, checklist, model)
    return _conclude(*prepared)
