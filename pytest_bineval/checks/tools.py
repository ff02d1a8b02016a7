"""Checks of an agent's tool calls, decided by code (no judge request): kinds of the catalogue that read a conversation.

- ``tool_called`` (``name``; optional ``arguments``: a subset the call's arguments must hold, objects matched key by
  key, anything else equal; optional ``turn``: the call is made in that turn),
- ``tool_not_called`` (``name``),
- ``tool_order`` (``names``: called in that order, other calls allowed between),
- ``tool_arguments_schema`` (``name``, ``schema``: every call's arguments match the JSON Schema; ``jsonschema``, of the
  extra ``checks``).

Each says what it found ("called 'lookup_order' in turn 3 with {...}"); one that fails at a call names that call's
turn (:attr:`ToolCheckResult.turn`), so the record knows the step that went wrong. A text output is a reply that calls
no tool.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field, model_validator

from ..conversation import Conversation, ToolCall
from ..errors import MissingExtraError
from .catalogue import EXTRA_HINT, CheckResult, Kind, Number, _Params


class ToolCheckResult(CheckResult):
    """A tool check's result, which compares and unpacks as ``(passed, explanation)``; ``turn``: the turn where it
    found what failed (None: nowhere in particular, e.g. a call that was never made)."""

    turn: int | None

    def __new__(cls, passed: bool, explanation: str, turn: int | None = None) -> ToolCheckResult:
        result = super().__new__(cls, passed, explanation)
        result.turn = turn
        return result


class ToolCalled(_Params):
    name: str = Field(min_length=1)
    arguments: dict[str, Any] | None = Field(default=None, description="a subset the call's arguments must hold")
    turn: Number | None = Field(default=None, ge=1, description="the turn the call must be made in")


class ToolName(_Params):
    name: str = Field(min_length=1)


class ToolOrder(_Params):
    names: list[str] = Field(min_length=2)


class ToolSchema(_Params):
    name: str = Field(min_length=1)
    json_schema: dict[str, Any] = Field(alias="schema")

    model_config = ToolName.model_config | {"populate_by_name": True}

    @model_validator(mode="after")
    def _valid_schema(self) -> ToolSchema:
        try:
            import jsonschema
        except ImportError:  # said when the check runs (Check.available keeps a generated one out)
            return self
        try:
            jsonschema.Draft202012Validator.check_schema(self.json_schema)
        except jsonschema.exceptions.SchemaError as exc:
            raise ValueError(f"not a JSON Schema: {exc.message}") from None
        return self


def _json(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 80 else text[:79] + "…"


def holds(actual: Any, expected: Any) -> bool:
    """Whether ``actual`` holds ``expected``: an object holds every key of the expected one (recursively), anything
    else is equal to it (``true`` is not ``1``)."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and holds(actual[k], v) for k, v in expected.items())
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(actual, bool) and isinstance(expected, bool) and actual == expected
    return bool(actual == expected)


def _called(calls: list[tuple[int, ToolCall]]) -> str:
    if not calls:
        return "no tool was called"
    return "the tools called: " + ", ".join(f"{c.name!r} (turn {t})" for t, c in calls)


def _tool_called(p: ToolCalled, convo: Conversation) -> CheckResult:
    calls = convo.calls()
    named = [(t, c) for t, c in calls if c.name == p.name]
    where = [(t, c) for t, c in named if p.turn is None or t == p.turn]
    fits = [(t, c) for t, c in where if p.arguments is None or holds(c.arguments, p.arguments)]
    if fits:
        t, c = fits[0]
        return ToolCheckResult(True, f"called {p.name!r} in turn {t} with {_json(c.arguments)}")
    if not named:
        return ToolCheckResult(False, f"no call of {p.name!r}; {_called(calls)}", p.turn)
    if not where:
        turns = ", ".join(str(t) for t, _ in named)
        return ToolCheckResult(False, f"no call of {p.name!r} in turn {p.turn}; it was called in turn {turns}", p.turn)
    t, c = where[0]
    return ToolCheckResult(False, f"{p.name!r} was called in turn {t} with {_json(c.arguments)}, which does not hold "
                              f"{_json(p.arguments)}", t)


