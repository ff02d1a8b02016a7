"""Conversations and agent runs as outputs under test: a list of chat messages in the OpenAI format, validated once.

A message is ``{"role": "system" | "user" | "assistant" | "tool", "content": ...}``; an assistant message may carry
``tool_calls`` (``[{"id": ..., "type": "function", "function": {"name": ..., "arguments": "<JSON>"}}]``) and a tool
message answers one of them by its ``tool_call_id``. :class:`Conversation` checks the shape and says what is wrong
(:class:`ConversationError`, naming the message): a message without a role, a role it does not know, arguments that
are not JSON, a tool result that answers no earlier call, a conversation without an assistant message. ``developer``
(OpenAI's newer name for the system role) is read as ``system``; content given as text parts is joined; keys the
format has besides these (``name``, ``refusal``, ...) are ignored.

Turns are the messages, numbered from 1 (the system message counts): "turn 3 (assistant)". A question of scope
``each_turn`` is asked once per assistant turn, about that turn, with the conversation up to and including it as
its context (:func:`asked_turns`, :meth:`Conversation.render`); a question about the whole conversation sees all of
it. What the judge reads is untrusted: every content, tool name, call id and argument is written inside its turn's
markers with any marker tag neutralised (:func:`~pytest_bineval.prompting.delimit`), so a message cannot close its
turn, forge another, or close the response.

This module is light (no pydantic, no litellm): the assertion path imports it when a test module is collected.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from .errors import ArgumentTypeError, ConversationError
from .prompting import MARKER_NAMES, _tag_pattern, delimit

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool")
Scope = Literal["conversation", "each_turn"]
SCOPES: tuple[Scope, ...] = ("conversation", "each_turn")

# The tags a message's text must not hold: the judge prompt's markers and the transcript's own.
TURN_TAGS = _tag_pattern((*MARKER_NAMES, "turn"))


def turn_label(turn: int, role: str = "assistant") -> str:
    """``turn 3 (assistant)``: how every output names a turn."""
    return f"turn {turn} ({role})"


@dataclass(frozen=True)
class ToolCall:
    """One call of a tool by the assistant: its name, its arguments (the parsed JSON value) and its id."""

    name: str
    arguments: Any
    id: str | None = None

    @property
    def arguments_json(self) -> str:
        """The arguments as compact JSON (one line: a newline inside a string is escaped)."""
        return json.dumps(self.arguments, ensure_ascii=False, sort_keys=True)

    def to_openai(self, text: Callable[[str], str] = str) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "function",
                               "function": {"name": text(self.name), "arguments": text(self.arguments_json)}}
        if self.id is not None:
            out = {"id": text(self.id), **out}
        return out


@dataclass(frozen=True)
class Message:
    """One validated message: its turn (1-based position), role, text, tool calls, and the call a tool result
    answers."""

    turn: int
    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None

    @property
    def label(self) -> str:
        return turn_label(self.turn, self.role)

    def to_openai(self, text: Callable[[str], str] = str) -> dict[str, Any]:
        """The message in the OpenAI format (``text``: applied to every string that came from the caller)."""
        out: dict[str, Any] = {"role": self.role, "content": text(self.content)}
        if self.tool_calls:
            out["tool_calls"] = [c.to_openai(text) for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = text(self.tool_call_id)
        return out


def _where(index: int) -> str:
    return f"message {index + 1} of the conversation (index {index})"


def _mapping(raw: object) -> Mapping[str, Any] | None:
    """A dict, or an SDK object with ``model_dump()`` (litellm's, openai's) as one; None for anything else."""
    if isinstance(raw, Mapping):
        return raw
    dump = getattr(raw, "model_dump", None)
    value = dump() if callable(dump) else None
    return value if isinstance(value, Mapping) else None


def _plain(raw: object, index: int) -> Mapping[str, Any]:
    """A message as a mapping (see :func:`_mapping`)."""
    found = _mapping(raw)
    if found is not None:
        return found
    raise ConversationError(f"{_where(index)} is a {type(raw).__name__}, not a message: each message is a mapping "
                            '{"role": "system" | "user" | "assistant" | "tool", "content": "..."}')


def _content(value: object, where: str) -> str:
    """A message's text: a string, None (no text), or a list of text parts (joined by newlines)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for i, part in enumerate(value, 1):
            if isinstance(part, str):
                parts.append(part)
                continue
            kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
            text = part.get("text") if isinstance(part, Mapping) else None
            if kind != "text" or not isinstance(text, str):
                raise ConversationError(f"{where}: content part {i} is {kind!r}; only text parts "
                                        '({"type": "text", "text": "..."}) can be judged')
            parts.append(text)
        return "\n".join(parts)
    raise ConversationError(f"{where}: content must be a string, a list of text parts or null, not "
                            f"{type(value).__name__}")


