"""The agent the ``aniki runs`` tests run and recover: asked to "charge", its model calls the
``charge`` tool (not idempotent); asked to "refund", it calls ``refund``, which waits for
approval; then it answers with what the tools said.

``charge`` appends one line to the file ``$RUNS_LOG`` names and, when ``$RUNS_CRASH`` is
``1``, kills its own process right after (a crash between the side effect and its record).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from aniki import Agent, ToolCall, tool
from aniki.providers.base import ModelRequest
from aniki.testing import MockProvider, MockReply

CHARGE = ToolCall("call_charge", "charge", '{"order_id": "42"}')
REFUND = ToolCall("call_refund", "refund", '{"order_id": "42"}')


def model(request: ModelRequest) -> MockReply:
    last = request.messages[-1]
    if last.role == "user":
        return MockReply(tool_calls=(REFUND if "refund" in last.content else CHARGE,))
    said = [m.content for m in request.messages if m.role == "tool"]
    return MockReply(content="Finished: " + " | ".join(said))


@tool
def charge(order_id: str) -> str:
    """Charge an order."""
    with Path(os.environ["RUNS_LOG"]).open("a") as handle:
        handle.write(f"charge {order_id}\n")
    if os.environ.get("RUNS_CRASH") == "1":
        os.kill(os.getpid(), signal.SIGKILL)
    return f"charged {order_id}"


@tool(requires_approval=True)
def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


agent = Agent("Billing", model="m", provider=MockProvider(handler=model), tools=[charge, refund])
not_an_agent = "Billing"
