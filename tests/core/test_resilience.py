"""Broken streams are retried; a run can be given a time limit."""

from __future__ import annotations

import asyncio

import pytest

from aniki import (
    Agent,
    Message,
    ProviderConnectionError,
    RunCompleted,
    Runner,
    RunTimeoutError,
    StreamInterruptedError,
    StreamRestarted,
    TextDelta,
)
from aniki.testing import MockProvider

from .helpers import MODES, drive


async def collect(runner: Runner, agent: Agent) -> list[object]:
    return [event async for event in runner.stream(agent, message="go")]


async def test_a_broken_stream_is_retried_and_the_consumer_told() -> None:
    provider = MockProvider()
    provider.enqueue_response(content="half a", error=StreamInterruptedError("connection dropped"))
    provider.enqueue_response(content="whole answer")
    agent = Agent("A", model="m", provider=provider)
    events = await collect(Runner(retry_backoff=0), agent)

    restarted = [e for e in events if isinstance(e, StreamRestarted)]
    assert len(restarted) == 1
    assert "connection dropped" in restarted[0].reason
    after = events[events.index(restarted[0]) + 1 :]
    assert "".join(e.text for e in after if isinstance(e, TextDelta)) == "whole answer"
    assert isinstance(events[-1], RunCompleted)
    assert events[-1].result.content == "whole answer"
    assert [m.content for m in agent.session.get_messages()] == ["go", "whole answer"]  # type: ignore[union-attr]
    assert len(provider.requests) == 2
    assert provider.requests[0].messages == provider.requests[1].messages


async def test_a_connection_lost_mid_reply_is_retried() -> None:
    provider = MockProvider()
    provider.enqueue_response(content="part", error=ProviderConnectionError("reset by peer"))
    provider.enqueue_response(content="done")
    events = await collect(Runner(retry_backoff=0), Agent("A", model="m", provider=provider))
    assert sum(isinstance(e, StreamRestarted) for e in events) == 1


async def test_a_failure_before_the_reply_began_is_left_to_the_client() -> None:
    provider = MockProvider()
    provider.enqueue_response(error=ProviderConnectionError("refused"))
    agent = Agent("A", model="m", provider=provider)
    with pytest.raises(ProviderConnectionError):
        await collect(Runner(retry_backoff=0), agent)
    assert len(provider.requests) == 1  # the vendor client already retried; no second loop


async def test_when_retries_run_out_the_error_names_the_cause() -> None:
    provider = MockProvider()
    for _ in range(3):
        provider.enqueue_response(content="x", error=StreamInterruptedError("truncated"))
    agent = Agent("A", model="m", provider=provider)
    events: list[object] = []
    with pytest.raises(StreamInterruptedError, match="truncated"):
        async for event in Runner(stream_retries=2, retry_backoff=0).stream(agent, message="go"):
            events.append(event)
    assert sum(isinstance(e, StreamRestarted) for e in events) == 2
    assert len(provider.requests) == 3
    assert agent.session.get_messages() == (Message(role="user", content="go"),)


@pytest.mark.parametrize("mode", MODES)
async def test_a_run_timeout_keeps_what_the_persistence_rule_allows(mode: str) -> None:
    def noop() -> str:
        return "ok"

    provider = MockProvider()
    provider.enqueue_response(tool_calls=[{"id": "c", "name": "noop"}])
    provider.enqueue_response(content="too late", delay=30)
    agent = Agent("A", model="m", provider=provider, tools=[noop])
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(RunTimeoutError) as info:
        await drive(mode, Runner(), agent, message="go", timeout=0.2)
    assert loop.time() - started < 10
    assert info.value.timeout == 0.2
    assert isinstance(info.value, TimeoutError)
    roles = [m.role for m in agent.session.get_messages()]  # type: ignore[union-attr]
    assert roles == (["user"] if mode == "stream" else ["user", "assistant", "tool"])
