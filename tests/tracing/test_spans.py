"""The spans a run makes: their tree, their attributes, and the errors they record, the same
for ``run``, ``run_sync`` and ``stream``."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

import aniki.tracing
from aniki import (
    Agent,
    InMemorySession,
    MaxTurnsExceeded,
    ProviderError,
    Runner,
    RunTimeoutError,
    TextDelta,
    ToolError,
    tool,
)
from aniki.testing import MockProvider
from tests.core.helpers import MODES, drive

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from .spans import Spans

CACHED_USAGE = {"input_tokens": 120, "output_tokens": 9, "requests": 1, "cache_read_tokens": 96}


@tool
async def weather(city: str) -> str:
    """Look up the weather.

    Args:
        city: The city.
    """
    await asyncio.sleep(0.05)  # long enough for the two calls to overlap
    return f"sunny in {city}"


@tool
def broken(city: str) -> str:
    """A tool that fails.

    Args:
        city: The city.
    """
    raise ValueError(f"the weather service is down for {city}")


@tool
def refusing(city: str) -> str:
    """A tool that fails with a message for the model.

    Args:
        city: The city.
    """
    raise ToolError(f"ask again about {city} tomorrow")


def two_tool_turns(provider: MockProvider, *tools: str) -> None:
    """A reply asking for one call of each of ``tools`` at once, then a final answer."""
    provider.enqueue_response(
        tool_calls=[
            {"id": f"call_{number}", "name": name, "arguments": {"city": f"City{number}"}}
            for number, name in enumerate(tools, 1)
        ],
        usage=CACHED_USAGE,
    )
    provider.enqueue_response(
        "All sunny.", usage={"input_tokens": 180, "output_tokens": 4, "requests": 1}
    )


def agent_with(provider: MockProvider, *, session: InMemorySession | None = None) -> Agent:
    return Agent(
        "Forecaster",
        "Answer with the weather.",
        model="mock-model",
        provider=provider,
        tools=[weather, broken, refusing],
        session=session,
    )


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


@pytest.mark.parametrize("mode", MODES)
async def test_a_run_is_an_agent_span_over_its_model_calls_and_concurrent_tool_calls(
    mode: str, spans: Spans
) -> None:
    provider = MockProvider()
    two_tool_turns(provider, "weather", "weather")
    await drive(mode, Runner(), agent_with(provider), message="Weather in two cities?")

    agent = spans.one("invoke_agent ")
    assert agent.name == "invoke_agent Forecaster"
    assert agent.parent is None
    chats = spans.named("chat ")
    tools = spans.named("execute_tool ")
    assert [span.name for span in chats] == ["chat mock-model", "chat mock-model"]
    assert [span.name for span in tools] == ["execute_tool weather", "execute_tool weather"]
    assert len(spans.all()) == 5
    for child in (*chats, *tools):
        assert parent_of(child) == agent.context.span_id
        assert child.context.trace_id == agent.context.trace_id
    first, second = sorted(tools, key=lambda span: span.start_time or 0)
    assert (second.start_time or 0) < (first.end_time or 0), "the tool calls ran concurrently"
    assert {span.attributes["gen_ai.tool.call.id"] for span in tools} == {"call_1", "call_2"}
    # In time order: a model call, both tools, the second model call.
    assert (chats[0].end_time or 0) <= (first.start_time or 0)
    assert (second.end_time or 0) <= (chats[1].start_time or 0)


@pytest.mark.parametrize("mode", MODES)
async def test_attributes_name_the_agent_model_session_usage_and_context(
    mode: str, spans: Spans
) -> None:
    provider = MockProvider()
    two_tool_turns(provider, "weather")
    session = InMemorySession("weather-chat-7")
    result = await drive(
        mode, Runner(), agent_with(provider, session=session), message="Weather in Oslo?"
    )

    agent = spans.one("invoke_agent ").attributes
    assert agent["gen_ai.operation.name"] == "invoke_agent"
    assert agent["gen_ai.agent.name"] == "Forecaster"
    assert agent["gen_ai.conversation.id"] == "weather-chat-7"
    assert agent["gen_ai.request.model"] == "mock-model"
    assert agent["gen_ai.provider.name"] == "mock"
    assert agent["aniki.run.id"] == result.run_id
    assert agent["gen_ai.usage.input_tokens"] == 300
    assert agent["gen_ai.usage.output_tokens"] == 13
    assert agent["gen_ai.usage.cache_read.input_tokens"] == 96
    assert agent["aniki.usage.requests"] == 2

    first, second = (span.attributes for span in spans.named("chat "))
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.request.model"] == "mock-model"
    assert first["gen_ai.provider.name"] == "mock"
    assert first["gen_ai.conversation.id"] == "weather-chat-7"
    assert first["gen_ai.agent.name"] == "Forecaster"
    assert first["gen_ai.request.stream"] is (mode == "stream")
    assert first["gen_ai.usage.input_tokens"] == 120
    assert first["gen_ai.usage.output_tokens"] == 9
    assert first["gen_ai.usage.cache_read.input_tokens"] == 96
    assert first["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert second["gen_ai.response.finish_reasons"] == ("stop",)
    assert second["gen_ai.usage.cache_read.input_tokens"] == 0

    for attributes, report in zip((first, second), result.context_reports, strict=True):
        assert attributes["aniki.context.sent_messages"] == report.sent_messages
        assert attributes["aniki.context.stored_messages"] == report.stored_messages
        assert attributes["aniki.context.summarized_messages"] == report.summarized_messages
        assert attributes["aniki.context.omitted_messages"] == 0
        assert attributes["aniki.context.tokens"] == report.tokens.total
        assert attributes["aniki.context.tokens.tools"] == report.tokens.tools
        assert attributes["aniki.context.tokens.history"] == report.tokens.history
        assert attributes["aniki.context.tokens.instructions"] == report.tokens.instructions
        assert attributes["aniki.context.prefix_kept"] is report.prefix_kept
    assert (first["aniki.context.sent_messages"], second["aniki.context.sent_messages"]) == (1, 3)

    call = spans.one("execute_tool ").attributes
    assert call["gen_ai.operation.name"] == "execute_tool"
    assert call["gen_ai.tool.name"] == "weather"
    assert call["gen_ai.tool.call.id"] == "call_1"
    assert call["gen_ai.tool.type"] == "function"
    assert call["gen_ai.tool.description"] == "Look up the weather."


async def test_messages_a_window_leaves_out_are_counted(spans: Spans) -> None:
    from aniki import WindowedSession

    session = WindowedSession(InMemorySession(), max_messages=2)
    provider = MockProvider(["one", "two", "three"])
    agent = Agent("Windowed", model="mock-model", provider=provider, session=session)
    for number in range(3):
        await Runner().run(agent, message=f"message {number}")

    last = spans.named("chat ")[-1].attributes
    stored, sent = last["aniki.context.stored_messages"], last["aniki.context.sent_messages"]
    assert (stored, sent) == (5, 1)  # the window's cut moved to half its size
    assert last["aniki.context.omitted_messages"] == 4
    assert "aniki.context.shortened_messages" not in last


async def test_a_message_sent_shortened_is_counted(spans: Spans) -> None:
    from aniki import TokenBudgetSession

    session = TokenBudgetSession(InMemorySession(), 100)
    agent = Agent("Budget", model="mock-model", provider=MockProvider(["ok"]), session=session)
    await Runner().run(agent, message="word " * 2_000)

    last = spans.one("chat ").attributes
    assert last["aniki.context.shortened_messages"] == 1


@pytest.mark.parametrize("mode", MODES)
async def test_a_provider_error_is_recorded_on_the_model_call_and_the_run(
    mode: str, spans: Spans
) -> None:
    provider = MockProvider()
    provider.enqueue_response(error=ProviderError("the model is overloaded", status_code=529))
    with pytest.raises(ProviderError):
        await drive(mode, Runner(), agent_with(provider), message="Weather?")

    for span in (spans.one("chat "), spans.one("invoke_agent ")):
        assert span.status.status_code.name == "ERROR"
        assert span.attributes["error.type"] == "aniki.errors.ProviderError"
        (event,) = span.events
        assert event.name == "exception"
        # The server's text may quote the request: without content, only its status is told.
        assert "exception.message" not in event.attributes
        assert span.status.description == "aniki.errors.ProviderError: HTTP 529"


async def test_a_foreign_provider_exception_is_recorded_as_the_provider_error_it_became(
    spans: Spans,
) -> None:
    provider = MockProvider()
    provider.enqueue_response(error=ConnectionResetError("peer went away"))
    with pytest.raises(ProviderError):
        await Runner().run(agent_with(provider), message="Weather?")
    chat = spans.one("chat ")
    assert chat.attributes["error.type"] == "aniki.errors.ProviderError"
    (event,) = chat.events
    assert event.attributes["exception.stacktrace"].splitlines()[-1] == (
        "aniki.errors.ProviderError"
    )
    assert "\nConnectionResetError\n" in event.attributes["exception.stacktrace"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_that_raises_marks_its_span_and_the_run_goes_on(
    mode: str, spans: Spans
) -> None:
    provider = MockProvider()
    two_tool_turns(provider, "weather", "broken", "refusing")
    result = await drive(mode, Runner(), agent_with(provider), message="Weather?")
    assert result.content == "All sunny."

    by_name = {span.attributes["gen_ai.tool.name"]: span for span in spans.named("execute_tool")}
    assert by_name["weather"].status.status_code.name == "UNSET"
    failed = by_name["broken"]
    assert failed.status.status_code.name == "ERROR"
    assert failed.attributes["error.type"] == "ValueError"
    (event,) = failed.events
    assert event.attributes["exception.type"] == "ValueError"
    assert "raise ValueError" in event.attributes["exception.stacktrace"]
    refused = by_name["refusing"]
    assert refused.attributes["error.type"] == "aniki.errors.ToolError"
    assert spans.one("invoke_agent ").status.status_code.name == "UNSET"


async def test_arguments_that_do_not_validate_mark_the_tool_span(spans: Spans) -> None:
    provider = MockProvider()
    provider.enqueue_response(tool_calls=[{"name": "weather", "arguments": {"town": "Oslo"}}])
    provider.enqueue_response("Sorry.")
    await Runner().run(agent_with(provider), message="Weather?")
    call = spans.one("execute_tool ")
    assert call.status.status_code.name == "ERROR"
    assert call.attributes["error.type"] == "tool_error"


@pytest.mark.parametrize("mode", MODES)
async def test_max_turns_exceeded_is_recorded_on_the_run(mode: str, spans: Spans) -> None:
    provider = MockProvider()
    two_tool_turns(provider, "weather")
    with pytest.raises(MaxTurnsExceeded):
        await drive(mode, Runner(max_turns=1), agent_with(provider), message="Weather?")

    agent = spans.one("invoke_agent ")
    assert agent.status.status_code.name == "ERROR"
    assert agent.attributes["error.type"] == "aniki.errors.MaxTurnsExceeded"
    assert "max_turns=1" in agent.events[0].attributes["exception.message"]
    assert spans.one("chat ").status.status_code.name == "UNSET"
    assert spans.one("execute_tool ").status.status_code.name == "UNSET"


@pytest.mark.parametrize("mode", MODES)
async def test_a_timeout_is_recorded_on_the_run_and_the_model_call_is_cancelled(
    mode: str, spans: Spans
) -> None:
    provider = MockProvider()
    provider.enqueue_response("Too late.", delay=5)
    with pytest.raises(RunTimeoutError):
        await drive(mode, Runner(), agent_with(provider), message="Weather?", timeout=0.2)

    agent = spans.one("invoke_agent ")
    assert agent.status.status_code.name == "ERROR"
    assert agent.attributes["error.type"] == "aniki.errors.RunTimeoutError"
    chat = spans.one("chat ")
    assert chat.attributes["aniki.cancelled"] is True
    assert chat.status.status_code.name == "UNSET"  # OpenTelemetry: cancelling is no error


async def test_an_aborted_stream_ends_its_span_as_cancelled(spans: Spans) -> None:
    provider = MockProvider()
    provider.enqueue_response("a long story " * 20)
    stream = Runner().stream(agent_with(provider), message="A story?")
    async for event in stream:
        if isinstance(event, TextDelta):
            break
    await stream.aclose()

    agent = spans.one("invoke_agent ")
    assert agent.attributes["aniki.cancelled"] is True
    assert agent.status.status_code.name == "UNSET"


async def test_an_agent_called_as_a_tool_traces_under_the_tool_call(spans: Spans) -> None:
    inner_provider = MockProvider(["Oslo: 18 degrees."])
    inner = Agent("Meteorologist", model="inner-model", provider=inner_provider)
    outer_provider = MockProvider()
    outer_provider.enqueue_response(
        tool_calls=[{"name": "meteorologist", "arguments": {"request": "Oslo?"}}]
    )
    outer_provider.enqueue_response("It is 18 degrees.")
    outer = Agent("Desk", model="outer-model", provider=outer_provider, tools=[inner.as_tool()])
    await Runner().run(outer, message="Weather in Oslo?")

    call = spans.one("execute_tool meteorologist")
    sub_run = spans.one("invoke_agent Meteorologist")
    assert parent_of(sub_run) == call.context.span_id
    assert parent_of(spans.one("chat inner-model")) == sub_run.context.span_id
    assert parent_of(call) == spans.one("invoke_agent Desk").context.span_id


async def test_a_resumed_run_is_traced_too(spans: Spans) -> None:
    @tool(requires_approval=True)
    def refund(order_id: str) -> str:
        """Refund an order.

        Args:
            order_id: The order.
        """
        return f"refunded {order_id}"

    provider = MockProvider()
    provider.enqueue_response(
        tool_calls=[{"id": "r1", "name": "refund", "arguments": {"order_id": "7"}}]
    )
    provider.enqueue_response("Refunded.")
    agent = Agent("Refunds", model="mock-model", provider=provider, tools=[refund])
    runner = Runner()
    held = await runner.run(agent, message="Refund order 7")
    await runner.resume(agent, approve=[held.pending_approvals[0].id])

    first, second = spans.named("invoke_agent ")
    assert first.attributes["aniki.run.pending_approvals"] == 1
    assert parent_of(spans.one("execute_tool refund")) == second.context.span_id


async def test_disable_stops_the_spans(spans: Spans) -> None:
    provider = MockProvider(["One.", "Two.", "Three."])
    agent = Agent("Quiet", model="mock-model", provider=provider)
    await Runner().run(agent, message="First")
    assert len(spans.all()) == 2
    aniki.tracing.disable()
    assert not aniki.tracing.enabled()
    await Runner().run(agent, message="Second")
    await Runner().stream(agent, message="Third").wait()
    assert len(spans.all()) == 2


def test_a_caller_s_span_is_the_parent_of_the_run(spans: Spans) -> None:
    tracer = spans.provider.get_tracer("test")
    agent = Agent("Child", model="mock-model", provider=MockProvider(["Hi."]))
    with tracer.start_as_current_span("request") as outer:
        Runner().run_sync(agent, message="Hello")
    assert parent_of(spans.one("invoke_agent ")) == outer.get_span_context().span_id


def test_output_type_says_json_for_an_output_schema(spans: Spans) -> None:
    import pydantic

    class Forecast(pydantic.BaseModel):
        city: str

    provider = MockProvider(['{"city": "Oslo"}'])
    agent = Agent("Typed", model="mock-model", provider=provider, output_schema=Forecast)
    Runner().run_sync(agent, message="Forecast?", settings={"temperature": 0.2, "max_tokens": 50})
    chat = spans.one("chat ").attributes
    assert chat["gen_ai.output.type"] == "json"
    assert chat["gen_ai.request.temperature"] == 0.2
    assert chat["gen_ai.request.max_tokens"] == 50


async def test_after_a_handoff_the_model_calls_name_the_agent_that_made_them(spans: Spans) -> None:
    billing = Agent("Billing", model="billing-model", provider=MockProvider(["Refund sent."]))
    triage_provider = MockProvider()
    triage_provider.enqueue_response(tool_calls=[{"name": "transfer_to_billing"}])
    triage = Agent("Triage", model="triage-model", provider=triage_provider, handoffs=[billing])
    await Runner().run(triage, message="I was charged twice")

    chats = spans.named("chat ")
    assert [span.name for span in chats] == ["chat triage-model", "chat billing-model"]
    assert [span.attributes["gen_ai.agent.name"] for span in chats] == ["Triage", "Billing"]
    run = spans.one("invoke_agent ")
    assert run.name == "invoke_agent Triage"
    assert run.attributes["aniki.run.last_agent"] == "Billing"
