"""``@pytest.mark.bineval(...)``: reading and validating its keyword arguments."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .dimensions import DimensionsArg, did_you_mean, parse_dimensions
from .errors import BinevalError, UsageError
from .kinds import SCORE_KINDS, STRATEGIES, Threshold

MARKER_KWARGS = frozenset({"task", "dimensions", "threshold", "prompt", "criteria", "score"})
MARKER_HELP = (
    "bineval(task=None, dimensions=None, threshold=None, prompt=None, criteria=None, score=None): the task the "
    "test's output is made for, the checklist's dimensions (names or {name: definition}), thresholds (float or "
    "{dimension: float}), the generator prompt file that made the output (rootdir-relative; what "
    "--bineval-optimize edits), criteria ('bineval': one checklist per task; 'qworld' or 'qworld-lite': "
    "criteria with points written per question, the assertion's source=) and score ('share' of yes or "
    "'points'-weighted)"
)


@dataclass(frozen=True)
class MarkerArgs:
    """The merged kwargs of a test's ``bineval`` markers (test > class > module), validated."""

    task: str | None = None
    dimensions: DimensionsArg = None
    threshold: Threshold | None = None
    prompt: str | None = None  # rootdir-relative POSIX path when inside the rootdir, else absolute
    criteria: str | None = None  # bineval | qworld | qworld-lite
    score: str | None = None  # share | points


def read_marker(nodeid: str, marks: Iterable[Any], rootpath: Path) -> MarkerArgs:
    """Merge and validate ``marks`` (closest first, as ``item.iter_markers`` yields them)."""
    merged: dict[str, Any] = {}
    for mark in reversed(list(marks)):
        if mark.args:
            raise UsageError(
                f"{nodeid}: @pytest.mark.bineval takes keyword arguments only "
                f"({', '.join(sorted(MARKER_KWARGS))}), got positional {mark.args!r}"
            )
        unknown = set(mark.kwargs) - MARKER_KWARGS
        if unknown:
            hints = "".join(did_you_mean(name, MARKER_KWARGS).replace("; did", f"; {name!r}: did")
                            for name in sorted(unknown))
            raise UsageError(
                f"{nodeid}: unknown @pytest.mark.bineval argument(s) {sorted(unknown)}{hints}; "
                f"allowed: {sorted(MARKER_KWARGS)}"
            )
        merged.update(mark.kwargs)
    task = merged.get("task")
    if task is not None and (not isinstance(task, str) or not task.strip()):
        raise UsageError(f"{nodeid}: @pytest.mark.bineval(task=...) must be a non-empty string")
    threshold = merged.get("threshold")
    if threshold is not None:
        _check_threshold(nodeid, threshold)
    dimensions = merged.get("dimensions")
    if dimensions is not None:
        try:
            parse_dimensions(dimensions)
        except BinevalError as exc:
            raise UsageError(f"{nodeid}: @pytest.mark.bineval(dimensions=...): {exc}") from None
    for key, allowed in (("criteria", STRATEGIES), ("score", SCORE_KINDS)):
        value = merged.get(key)
        if value is not None and value not in allowed:
            raise UsageError(f"{nodeid}: @pytest.mark.bineval({key}={value!r}): use one of {', '.join(allowed)}")
    return MarkerArgs(task=task, dimensions=dimensions, threshold=threshold,
                      prompt=_prompt_name(nodeid, merged.get("prompt"), rootpath), criteria=merged.get("criteria"),
                      score=merged.get("score"))


def _check_threshold(nodeid: str, threshold: Any) -> None:
    values = threshold.values() if isinstance(threshold, Mapping) else [threshold]
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= float(v) <= 1.0:
            raise UsageError(
                f"{nodeid}: bineval threshold must be a number in [0, 1] or a {{dimension: number}} dict, "
                f"not {threshold!r}"
            )


def _prompt_name(nodeid: str, raw: Any, rootpath: Path) -> str | None:
    """The marker's generator prompt file, rootdir-relative (POSIX) when inside the rootdir; it must exist."""
    if raw is None:
        return None
    if not isinstance(raw, (str, os.PathLike)) or not str(raw).strip():
        raise UsageError(f"{nodeid}: @pytest.mark.bineval(prompt=...) must be a file path, not {raw!r}")
    path = Path(os.fspath(raw)).expanduser()
    if not path.is_absolute():
        path = rootpath / path
    if not path.is_file():
        raise UsageError(
            f"{nodeid}: @pytest.mark.bineval(prompt={os.fspath(raw)!r}): no such file {path} "
            f"(relative paths start at the rootdir, {rootpath})"
        )
    path = path.resolve()
    try:
        return path.relative_to(rootpath.resolve()).as_posix()
    except ValueError:
        return str(path)