def _tool_not_called(p: ToolName, convo: Conversation) -> CheckResult:
    calls = convo.calls()
    named = [(t, c) for t, c in calls if c.name == p.name]
    if named:
        t, c = named[0]
        more = f" ({len(named)} calls)" if len(named) > 1 else ""
        return ToolCheckResult(False, f"called {p.name!r} in turn {t} with {_json(c.arguments)}{more}", t)
    return ToolCheckResult(True, f"{p.name!r} not called; {_called(calls)}")


def _tool_order(p: ToolOrder, convo: Conversation) -> CheckResult:
    calls = convo.calls()
    at = 0  # the next call that may match
    found: list[tuple[str, int]] = []
    for k, name in enumerate(p.names):
        index = next((i for i in range(at, len(calls)) if calls[i][1].name == name), None)
        if index is None:
            earlier = [t for t, c in calls[:at] if c.name == name]
            if found and earlier:
                previous, turn = found[-1]
                return ToolCheckResult(False, f"{name!r} was called in turn {earlier[0]}, before {previous!r} (turn "
                                              f"{turn}), and not after it", earlier[0])
            # the step that went wrong: the first call of a tool that should have come after this one
            skipped = next(((t, c.name) for t, c in calls[at:] if c.name in p.names[k + 1:]), None)
            wanted = f" (wanted after {found[-1][0]!r}, turn {found[-1][1]})" if found else ""
            if skipped is not None:
                return ToolCheckResult(False, f"{name!r} was never called{wanted}; {skipped[1]!r} was, in turn "
                                              f"{skipped[0]}", skipped[0])
            return ToolCheckResult(False, f"{name!r} was never called{wanted}; {_called(calls)}")
        found.append((name, calls[index][0]))
        at = index + 1
    return ToolCheckResult(True, "called " + ", then ".join(f"{n!r} (turn {t})" for n, t in found))


def _tool_arguments_schema(p: ToolSchema, convo: Conversation) -> CheckResult:
    try:
        import jsonschema
    except ImportError:
        raise MissingExtraError(f"tool_arguments_schema checks need jsonschema: {EXTRA_HINT}") from None
    named = [(t, c) for t, c in convo.calls() if c.name == p.name]
    if not named:
        return ToolCheckResult(True, f"no call of {p.name!r}: no arguments to check")
    validator = jsonschema.Draft202012Validator(p.json_schema)
    for t, c in named:
        error = jsonschema.exceptions.best_match(validator.iter_errors(c.arguments))
        if error is not None:
            where = "/".join(map(str, error.absolute_path)) or "(root)"
            return ToolCheckResult(False, f"the call of {p.name!r} in turn {t} does not match the schema at {where}: "
                                      f"{error.message}", t)
    return ToolCheckResult(True, f"the arguments of {len(named)} call(s) of {p.name!r} match the schema")


def _called_question(p: ToolCalled) -> str:
    holding = f" with arguments holding {_json(p.arguments)}" if p.arguments is not None else ""
    turn = f" in turn {p.turn}" if p.turn is not None else ""
    return f"Does the assistant call the tool {p.name!r}{holding}{turn}?"


TOOL_KINDS: tuple[Kind, ...] = (
    Kind("tool_called", ToolCalled, _tool_called, _called_question, conversation=True),
    Kind("tool_not_called", ToolName, _tool_not_called,
         lambda p: f"Does the assistant avoid calling the tool {p.name!r}?", conversation=True),
    Kind("tool_order", ToolOrder, _tool_order,
         lambda p: f"Does the assistant call the tools {', '.join(map(repr, p.names))} in that order?",
         conversation=True),
    Kind("tool_arguments_schema", ToolSchema, _tool_arguments_schema,
         lambda p: f"Do the arguments of every call of the tool {p.name!r} match the given schema?", "jsonschema",
         conversation=True),
)
