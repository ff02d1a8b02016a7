"""A bookshop's support assistant: a chat over several turns, and an agent that looks orders up and cancels them
with tools. Its conversations are OpenAI-format message lists, which is what the tests judge.

The tools are fakes over a small in-memory order book (``ORDERS``). Which tool to call is decided by a rule (an
order number in the customer's message; "cancel" in it): the embedded 135M model cannot call tools. The replies are
written by the model, from the prompt in ``prompts/support.md`` and what the tools returned. With a model that calls
tools, the same message list would come from litellm's ``tools=`` loop; the tests would not change.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from pytest_bineval import DEFAULT_MODEL, ensure_provider

__all__ = ["ORDERS", "SUPPORT_PROMPT_PATH", "SupportChat", "cancel_order", "lookup_order"]

SUPPORT_PROMPT_PATH = Path(__file__).resolve().parent.parent / "prompts" / "support.md"
REPLY_MAX_TOKENS = 60  # a chat reply is a sentence or two; a runaway one is cut here
REPLY_SAMPLING = {"frequency_penalty": 0.6, "presence_penalty": 0.6}
ORDER_NUMBER = re.compile(r"\b[A-Z]-\d{4}\b")

ORDERS: dict[str, dict[str, Any]] = {
    "A-1043": {"order_id": "A-1043", "status": "shipped", "carrier": "DPD", "arrives": "Friday",
               "items": ["The Salt Road"]},
    "B-2210": {"order_id": "B-2210", "status": "processing", "items": ["Winter Light", "Atlas of Small Islands"]},
}


def lookup_order(order_id: str) -> dict[str, Any]:
    """The order's status (a fake of the shop's order system)."""
    return ORDERS.get(order_id, {"order_id": order_id, "error": "no such order"})


def cancel_order(order_id: str) -> dict[str, Any]:
    """Cancel an order that has not shipped yet."""
    order = lookup_order(order_id)
    if order.get("status") != "processing":
        return {"order_id": order_id, "cancelled": False, "reason": f"the order is {order.get('status', 'unknown')}"}
    return {"order_id": order_id, "cancelled": True, "refund": "to the card used, within 5 days"}


TOOLS = {"lookup_order": lookup_order, "cancel_order": cancel_order}


class SupportChat:
    """One customer's chat: :meth:`send` a customer message, get the assistant's reply; :attr:`messages` is the whole
    conversation (system prompt, customer, tool calls and results, replies) in the OpenAI format."""

    def __init__(self, *, model: str | None = None) -> None:
        self.model = model or os.environ.get("SUPPORT_MODEL") or DEFAULT_MODEL
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": _system_prompt()}]
        self._calls = 0

    def send(self, text: str) -> str:
        """The customer says ``text``: the agent's tool calls (if the message asks for one), then its reply."""
        self.messages.append({"role": "user", "content": text})
        for name, order_id in self._steps(text):
            self._call(name, {"order_id": order_id})
        reply = self._reply()
        self.messages.append({"role": "assistant", "content": reply})
        return reply

    def _steps(self, text: str) -> list[tuple[str, str]]:
        """The rule that stands in for the model's tool choice: look up every order named, cancel it when asked."""
        steps = []
        for order_id in dict.fromkeys(ORDER_NUMBER.findall(text)):
            steps.append(("lookup_order", order_id))
            if re.search(r"\bcancel", text, re.IGNORECASE):
                steps.append(("cancel_order", order_id))
        return steps

    def _call(self, name: str, arguments: dict[str, Any]) -> None:
        self._calls += 1
        call_id = f"call_{self._calls}"
        self.messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]})
        result = TOOLS[name](**arguments)
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)})

    def _reply(self) -> str:
        """The model's reply to the conversation so far. The small model reads the tools' results as notes in its
        prompt (a chat template without tool turns), and the last few messages only."""
        prompt: list[dict[str, str]] = [self.messages[0]]
        for message in self.messages[1:][-6:]:
            if message["role"] == "tool":
                found = json.loads(message["content"])
                facts = ", ".join(f"{k.replace('_', ' ')}: {', '.join(v) if isinstance(v, list) else v}"
                                  for k, v in found.items())
                prompt.append({"role": "system", "content": f"Order system: {facts}."})
            elif message.get("content"):
                prompt.append({"role": message["role"], "content": message["content"]})
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # offline: no price list download
        import litellm

        ensure_provider(self.model)
        response = litellm.completion(model=self.model, messages=prompt, temperature=0,
                                      max_tokens=REPLY_MAX_TOKENS, **REPLY_SAMPLING)
        return (response.choices[0].message.content or "").strip()


def _system_prompt() -> str:
    text = SUPPORT_PROMPT_PATH.read_text(encoding="utf-8")
    return text.split("## system", 1)[-1].strip()
