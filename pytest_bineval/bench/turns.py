"""The bineval method on dialogue, turn by turn (``bineval-turns``, Topical-Chat): each item's dialogue context and
reply judged as a conversation, with every question of the dataset's checklist asked of each assistant turn
(``"scope": "each_turn"``), beside the whole-response run (``bineval``: the reply as a text, the fact and the dialogue
as its source) on the same judge and the same checklist.

The dialogue's lines alternate between two speakers; the reply's speaker is the assistant, so the line before the
reply is the user's, the one before it the assistant's, and so on back to the first line. The knowledge fact is the
source. Every assistant turn is asked (that is what ``each_turn`` costs; the turns of a context's history are the
same for its six replies, so the reply cache answers them after the first reply); the people's ratings are of the
reply, so an item's score is the share of yes (and the mean P(yes)) of the reply's turn.
"""

from __future__ import annotations

from typing import Any

from ..conversation import Conversation
from ..errors import BinevalError
from ..models import Checklist
from .datasets import Item
from .methods import BinevalMethod, ItemResult


def dialogue_conversation(item: Item) -> Conversation:
    """The dialogue context and the reply as a conversation: the reply last, as the assistant's; the lines before it
    alternate user, assistant, ... backwards."""
    lines = [line for line in str(item.extra.get("dialogue", "")).splitlines() if line.strip()]
    roles = ["user" if (len(lines) - i) % 2 else "assistant" for i in range(len(lines))]
    messages: list[dict[str, Any]] = [{"role": r, "content": text} for r, text in zip(roles, lines, strict=True)]
    return Conversation([*messages, {"role": "assistant", "content": item.output}])


def per_turn(checklist: Checklist) -> Checklist:
    """``checklist`` with every question asked of each assistant turn."""
    return checklist.model_copy(update={"questions": [q.model_copy(update={"scope": "each_turn"})
                                                      for q in checklist.questions]})


class TurnsMethod(BinevalMethod):
    """The checklist of the ``bineval`` method (the same generation, served by the cache), asked turn by turn."""

    name = "bineval-turns"

    async def prepare(self) -> None:
        await super().prepare()
        assert self.checklist is not None
        self.checklist = per_turn(self.checklist)

    async def score(self, item: Item) -> ItemResult:
        assert self.checklist is not None, "prepare() first"
        conversation = dialogue_conversation(item)
        fact = str(item.extra.get("fact", "")).strip()
        try:
            ev = await self.engine.aevaluate(conversation, self.checklist, f"Fact: {fact}", model=self.model)
        except BinevalError as exc:
            return ItemResult(errors=[f"{type(exc).__name__}: {exc}"])
        reply = conversation.assistant_turns[-1]
        result = self._result(ev.model_copy(update={"verdicts": [v for v in ev.verdicts if v.turn == reply]}))
        result.scores = {"bineval-turns": result.scores["bineval"], "bineval-turns-pyes": result.scores["bineval-pyes"]}
        result.usage = ev.usage  # every turn's questions were asked
        return result
