"""Testing your own agent with MockProvider (docs/testing.md).

Run: pytest examples/test_my_agent.py
"""

from __future__ import annotations

import asyncio

from aniki import Agent, Runner, tool
from aniki.testing import MockProvider


@tool
def lookup_order(order_id: str) -> dict[str, str]:
    """Find an order.

    Args:
        order_id: The order's id.
    """
    return {"id": order_id, "status": "shipped"}


def support_agent(provider: MockProvider) -> Agent:
    return Agent(
        "Support",
        "Help customers with their orders.",
        model="gpt-4o-mini",
        provider=provider,
        tools=[lookup_order],
    )


def test_the_agent_looks_the_order_up_before_answering() -> None:
    provider = MockProvider()
    provider.enqueue_response(
        tool_calls=[{"name": "lookup_order", "arguments": {"order_id": "A7"}}]
    )
    provider.enqueue_response(content="Your order A7 has shipped.")

    result = asyncio.run(Runner().run(support_agent(provider), message="Where is order A7?"))

    assert result.content == "Your order A7 has shipped."
    tool_result = provider.requests[1].messages[-1]
    assert tool_result.role == "tool"
    assert '"status":"shipped"' in tool_result.content
    assert provider.requests[0].messages[0].content == "Help customers with their orders."
