"""Dimensions: the registry of built-in ones and the one parser of ``dimension`` / ``dimensions`` arguments.

A dimension is a name, a definition (what the checklist generator is told it means) and a default
threshold (the minimum share of *yes* answers). The built-ins follow the paper (SummEval's four);
users add their own as ``{"name": "definition"}``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .errors import ArgumentTypeError, UsageError


@dataclass(frozen=True)
class Dimension:
    name: str
    definition: str
    threshold: float


BUILTIN: dict[str, Dimension] = {
    d.name: d
    for d in (
        Dimension(
            "coherence",
            "The response is well structured and well organized: it builds from sentence to sentence "
            "into a coherent body of information, not a heap of related facts.",
            0.7,
        ),
        Dimension(
            "consistency",
            "The response is factually aligned with the input: it contains only statements entailed by "
            "the input, with no fabricated, contradicted or misattributed facts.",
            0.8,
        ),
        Dimension(
            "fluency",
            "The response is well written: grammatical, correctly spelled and punctuated, readable, "
            "without repetition or formatting problems.",
            0.7,
        ),
        Dimension(
            "relevance",
            "The response selects the important content of the input and answers what the task asks, "
            "without redundant or off-topic information.",
            0.7,
        ),
    )
}
BUILTIN_DIMENSIONS: dict[str, str] = {name: d.definition for name, d in BUILTIN.items()}
DEFAULT_THRESHOLD = 0.7  # for dimensions of your own

DimensionsArg = Sequence[str | Mapping[str, str]] | Mapping[str, str] | str | None
_NAME = re.compile(r"[A-Za-z][\w-]{0,40}")


def did_you_mean(name: str, names: Iterable[str]) -> str:
    """``; did you mean 'fluency'?`` when ``name`` is close to one of ``names`` (a typo), else empty."""
    close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.75)
    return f"; did you mean {close[0]!r}?" if close else ""


def default_threshold(name: str) -> float:
    d = BUILTIN.get(name)
    return d.threshold if d is not None else DEFAULT_THRESHOLD


@dataclass(frozen=True)
class DimensionRequest:
    """A parsed ``dimension(s)`` argument: the names asked for, in order, and the definitions of the ones
    given as ``{"name": "definition"}`` (built-in names carry none: the registry has them)."""

    names: tuple[str, ...]
    custom: tuple[tuple[str, str], ...] = ()

    def definitions(self) -> dict[str, str]:
        """name -> definition for every requested dimension; an unknown bare name is a UsageError."""
        custom = dict(self.custom)
        out: dict[str, str] = {}
        for name in self.names:
            if name in custom:
                out[name] = custom[name]
            elif name in BUILTIN:
                out[name] = BUILTIN[name].definition
            else:
                raise UsageError(
                    f"unknown dimension {name!r}{did_you_mean(name, [*BUILTIN, *custom])}: built-in ones are "
                    f'{sorted(BUILTIN)}; define your own as {{"name": "definition"}}'
                )
        return out


def parse_dimensions(arg: DimensionsArg) -> DimensionRequest | None:
    """``"consistency"``, ``["coherence", {"tone": "..."}]``, ``{"tone": "..."}`` or None (-> None)."""
    if arg is None:
        return None
    items: list[object] = [arg] if isinstance(arg, (str, Mapping)) else list(arg)
    names: list[str] = []
    custom: dict[str, str] = {}
    for item in items:
        if isinstance(item, str):
            names.append(item.strip())
        elif isinstance(item, Mapping):
            for name, definition in item.items():
                if not isinstance(name, str) or not _NAME.fullmatch(name):
                    raise UsageError(f"dimension names are identifiers (letters, digits, _ or -), not {name!r}")
                if not isinstance(definition, str) or not definition.strip():
                    raise UsageError(f"dimension {name!r} needs a non-empty definition")
                names.append(name)
                custom[name] = definition.strip()
        else:
            raise ArgumentTypeError(
                f"a dimension is a name or a {{name: definition}} mapping (or a list of them), not {item!r}"
            )
    if not names:
        raise UsageError("at least one dimension is needed")
    return DimensionRequest(tuple(dict.fromkeys(names)), tuple(custom.items()))


def resolve_dimensions(arg: DimensionsArg) -> dict[str, str]:
    """name -> definition of a ``dimensions`` argument; all built-ins when None."""
    request = parse_dimensions(arg)
    if request is None:
        return dict(BUILTIN_DIMENSIONS)
    return request.definitions()
