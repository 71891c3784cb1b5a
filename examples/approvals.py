"""A tool that needs a person's approval: the run stops before calling it, the held call is
kept in the session's store, and a later resume (here a new session object, as in another
process) approves it (docs/approvals.md)."""

from __future__ import annotations

import asyncio
import sys

from aniki import Agent, Runner, ToolCall, tool
from aniki.providers.base import ModelRequest
from aniki.sessions import SQLiteSession
from aniki.testing import MockProvider, MockReply


@tool(requires_approval=True)
def refund(order_id: str, amount_eur: float) -> str:
    """Refund part of an order.

    Args:
        order_id: The order to refund.
        amount_eur: How much to give back, in euros.
    """
    return f"refunded {amount_eur:.2f} EUR on order {order_id}"


def model(request: ModelRequest) -> MockReply:
    """A scripted model: asks for the refund, then reports what the tool said."""
    last = request.messages[-1]
    if last.role == "user":
        call = ToolCall("call_1", "refund", '{"order_id": "A-1009", "amount_eur": 25}')
        return MockReply(tool_calls=(call,))
    return MockReply(content=f"Done. The tool said: {last.content}")


async def main(path: str) -> None:
    agent = Agent("Support", model="scripted", provider=MockProvider(handler=model), tools=[refund])
    runner = Runner()

    result = await runner.run(
        agent, message="Please refund 25 EUR on A-1009", session=SQLiteSession("ticket-7", path)
    )
    for call in result.pending_approvals:
        print(f"awaiting approval: {call.name}({call.arguments}) [{call.id}]")

    # Later, perhaps in another process: a reviewer approves, and the run goes on.
    reopened = SQLiteSession("ticket-7", path)
    done = await runner.resume(
        agent, approve=[call.id for call in result.pending_approvals], session=reopened
    )
    print(done.content)
    print("stored:", [m.role for m in reopened.get_messages()])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "approvals.db"))