def _arguments(value: object, where: str) -> Any:
    """A call's arguments: a JSON string (parsed), or a JSON value already parsed (a dict from some SDKs)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            shown = value if len(value) <= 60 else value[:59] + "…"
            raise ConversationError(f"{where}: its arguments are not JSON ({exc.msg} at line {exc.lineno}, column "
                                    f"{exc.colno}): {shown!r}; a call without arguments has \"{{}}\"") from None
    if isinstance(value, (dict, list)):
        try:
            json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise ConversationError(f"{where}: its arguments are not JSON: {exc}") from None
        return value
    raise ConversationError(f"{where}: its arguments must be a JSON string (\"{{...}}\"), not "
                            f"{type(value).__name__}")


def _tool_calls(value: object, where: str, role: str) -> tuple[ToolCall, ...]:
    if value is None or value == []:
        return ()
    if role != "assistant":
        raise ConversationError(f"{where}: only an assistant message calls tools (this one is {role!r})")
    if not isinstance(value, list):
        raise ConversationError(f"{where}: tool_calls must be a list, not {type(value).__name__}")
    calls = []
    for i, raw in enumerate(value, 1):
        at = f"{where}, tool call {i}"
        call = _mapping(raw)
        if call is None:
            raise ConversationError(f"{at} is a {type(raw).__name__}, not "
                                    '{"id": "...", "type": "function", "function": {"name": "...", "arguments": "{}"}}')
        kind = call.get("type", "function")
        if kind != "function":
            raise ConversationError(f"{at}: type {kind!r}; only function calls can be checked")
        function = call.get("function")
        if not isinstance(function, Mapping):
            raise ConversationError(f"{at} has no \"function\" with a name and arguments")
        name = function.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ConversationError(f"{at}: function.name must be a non-empty string, not {name!r}")
        call_id = call.get("id")
        if call_id is not None and not isinstance(call_id, str):
            raise ConversationError(f"{at} ({name}): id must be a string, not {type(call_id).__name__}")
        if "arguments" not in function:
            raise ConversationError(f"{at} ({name}) has no function.arguments (a call without arguments has \"{{}}\")")
        calls.append(ToolCall(name=name, arguments=_arguments(function["arguments"], f"{at} ({name})"), id=call_id))
    return tuple(calls)


def _message(index: int, raw: object, calls: dict[str, ToolCall]) -> Message:
    where = _where(index)
    data = _plain(raw, index)
    if "role" not in data:
        raise ConversationError(f"{where} has no \"role\": each message says who wrote it, one of "
                                f"{', '.join(ROLES)}")
    role = data["role"]
    if role == "developer":  # OpenAI's newer name for the system role
        role = "system"
    if role not in ROLES:
        raise ConversationError(f"{where}: unknown role {role!r}; a message's role is one of {', '.join(ROLES)}")
    role = cast(Role, role)
    content = _content(data.get("content"), where)
    found = _tool_calls(data.get("tool_calls"), where, role)
    answered: str | None = None
    if role == "tool":
        answered = data.get("tool_call_id")
        if not isinstance(answered, str) or not answered:
            raise ConversationError(f"{where}: a tool result says which call it answers (\"tool_call_id\"); this one "
                                    "does not")
        if answered not in calls:
            known = ", ".join(map(repr, calls)) or "none"
            raise ConversationError(f"{where}: the tool result answers call {answered!r}, which no earlier assistant "
                                    f"message made (calls made before it: {known})")
    for call in found:
        if call.id is not None:
            if call.id in calls:
                raise ConversationError(f"{where}: tool call id {call.id!r} was used by an earlier call too: a tool "
                                        "result could not say which one it answers")
            calls[call.id] = call
    return Message(turn=index + 1, role=role, content=content, tool_calls=found, tool_call_id=answered)


class Conversation:
    """A conversation (or an agent's run) under test: validated chat messages in the OpenAI format.

    ``Conversation(messages)`` checks ``messages`` (a list of mappings, or SDK message objects) and raises
    :class:`ConversationError` naming the message that is wrong. ``assert_passes`` and ``evaluate`` take the list
    itself too."""

    __slots__ = ("messages",)

    messages: tuple[Message, ...]

    def __init__(self, messages: Iterable[object] | Conversation) -> None:
        if isinstance(messages, Conversation):
            self.messages = messages.messages
            return
        if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
            raise ArgumentTypeError(f"a conversation is a list of chat messages, not {type(messages).__name__}")
        calls: dict[str, ToolCall] = {}
        self.messages = tuple(_message(i, raw, calls) for i, raw in enumerate(messages))
        if not self.messages:
            raise ConversationError("the conversation has no message")
        if not any(m.role == "assistant" for m in self.messages):
            raise ConversationError("the conversation has no assistant message: the assistant's turns are the "
                                    "output under test")

    @classmethod
    def _of(cls, messages: tuple[Message, ...]) -> Conversation:
        """A conversation of messages already validated (a part of one)."""
        out = cls.__new__(cls)
        out.messages = messages
        return out

    def __len__(self) -> int:
        return len(self.messages)

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Conversation) and other.messages == self.messages

    def __hash__(self) -> int:
        return hash(self.messages)

    def __repr__(self) -> str:
        return f"Conversation({len(self.messages)} messages, assistant turns {list(self.assistant_turns)})"

    # -- views -------------------------------------------------------------------------------------------------
    @property
    def assistant_turns(self) -> tuple[int, ...]:
        """The turns of the assistant (1-based message positions)."""
        return tuple(m.turn for m in self.messages if m.role == "assistant")

    def message(self, turn: int) -> Message:
        if not 1 <= turn <= len(self.messages):
            raise IndexError(f"turn {turn}: the conversation has turns 1 to {len(self.messages)}")
        return self.messages[turn - 1]

    def upto(self, turn: int) -> Conversation:
        """The conversation up to and including ``turn``."""
        self.message(turn)
        return Conversation._of(self.messages[:turn])

    def only(self, turn: int) -> Conversation:
        """``turn`` alone (an assistant turn: what a check asked of that turn reads)."""
        return Conversation._of((self.message(turn),))

    def final_reply(self) -> str:
        """The text of the last assistant message (what a text check of the whole conversation reads)."""
        return next((m.content for m in reversed(self.messages) if m.role == "assistant"), "")

    def calls(self) -> list[tuple[int, ToolCall]]:
        """Every tool call, in order, with its turn."""
        return [(m.turn, c) for m in self.messages for c in m.tool_calls]

    def call_names(self) -> dict[str, str]:
        """Call id -> tool name."""
        return {c.id: c.name for _, c in self.calls() if c.id is not None}

    def to_openai(self, text: Callable[[str], str] = str) -> list[dict[str, Any]]:
        """The messages in the OpenAI format, normalised (arguments as compact JSON)."""
        return [m.to_openai(text) for m in self.messages]

    def digest(self) -> str:
        """A short digest of the messages (did the conversation change between two runs?)."""
        body = json.dumps(self.to_openai(), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    def transcript(self) -> str:
        """The conversation as plain text for a reader (a report's output): one ``turn N (role):`` block a message."""
        names = self.call_names()
        blocks = []
        for m in self.messages:
            head = m.label if m.tool_call_id is None else (
                f"turn {m.turn} (tool, answers {m.tool_call_id}: {names.get(m.tool_call_id, '?')})")
            lines = [m.content] if m.content or not m.tool_calls else []
            lines += [f"[calls {c.name} {c.arguments_json}" + (f", id {c.id}]" if c.id else "]") for c in m.tool_calls]
            blocks.append(f"{head}: " + "\n".join(lines))
        return "\n".join(blocks)

    def render(self, upto: int | None = None) -> str:
        """What the judge reads as the response: every turn (up to and including ``upto``) between its own markers,
        every text from the caller delimited (:data:`TURN_TAGS`). The rendering of turns 1..k is the start of the
        rendering of turns 1..k+1, so the questions of later turns share the earlier ones' prompt prefix."""
        names = self.call_names()
        out = []
        for m in self.messages[: upto if upto is not None else len(self.messages)]:
            lines = [f'<turn n="{m.turn}" role="{m.role}">']
            if m.tool_call_id is not None:
                lines.append(f"result of tool call {_quoted(m.tool_call_id)} "
                             f"({_quoted(names.get(m.tool_call_id, '?'))}):")
            if m.content or not m.tool_calls:
                lines.append(delimit(m.content, TURN_TAGS) if m.content else "(no text)")
            for c in m.tool_calls:
                called = f"tool call {_quoted(c.name)}" + (f" (id {_quoted(c.id)})" if c.id is not None else "")
                lines.append(f"{called}, arguments: {delimit(c.arguments_json, TURN_TAGS)}")
            lines.append("</turn>")
            out.append("\n".join(lines))
        return "\n".join(out)


#: What ``assert_passes`` and ``evaluate`` take as the output under test.
OutputArg = str | Conversation | Sequence[Mapping[str, Any]]


def _quoted(text: str) -> str:
    """A name or id from the caller as a JSON string (quotes and newlines escaped), tags neutralised."""
    return delimit(json.dumps(text, ensure_ascii=False), TURN_TAGS)


def as_output(output: object) -> str | Conversation:
    """The output under test as the plugin judges it: a string as it is, a conversation validated once
    (:class:`ConversationError` naming the message that is wrong); anything else is an :class:`ArgumentTypeError`."""
    if isinstance(output, (str, Conversation)):
        return output
    if isinstance(output, (list, tuple)):
        return Conversation(output)
    raise ArgumentTypeError(f"the output under test must be a str or a conversation (a list of chat messages, or a "
                            f"Conversation), not {type(output).__name__}")


def as_conversation(output: str | Conversation) -> Conversation:
    """A text output as a conversation of one assistant message without tool calls (what a tool check reads)."""
    if isinstance(output, Conversation):
        return output
    return Conversation._of((Message(turn=1, role="assistant", content=output),))


def asked_turns(scope: str, output: str | Conversation) -> list[int | None]:
    """The turns a question of ``scope`` is asked of: every assistant turn of a conversation for ``each_turn``;
    None (the whole output) otherwise, and for a text output (one reply)."""
    if scope == "each_turn" and isinstance(output, Conversation):
        return list(output.assistant_turns)
    return [None]


def check_subject(output: str | Conversation, turn: int | None) -> str | Conversation:
    """What a check asked of ``turn`` (None: of the whole output) reads."""
    if isinstance(output, Conversation) and turn is not None:
        return output.only(turn)
    return output


def judged_text(output: str | Conversation, turn: int | None) -> str:
    """What the judge reads as the response: the text, or the conversation's transcript up to ``turn``."""
    if isinstance(output, Conversation):
        return output.render(turn)
    return output


def turn_question(text: str, turn: int | None) -> str:
    """The question as the judge reads it: asked of a turn, it says which one (``prompts/turn.md``)."""
    if turn is None:
        return text
    from .prompting import load_follow_up

    return f"{text}\n{load_follow_up('turn')['content'].replace('{{turn}}', str(turn))}"


def output_size(output: str | Conversation) -> str:
    """``output: 1234 characters`` (a conversation: its turns too), for an input-too-large error."""
    if isinstance(output, Conversation):
        return f"output: a conversation of {len(output)} turns, {len(output.render())} characters"
    return f"output: {len(output)} characters"
