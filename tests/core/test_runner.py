"""Runner behaviour shared by run, run_sync and stream."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aniki import (
    Agent,
    AnikiError,
    InMemorySession,
    MaxTurnsExceeded,
    Message,
    ModelRequest,
    ModelResponse,
    ProviderError,
    Runner,
    ToolCall,
    Usage,
    UserError,
)
from aniki.testing import MockProvider

from .helpers import MODES, drive

pytestmark = pytest.mark.parametrize("mode", MODES)


def agent_with(provider: MockProvider, **kwargs: Any) -> Agent:
    return Agent("A", "Be brief.", model="test-model", provider=provider, **kwargs)


async def test_two_turn_conversation(mode: str) -> None:
    provider = MockProvider()
    provider.enqueue_response(content="Nice to meet you, Lalit!")
    provider.enqueue_response(content="Your name is Lalit.")
    agent = agent_with(provider)
    runner = Runner()
    first = await drive(mode, runner, agent, message="My name is Lalit.")
    second = await drive(mode, runner, agent, message="What's my name?")
    assert first.content == "Nice to meet you, Lalit!"
    assert second.content == second.output == "Your name is Lalit."
    assert len(second.messages) == 4
    assert [m.role for m in second.new_messages] == ["user", "assistant"]
    assert len(provider.requests[1].messages) == 4  # system + 3 messages of history


async def test_per_run_session_override_serves_many_conversations(mode: str) -> None:
    provider = MockProvider(handler=lambda request: f"{len(request.messages)} messages")
    agent = agent_with(provider)
    runner = Runner()
    alice, bob = InMemorySession("alice"), InMemorySession("bob")
    await drive(mode, runner, agent, message="hi from alice", session=alice)
    await drive(mode, runner, agent, message="hi from bob", session=bob)
    result = await drive(mode, runner, agent, message="alice again", session=alice)
    assert [m.content for m in alice.get_messages()] == [
        "hi from alice",
        "2 messages",
        "alice again",
        "4 messages",
    ]
    assert len(bob.get_messages()) == 2
    assert agent.session.get_messages() == ()  # type: ignore[comparison-overlap]
    assert result.messages == alice.get_messages()


async def test_empty_instructions_send_no_system_message(mode: str) -> None:
    provider = MockProvider(handler=lambda request: "ok")
    agent = Agent("A", model="m", provider=provider)
    await drive(mode, Runner(), agent, message="hi")
    assert [m.role for m in provider.requests[0].messages] == ["user"]


async def test_instructions_may_be_a_function_of_the_context(mode: str) -> None:
    provider = MockProvider(handler=lambda request: "ok")

    async def instructions(ctx: Any) -> str:
        return f"User is {ctx.get('user')}."

    agent = Agent("A", instructions, model="m", provider=provider)
    await drive(mode, Runner(), agent, message="hi", context={"user": "Ana"})
    assert provider.requests[0].messages[0].content == "User is Ana."


async def test_usage_is_summed_and_missing_usage_counts_one_request(mode: str) -> None:
    provider = MockProvider()
    provider.enqueue_response(
        tool_calls=[{"name": "noop"}], usage=Usage(input_tokens=10, output_tokens=2, requests=1)
    )
    provider.enqueue_response(content="done")  # reports no usage

    def noop() -> str:
        return "ok"

    result = await drive(mode, Runner(), agent_with(provider, tools=[noop]), message="go")
    # The second request counts, and says its tokens are unknown rather than zero.
    assert result.usage == Usage(
        input_tokens=10, output_tokens=2, requests=2, unreported_requests=1
    )


async def test_middleware_wraps_every_model_call_runner_outside_agent(mode: str) -> None:
    provider = MockProvider()
    provider.enqueue_response(tool_calls=[{"name": "noop"}])
    provider.enqueue_response(content="done")
    order: list[str] = []

    def recorder(name: str) -> Any:
        async def middleware(ctx: Any, request: ModelRequest, call_next: Any) -> ModelResponse:
            order.append(f"{name}>")
            if name == "runner":
                ctx.set("trace", "abc")
                request = ModelRequest(
                    model=request.model,
                    messages=request.messages,
                    tools=request.tools,
                    settings={**request.settings, "temperature": 0.5},
                )
            response: ModelResponse = await call_next(request)
            order.append(f"<{name}")
            return response

        return middleware

    def noop() -> str:
        return "ok"

    agent = agent_with(provider, tools=[noop], middleware=[recorder("agent")])
    result = await drive(mode, Runner(middleware=[recorder("runner")]), agent, message="go")
    assert order == ["runner>", "agent>", "<agent", "<runner"] * 2
    assert result.context.get("trace") == "abc"
    assert all(r.settings.get("temperature") == 0.5 for r in provider.requests)


async def test_settings_merge_agent_then_run(mode: str) -> None:
    provider = MockProvider(handler=lambda request: "ok")
    agent = agent_with(provider, settings={"temperature": 0.1, "max_tokens": 50})
    await drive(mode, Runner(), agent, message="hi", settings={"temperature": 0.9})
    assert provider.requests[0].settings == {"temperature": 0.9, "max_tokens": 50}


async def test_provider_exceptions_are_wrapped_in_provider_error(mode: str) -> None:
    provider = MockProvider()
    boom = ConnectionResetError("peer reset")
    provider.enqueue_response(error=boom)
    agent = agent_with(provider)
    with pytest.raises(ProviderError) as info:
        await drive(mode, Runner(), agent, message="hi")
    assert info.value.__cause__ is boom
    assert [m.role for m in agent.session.get_messages()] == ["user"]  # type: ignore[union-attr]


async def test_aniki_errors_from_a_provider_pass_through_unwrapped(mode: str) -> None:
    provider = MockProvider()
    error = UserError("bad setup")
    provider.enqueue_response(error=error)
    with pytest.raises(UserError) as info:
        await drive(mode, Runner(), agent_with(provider), message="hi")
    assert info.value is error


async def test_an_empty_model_reply_is_a_clear_provider_error(mode: str) -> None:
    provider = MockProvider()
    provider.enqueue_response(content="")
    with pytest.raises(ProviderError, match="unusable reply"):
        await drive(mode, Runner(), agent_with(provider), message="hi")


async def test_max_turns_runs_the_last_tools_then_raises(mode: str) -> None:
    provider = MockProvider(
        handler=lambda request: ModelResponse(
            tool_calls=(ToolCall(id=f"c{len(request.messages)}", name="again"),)
        )
    )
    calls: list[int] = []

    def again() -> str:
        calls.append(1)
        return "more"

    agent = agent_with(provider, tools=[again])
    with pytest.raises(MaxTurnsExceeded) as info:
        await drive(mode, Runner(max_turns=3), agent, message="loop")
    assert info.value.max_turns == 3
    assert len(provider.requests) == 3
    assert len(calls) == 3
    stored = agent.session.get_messages()  # type: ignore[union-attr]
    if mode == "stream":
        assert [m.role for m in stored] == ["user"]
    else:
        assert [m.role for m in stored] == ["user"] + ["assistant", "tool"] * 3


async def test_the_message_may_be_a_user_message_object(mode: str) -> None:
    provider = MockProvider(handler=lambda request: "ok")
    result = await drive(
        mode, Runner(), agent_with(provider), message=Message(role="user", content="hi")
    )
    assert result.new_messages[0] == Message(role="user", content="hi")


async def test_a_non_user_message_is_refused_before_anything_is_stored(mode: str) -> None:
    agent = agent_with(MockProvider())
    with pytest.raises(UserError, match="user message"):
        await drive(mode, Runner(), agent, message={"role": "assistant", "content": "x"})
    assert agent.session.get_messages() == ()  # type: ignore[comparison-overlap]


async def test_an_empty_queue_names_the_call(mode: str) -> None:
    provider = MockProvider()
    with pytest.raises(AnikiError, match=r"no reply queued for call #1.*enqueue_response"):
        await drive(mode, Runner(), agent_with(provider), message="hi")


async def test_async_sessions_are_accepted(mode: str) -> None:
    class AsyncListSession:
        def __init__(self) -> None:
            self.id = "async"
            self.inner = InMemorySession()

        async def add_message(self, message: Any) -> None:
            await asyncio.sleep(0)
            self.inner.add_message(message)

        async def get_messages(self) -> Any:
            await asyncio.sleep(0)
            return self.inner.get_messages()

        async def clear(self) -> None:
            self.inner.clear()

    provider = MockProvider(handler=lambda request: "ok")
    session = AsyncListSession()
    result = await drive(mode, Runner(), agent_with(provider, session=session), message="hi")
    assert [m.content for m in session.inner.get_messages()] == ["hi", "ok"]
    assert result.messages == session.inner.get_messages()
