"""The HTML report's view of a conversation under test: its turns as a transcript, each turn with the verdicts that
failed there (a question of scope ``each_turn`` answered no about it, or a check that found what failed in it), and
the first step that went wrong marked. Every text here is the caller's or the judge's: the template escapes it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..models import Verdict
from ..report.record import EvaluationRecord


class _Cell(Protocol):
    """A verdict cell of the report's grid (:class:`~pytest_bineval.outputs.html.Cell`)."""

    @property
    def id(self) -> str: ...

    @property
    def verdict(self) -> Verdict: ...


@dataclass(frozen=True)
class CallView:
    name: str
    arguments: str
    id: str


@dataclass(frozen=True)
class TurnView:
    """One turn of the transcript."""

    turn: int
    role: str
    content: str
    calls: tuple[CallView, ...]
    answers: str  # the call a tool result answers ("" for other messages)
    failing: tuple[_Cell, ...]  # the cells of the verdicts answered no about this turn
    first: bool  # the first step that went wrong

    @property
    def css(self) -> str:
        flags = [f for f, on in (("failing", bool(self.failing)), ("first", self.first)) if on]
        return " ".join(["turn", self.role, *flags])


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else json.dumps(value, ensure_ascii=False)


def transcript(record: EvaluationRecord, cells: Sequence[_Cell]) -> tuple[TurnView, ...]:
    """The turns of ``record``'s conversation (none for a text output), with the failing cells of each."""
    turns = []
    for number, message in enumerate(record.conversation or [], 1):
        calls = tuple(CallView(name=_text(c.get("function", {}).get("name")),
                               arguments=_text(c.get("function", {}).get("arguments")), id=_text(c.get("id")))
                      for c in message.get("tool_calls") or [] if isinstance(c, dict))
        failing = tuple(c for c in cells if c.verdict.answer == "no" and c.verdict.step == number)
        turns.append(TurnView(turn=number, role=_text(message.get("role")), content=_text(message.get("content")),
                              calls=calls, answers=_text(message.get("tool_call_id")), failing=failing,
                              first=number == record.first_failing_turn))
    return tuple(turns)
