"""The report file reader's checks (:meth:`ReportDocument.load <pytest_bineval.report.document.ReportDocument.load>`):
what tells a report from other JSON, and the errors that name the place of what is not a report (a wrong type, a
number that is not finite, a score outside [0, 1], an evaluation twice)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from ..errors import UsageError
from .record import EvaluationRecord

# The "kind" of a report file: what tells it from a pinned-checklist file or any other JSON.
REPORT_KIND: Literal["bineval-report"] = "bineval-report"
# The keys every report of a format has (what a report written before the "kind" marker is known by).
REPORT_KEYS = {1: ("evaluations",), 2: ("generator", "settings", "totals", "evaluations")}


def json_type(value: Any) -> str:
    """The JSON name of a decoded value's type (``an array``, ``a string``, ...)."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def located(prefix: str, loc: Sequence[Any]) -> str:
    """``evaluations[3].dimensions[0].score`` from a prefix and a pydantic error location."""
    out = prefix
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the document"


def validation_text(exc: ValidationError, prefix: str) -> str:
    """The first errors of a validation, each as ``place: message`` (``evaluations[0].outcome: Input should be
    'passed', 'failed' or 'error' (got 'maybe')``)."""
    errors = exc.errors(include_url=False)
    parts = []
    for e in errors[:3]:
        got = e.get("input")
        shown = "" if isinstance(got, (dict, list)) else f" (got {str(got)[:60]!r})"
        parts.append(f"{located(prefix, e['loc'])}: {e['msg']}{shown}")
    more = f"; and {len(errors) - 3} more" if len(errors) > 3 else ""
    return "; ".join(parts) + more


def items_of(data: dict[str, Any], key: str, place: str) -> list[Any]:
    """``data[key]``, which must be an array (absent or null: empty); UsageError naming the place otherwise."""
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise UsageError(f"not a valid bineval report: {located(place, [key])} is {json_type(value)}, "
                         "not an array")
    return value


M = TypeVar("M", bound=BaseModel)


def models_of(model: type[M], data: dict[str, Any], key: str, place: str) -> list[M]:
    """Each entry of the array ``data[key]`` validated as ``model``; UsageError naming the entry otherwise."""
    out = []
    for j, item in enumerate(items_of(data, key, place)):
        try:
            out.append(model.model_validate(item))
        except ValidationError as exc:
            raise UsageError(f"not a valid bineval report (format 1): "
                             f"{validation_text(exc, located(place, [key, j]))}") from None
    return out


def check_kind(data: dict[str, Any], fmt: int) -> None:
    """UsageError unless ``data`` is a report: it says so, or (written before the marker) has a report's keys."""
    kind = data.get("kind")
    if kind == REPORT_KIND:
        return
    if kind is not None:
        raise UsageError(f"not a bineval report: its \"kind\" is {str(kind)[:60]!r}, not {REPORT_KIND!r}")
    missing = [k for k in REPORT_KEYS[fmt] if k not in data]
    if missing:
        hint = " (it looks like a pinned-checklist file)" if "checklists" in data else ""
        raise UsageError(f"not a valid bineval report{hint}: it has no \"kind\": {REPORT_KIND!r} and lacks "
                         f"{', '.join(map(repr, missing))}, which every report of format {fmt} has")


def non_finite(data: Any) -> str | None:
    """``place is NaN`` (or ``Infinity``, ``-Infinity``: a number too large for a float reads so too) for the first
    number in ``data`` that is not finite, or None. Iterative: a deep document cannot exhaust the stack here."""
    todo: list[tuple[Any, str]] = [(data, "")]
    while todo:
        value, place = todo.pop()
        if isinstance(value, float) and not math.isfinite(value):
            number = "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
            return f"{place or 'the document'} is {number}"
        if isinstance(value, dict):
            todo.extend((v, located(place, [str(k)])) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            todo.extend((v, located(place, [i])) for i, v in reversed(list(enumerate(value))))
    return None


def check_scores(records: Sequence[EvaluationRecord]) -> None:
    """UsageError naming the first score, interval end or threshold outside [0, 1] (every one a share)."""
    for i, rec in enumerate(records):
        values: list[tuple[str, float | None]] = [(f"evaluations[{i}].overall", rec.overall)]
        for j, d in enumerate(rec.dimensions):
            values += [(f"evaluations[{i}].dimensions[{j}].{name}", getattr(d, name))
                       for name in ("score", "threshold", "low", "high")]
        for place, value in values:
            if value is not None and not 0.0 <= value <= 1.0:
                raise UsageError(f"not a valid bineval report: {place} is {value!r}, outside [0, 1] (scores, "
                                 "their intervals and thresholds are shares)")


def check_unique(records: Sequence[EvaluationRecord]) -> None:
    """UsageError when two entries are the same evaluation (test id and index): which one counts cannot be told."""
    seen: dict[tuple[str, int], int] = {}
    for i, rec in enumerate(records):
        first = seen.setdefault((rec.test, rec.index), i)
        if first != i:
            raise UsageError(f"not a valid bineval report: evaluations[{i}] repeats evaluations[{first}] (test "
                             f"{rec.test!r}, evaluation index {rec.index}); a report holds each evaluation once "
                             "(was it merged by hand?)")
