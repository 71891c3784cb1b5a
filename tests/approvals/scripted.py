"""The agent the approval tests run, in this process or a new one: its model asks to refund
order 42 and look the order up in one turn, then sums up what the tools said."""

from __future__ import annotations

import json
from pathlib import Path

from aniki import Agent, Message, ToolCall, tool
from aniki.providers.base import ModelRequest
from aniki.testing import MockProvider, MockReply

REFUND = ToolCall("call_refund", "refund", '{"order_id": "42"}')
LOOKUP = ToolCall("call_lookup", "lookup", '{"order_id": "42"}')


def model(request: ModelRequest) -> MockReply:
    last = request.messages[-1]
    if last.role == "user":
        return MockReply(tool_calls=(REFUND, LOOKUP))
    said = [m.content for m in request.messages if m.role == "tool"]
    return MockReply(content="Done: " + " | ".join(said))


def make_agent(log: Path) -> Agent:
    """The agent; each tool call is appended to ``log`` (one JSON line), across processes."""

    def note(name: str, order_id: str) -> None:
        with log.open("a") as handle:
            handle.write(json.dumps([name, order_id]) + "\n")

    @tool(requires_approval=True)
    def refund(order_id: str) -> str:
        """Refund an order."""
        note("refund", order_id)
        return f"refunded {order_id}"

    @tool
    def lookup(order_id: str) -> str:
        """Look an order up."""
        note("lookup", order_id)
        return f"order {order_id}: shipped"

    provider = MockProvider(handler=model)
    return Agent("Support", model="m", provider=provider, tools=[refund, lookup])


def calls(log: Path) -> list[list[str]]:
    """The tool calls made so far, in order."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def roles(messages: tuple[Message, ...]) -> list[str]:
    return [m.role for m in messages]
