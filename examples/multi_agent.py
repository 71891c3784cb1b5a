"""Agents working together: a triage agent hands a billing question to a billing agent, which
asks a policy agent (called as a tool) before it answers (docs/multi-agent.md)."""

from __future__ import annotations

import asyncio
import json
import sys

from aniki import Agent, AgentUpdated, Runner, TextDelta, ToolCall
from aniki.providers.base import ModelRequest
from aniki.sessions import SQLiteSession
from aniki.testing import MockProvider, MockReply


def policy_model(request: ModelRequest) -> str:
    return "Double charges are refunded in full within 5 days."


def billing_model(request: ModelRequest) -> MockReply:
    last = request.messages[-1]
    if last.role == "tool" and last.tool_call_id == "ask_1":
        return MockReply(content=f"Sorry about that. Our policy: {last.content}")
    question = json.dumps({"request": "What is the policy for a double charge?"})
    return MockReply(tool_calls=(ToolCall("ask_1", "policy", question),))


def triage_model(request: ModelRequest) -> MockReply:
    return MockReply(tool_calls=(ToolCall("t_1", "transfer_to_billing", "{}"),))


policy = Agent(
    "Policy",
    "Quote the refund policy.",
    model="scripted",
    provider=MockProvider(handler=policy_model),
)
billing = Agent(
    "Billing",
    "Handle invoices, charges and refunds.",
    model="scripted",
    provider=MockProvider(handler=billing_model),
    tools=[policy.as_tool()],
)
triage = Agent(
    "Triage",
    "Send the user to the right team.",
    model="scripted",
    provider=MockProvider(handler=triage_model),
    handoffs=[billing],
)


async def main(path: str) -> None:
    session = SQLiteSession("customer-3", path)
    stream = Runner().stream(triage, message="I was charged twice for my order", session=session)
    async for event in stream:
        if isinstance(event, AgentUpdated):
            print(f"\n[{event.agent} speaks: {event.reason}]")
        elif isinstance(event, TextDelta):
            print(event.text, end="")
    assert stream.result is not None
    print(f"\nanswered by: {stream.result.last_agent}")
    print("model calls:", stream.result.usage.requests)
    print("stored:", [m.role for m in session.get_messages()])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "multi_agent.db"))
