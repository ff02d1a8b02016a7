"""A bookshop's support chat and its order agent (``bookshop/``), judged as conversations.

The output under test is the whole conversation, a list of chat messages in the OpenAI format: the customer's
messages, the assistant's tool calls and the tools' results, and the assistant's replies. Its checklist (pinned
under __bineval__/test_support/) has questions of two kinds: ``"scope": "each_turn"`` questions are asked once per
assistant turn, with the conversation up to that turn as context, and give one verdict per turn; the others are
about the whole conversation. Which tools the agent called, in what order and with what arguments, is decided by
code (the ``tool_*`` checks): no judge request, the same verdict on every machine. A failure names the first turn
that went wrong ("first step that went wrong: turn 4 (assistant)").
"""

from __future__ import annotations

from typing import Any

import pytest
from pytest_bineval import BinevalAssertionError, assert_passes

from bookshop import SupportChat

SUPPORT_TASK = ("Answer the customer's questions about their orders in a support chat, politely, looking each order "
                "up with the lookup_order tool before answering about it.")
CUSTOMER = ("Hi, where is my order A-1043?", "Can I still change the delivery address?", "Thanks, that is all!")
COURTESY = {"courtesy": "Each turn of the assistant is polite and on topic."}
ACCURACY = {"accuracy": "The assistant tells the customer what the order system says, and nothing it does not."}
TOOLS = {"tools": "The assistant calls the right tools, in the right order, with the right arguments."}


@pytest.fixture(scope="module")
def support_chat() -> list[dict[str, Any]]:
    """A 3-turn chat with the app (the embedded model writes the replies); its first answer looks the order up."""
    chat = SupportChat()
    for text in CUSTOMER:
        chat.send(text)
    return chat.messages


# THE THRESHOLDS ARE FOR THE TOY OFFLINE JUDGE (see pyproject.toml and README.md): it answers "no" to nearly every
# question about a conversation (P(yes) 0.2-0.45 for "Is the assistant's turn polite?" and for "... rude?" alike), so
# courtesy and accuracy are 0 (not enforced) offline; with a capable judge use ~0.8. The tool checks are decided by
# code: they hold at 1.0 with any judge.
@pytest.mark.bineval(task=SUPPORT_TASK, dimensions=[COURTESY, ACCURACY, TOOLS],
                     threshold={"courtesy": 0.0, "accuracy": 0.0, "tools": 1.0})
def test_support_chat(support_chat: list[dict[str, Any]]) -> None:
    evaluation = assert_passes(support_chat)
    # the per-turn questions were asked of every assistant turn: the tool call (turn 3) and the three replies
    asked = {v.turn for v in evaluation.verdicts if v.dimension == "courtesy"}
    assert asked == {3, 5, 7, 9}
    assert all(v.decided_by == "code" for v in evaluation.verdicts if v.dimension == "tools")


AGENT_TASK = "Cancel the order the customer names, after looking it up, and never refund an order by hand."


@pytest.mark.bineval(task=AGENT_TASK, dimensions=[TOOLS])
def test_agent_tool_calls_are_decided_by_code() -> None:
    agent = SupportChat()
    agent.send("Please cancel my order B-2210.")
    evaluation = assert_passes(agent.messages, threshold=1.0)
    assert evaluation.usage.llm_calls == 0  # the judge was never asked

    # an agent run that refunds by hand and never looks the order up: the checks find the step that went wrong
    wrong = [
        agent.messages[0],
        {"role": "user", "content": "Please cancel my order B-2210."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "cancel_order", "arguments": '{"order_id": "B-2210"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"cancelled": true}'},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_2", "type": "function", "function": {
            "name": "refund_order", "arguments": '{"order_id": "B-2210"}'}}]},
        {"role": "tool", "tool_call_id": "call_2", "content": '{"refunded": true}'},
        {"role": "assistant", "content": "Done: your order is cancelled and refunded."},
    ]
    with pytest.raises(BinevalAssertionError) as failure:
        assert_passes(wrong, threshold=1.0)
    message = str(failure.value)
    assert "first step that went wrong: turn 3 (assistant)" in message
    assert "-> no: 'lookup_order' was never called" in message
    assert "-> no: called 'refund_order' in turn 5" in message
