"""Agents working with agents: one called by another as a tool, and handoffs over one session."""

from __future__ import annotations

import json

import pydantic

from aniki import (
    Agent,
    AgentUpdated,
    InMemorySession,
    Runner,
    TextDelta,
    ToolCall,
    Usage,
    tool,
)
from aniki.providers.base import ModelRequest
from aniki.testing import MockProvider, MockReply


def researcher(replies: list[str] | None = None) -> tuple[Agent, MockProvider]:
    provider = MockProvider(
        handler=lambda request: MockReply(
            content=f"fact #{sum(m.role == 'user' for m in request.messages)}",
            usage=Usage(input_tokens=7, output_tokens=2, requests=1),
        )
    )
    return Agent("Researcher", "Find facts.", model="r", provider=provider), provider


def writer_model(request: ModelRequest) -> MockReply:
    last = request.messages[-1]
    if last.role == "user":
        call = ToolCall("c1", "researcher", json.dumps({"request": "the height of Galdhøpiggen"}))
        return MockReply(tool_calls=(call,), usage=Usage(input_tokens=20, requests=1))
    return MockReply(content=f"Written from: {last.content}", usage=Usage(requests=1))


async def test_an_agent_as_a_tool_answers_with_its_reply_and_its_usage_adds_up() -> None:
    sub, sub_provider = researcher()
    writer = Agent(
        "Writer", model="w", provider=MockProvider(handler=writer_model), tools=[sub.as_tool()]
    )
    definition = writer.tools["researcher"].definition()
    assert definition.description == "Ask Researcher: Find facts."
    assert definition.parameters["required"] == ["request"]

    result = await Runner().run(writer, message="Write about the mountain")
    assert result.content == "Written from: fact #1"
    assert sub_provider.requests[0].messages[-1].content == "the height of Galdhøpiggen"
    assert result.usage.requests == 3  # two of the writer's calls, one of the researcher's
    assert result.usage.input_tokens == 27
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]


async def test_a_sub_agent_has_a_fresh_session_per_call_unless_given_one() -> None:
    sub, _ = researcher()
    fresh = sub.as_tool()
    kept_session = InMemorySession()
    kept = sub.as_tool(name="ask_researcher", session=kept_session)
    for target in (fresh, kept):
        for _ in range(2):
            await target.invoke(ToolCall("x", target.name, '{"request": "q"}'), _context())
    assert len(kept_session.get_messages()) == 4  # both calls, one conversation
    reply = await fresh.invoke(ToolCall("y", fresh.name, '{"request": "q"}'), _context())
    assert reply.content == "fact #1"  # a fresh session each time


async def test_a_sub_agent_with_an_output_schema_answers_in_json() -> None:
    class Height(pydantic.BaseModel):
        metres: int

    provider = MockProvider(handler=lambda request: '{"metres": 2469}')
    measurer = Agent("Measurer", model="m", provider=provider, output_schema=Height)
    reply = await measurer.as_tool().invoke(
        ToolCall("c", "measurer", '{"request": "how high?"}'), _context()
    )
    assert json.loads(reply.content) == {"metres": 2469}


async def test_a_streamed_run_streams_the_sub_agent_between_agent_updates() -> None:
    sub, _ = researcher()
    writer = Agent(
        "Writer", model="w", provider=MockProvider(handler=writer_model), tools=[sub.as_tool()]
    )
    events = [e async for e in Runner().stream(writer, message="Write")]
    speakers = [(e.agent, e.reason) for e in events if isinstance(e, AgentUpdated)]
    assert speakers == [("Researcher", "tool"), ("Writer", "return")]
    first, second = (events.index(e) for e in events if isinstance(e, AgentUpdated))
    between = "".join(e.text for e in events[first:second] if isinstance(e, TextDelta))
    assert between == "fact #1"


def billing_model(request: ModelRequest) -> MockReply:
    return MockReply(content=f"Billing here. I was told: {request.messages[0].content}")


