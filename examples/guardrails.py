"""Guardrails and tool middleware around a support agent (docs/guardrails.md, docs/tools.md):
an input check that stops a message holding a card number, an output check that replaces a
reply promising a refund, and tool middleware that logs every call and refuses large refunds.
Offline: a scripted model answers, and the conversation is kept in SQLite."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable

from aniki import (
    Agent,
    Context,
    Guardrail,
    GuardrailTripped,
    Message,
    ModelRequest,
    Runner,
    ToolCall,
    ToolError,
    tool,
)
from aniki.sessions import SQLiteSession
from aniki.testing import MockProvider, MockReply


@tool
def refund(order_id: str, amount_eur: float) -> str:
    """Refund part of an order.

    Args:
        order_id: The order to refund.
        amount_eur: How much to give back, in euros.
    """
    return f"refunded {amount_eur:.2f} EUR on order {order_id}"


def model(request: ModelRequest) -> MockReply:
    """A scripted model: refunds what it is asked to, then says so (too generously)."""
    last = request.messages[-1]
    if last.role == "user":
        amount = 500 if "500" in last.content else 20
        arguments = json.dumps({"order_id": "A-1009", "amount_eur": amount})
        return MockReply(tool_calls=(ToolCall(f"call_{amount}", "refund", arguments),))
    if last.content.startswith("Refused"):
        return MockReply(content="I cannot do that myself; a colleague will.")
    return MockReply(content="Done, and you will get a full refund on every order too!")


def no_card_numbers(ctx: Context, message: Message) -> str | None:
    digits = "".join(ch for ch in message.content if ch.isdigit())
    return "the message holds what looks like a card number" if len(digits) >= 13 else None


def no_blanket_promises(ctx: Context, output: str) -> str | None:
    return "the reply promises refunds on every order" if "every order" in output else None


Next = Callable[[ToolCall], Awaitable[Message]]


async def audited(ctx: Context, call: ToolCall, call_next: Next) -> Message:
    started = time.perf_counter()
    answer = await call_next(call)
    took = (time.perf_counter() - started) * 1000
    print(f"  [audit] {call.name}({call.arguments}) -> {answer.content!r} ({took:.1f} ms)")
    return answer


async def refund_limit(ctx: Context, call: ToolCall, call_next: Next) -> Message:
    if call.name == "refund" and json.loads(call.arguments)["amount_eur"] > 100:
        raise ToolError("Refused: refunds above 100 EUR need a person.")
    return await call_next(call)


async def main(path: str) -> None:
    agent = Agent(
        "Support",
        model="scripted",
        provider=MockProvider(handler=model),
        tools=[refund],
        tool_middleware=[refund_limit],
        input_guardrails=[no_card_numbers],
        output_guardrails=[
            Guardrail(no_blanket_promises, replacement="Your refund of this order is done.")
        ],
    )
    runner = Runner(tool_middleware=[audited])
    session = SQLiteSession("ticket-9", path)

    for question in (
        "Refund 20 EUR on A-1009",
        "Refund 500 EUR on A-1009",
        "Charge my card 4111 1111 1111 1111 instead",
    ):
        print(f"user: {question}")
        try:
            result = await runner.run(agent, message=question, session=session)
            print(f"agent: {result.content}")
        except GuardrailTripped as tripped:
            print(f"stopped by {tripped.stage} guardrail {tripped.guardrail}: {tripped.reason}")
    print("stored:", [m.role for m in session.get_messages()])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "guardrails.db"))