def triage_model(request: ModelRequest) -> MockReply:
    return MockReply(tool_calls=(ToolCall("h1", "transfer_to_billing", "{}"),))


async def test_a_handoff_passes_the_conversation_to_the_other_agent() -> None:
    billing_provider = MockProvider(handler=billing_model)
    billing = Agent("Billing", "Handle invoices and refunds.", model="b", provider=billing_provider)
    triage_provider = MockProvider(handler=triage_model)
    triage = Agent(
        "Triage", "Route the user.", model="t", provider=triage_provider, handoffs=[billing]
    )
    session = InMemorySession()
    result = await Runner().run(triage, message="I was charged twice", session=session)

    offered = {t.name: t for t in triage_provider.requests[0].tools}
    assert "Handle invoices and refunds." in offered["transfer_to_billing"].description
    assert result.last_agent == "Billing"
    assert result.content == "Billing here. I was told: Handle invoices and refunds."
    assert [m.role for m in session.get_messages()] == ["user", "assistant", "tool", "assistant"]
    assert "Transferred to Billing" in session.get_messages()[2].content
    sent = billing_provider.requests[0].messages
    assert [m.role for m in sent] == ["system", "user", "assistant", "tool"]  # the same history
    assert session.get_messages()[-1].model == "b"


async def test_a_streamed_handoff_says_who_speaks() -> None:
    billing = Agent("Billing", model="b", provider=MockProvider(handler=billing_model))
    triage = Agent(
        "Triage", model="t", provider=MockProvider(handler=triage_model), handoffs=[billing]
    )
    events = [e async for e in Runner().stream(triage, message="charged twice")]
    assert [(e.agent, e.reason) for e in events if isinstance(e, AgentUpdated)] == [
        ("Billing", "handoff")
    ]


async def test_two_handoffs_in_one_turn_take_the_first() -> None:
    def both(request: ModelRequest) -> MockReply:
        return MockReply(
            tool_calls=(
                ToolCall("a", "transfer_to_billing", "{}"),
                ToolCall("b", "transfer_to_sales", "{}"),
            )
        )

    billing = Agent("Billing", model="b", provider=MockProvider(handler=billing_model))
    sales = Agent("Sales", model="s", provider=MockProvider(handler=billing_model))
    triage = Agent(
        "Triage", model="t", provider=MockProvider(handler=both), handoffs=[billing, sales]
    )
    result = await Runner().run(triage, message="hi")
    assert result.last_agent == "Billing"
    answers = [m.content for m in result.messages if m.role == "tool"]
    assert answers[0].startswith("Transferred to Billing")
    assert answers[1].startswith("Not transferred to Sales")


async def test_a_call_held_after_a_handoff_resumes_from_the_first_agent() -> None:
    @tool(requires_approval=True)
    def refund(invoice: str) -> str:
        """Refund an invoice."""
        return f"refunded {invoice}"

    def billing_wants_refund(request: ModelRequest) -> MockReply:
        if request.messages[-1].role == "tool" and request.messages[-1].tool_call_id == "r1":
            return MockReply(content=f"Done: {request.messages[-1].content}")
        return MockReply(tool_calls=(ToolCall("r1", "refund", '{"invoice": "INV-7"}'),))

    billing = Agent(
        "Billing", model="b", provider=MockProvider(handler=billing_wants_refund), tools=[refund]
    )
    triage = Agent(
        "Triage", model="t", provider=MockProvider(handler=triage_model), handoffs=[billing]
    )
    session = InMemorySession()
    stopped = await Runner().run(triage, message="refund INV-7", session=session)
    assert stopped.last_agent == "Billing" and stopped.pending_approvals[0].name == "refund"
    done = await Runner().resume(triage, approve=["r1"], session=session)
    assert done.content == "Done: refunded INV-7" and done.last_agent == "Billing"


def _context():  # type: ignore[no-untyped-def]
    from aniki import Context

    return Context()
