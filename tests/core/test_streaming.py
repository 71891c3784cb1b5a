"""Streaming events, and what each way of stopping a stream leaves in the session."""

from __future__ import annotations

import asyncio
import gc
import threading

import pytest

from aniki import (
    Agent,
    Message,
    RunCompleted,
    Runner,
    TextDelta,
    ToolCallCompleted,
    ToolCallStarted,
    tool,
)
from aniki.testing import MockProvider

USER_ONLY = (Message(role="user", content="go"),)


async def other_tasks() -> set[asyncio.Task[object]]:
    """Tasks other than the test's, after letting finalizers already scheduled run."""
    for _ in range(20):
        left = {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}
        if not left:
            break
        await asyncio.sleep(0.005)
    return left


async def test_events_in_order_with_tools() -> None:
    @tool
    def add(a: int, b: int) -> int:
        return a + b

    provider = MockProvider()
    provider.enqueue_response(
        content="Let me add.",
        chunks=["Let me ", "add."],
        tool_calls=[{"id": "c", "name": "add", "arguments": {"a": 1, "b": 2}}],
    )
    provider.enqueue_response(content="It is three", chunks=["It ", "is ", "three"])
    agent = Agent("A", model="m", provider=provider, tools=[add])
    async with Runner().stream(agent, message="go") as stream:
        events = [event async for event in stream]
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "TextDelta",
        "TextDelta",
        "ToolCallStarted",
        "ToolCallCompleted",
        "TextDelta",
        "TextDelta",
        "TextDelta",
        "RunCompleted",
    ]
    assert "".join(e.text for e in events[4:7] if isinstance(e, TextDelta)) == "It is three"
    started, completed = events[2], events[3]
    assert isinstance(started, ToolCallStarted) and started.tool_call.name == "add"
    assert isinstance(completed, ToolCallCompleted) and completed.message.content == "3"
    final = events[-1]
    assert isinstance(final, RunCompleted)
    assert stream.result is final.result
    assert len(agent.session.get_messages()) == 4  # type: ignore[arg-type]


async def test_nothing_but_the_user_message_is_stored_until_completion() -> None:
    provider = MockProvider()
    provider.enqueue_response(content="a b c")
    agent = Agent("A", model="m", provider=provider)
    stream = Runner().stream(agent, message="go")
    seen = []
    async for event in stream:
        if not isinstance(event, RunCompleted):
            assert agent.session.get_messages() == USER_ONLY
        seen.append(event)
    assert [m.role for m in agent.session.get_messages()] == ["user", "assistant"]  # type: ignore[union-attr]


async def test_the_user_message_is_stored_immediately_even_if_aborted_at_once() -> None:
    provider = MockProvider()
    provider.enqueue_response(content="never", delay=10)
    agent = Agent("A", model="m", provider=provider)
    stream = Runner().stream(agent, message="go")
    await stream.abort()
    assert agent.session.get_messages() == USER_ONLY
    assert stream.result is None
    assert not await other_tasks()


@pytest.mark.parametrize("stop_after", [0, 1, 2])
async def test_abort_at_any_point_before_completion_commits_nothing(stop_after: int) -> None:
    provider = MockProvider()
    provider.enqueue_response(content="one two three")
    agent = Agent("A", model="m", provider=provider)
    stream = Runner().stream(agent, message="go")
    count = 0
    async for _event in stream:
        if count == stop_after:
            await stream.abort()
            break
        count += 1
    await asyncio.sleep(0.01)
    assert agent.session.get_messages() == USER_ONLY
    assert not await other_tasks()


async def test_events_still_buffered_do_not_commit() -> None:
    provider = MockProvider()
    provider.enqueue_response(content="one two three")
    agent = Agent("A", model="m", provider=provider)
    stream = Runner().stream(agent, message="go")
    iterator = stream.__aiter__()
    await iterator.__anext__()
    await asyncio.sleep(0.05)  # the run finishes in the background; its events wait unread
    await stream.aclose()
    assert agent.session.get_messages() == USER_ONLY
    assert not await other_tasks()


async def test_break_then_aclose_and_leaving_async_with() -> None:
    for use_context_manager in (False, True):
        provider = MockProvider()
        provider.enqueue_response(content="one two three", delay=0.01)
        agent = Agent("A", model="m", provider=provider)
        if use_context_manager:
            async with Runner().stream(agent, message="go") as stream:
                async for _ in stream:
                    break
        else:
            stream = Runner().stream(agent, message="go")
            async for _ in stream:
                break
            await stream.aclose()
        assert agent.session.get_messages() == USER_ONLY
        assert not await other_tasks()


async def test_break_without_aclose_still_stops_the_run() -> None:
    provider = MockProvider()
    provider.enqueue_response(content="one two three four five", chunks=["x"] * 5, delay=0.01)
    agent = Agent("A", model="m", provider=provider)
    stream = Runner().stream(agent, message="go")
    async for _ in stream:
        break
    del stream
    gc.collect()
    for _ in range(5):
        await asyncio.sleep(0.01)
    assert agent.session.get_messages() == USER_ONLY
    assert not await other_tasks()


@pytest.mark.parametrize("where", ["before_first_chunk", "mid_stream", "during_tool"])
async def test_cancelling_the_consumer_task(where: str) -> None:
    tool_started = asyncio.Event()
    thread_done = threading.Event()

    @tool
    async def slow() -> str:
        tool_started.set()
        await asyncio.sleep(10)
        return "late"

    @tool
    def blocking() -> str:
        thread_done.set()
        return "ok"

    provider = MockProvider()
    if where == "before_first_chunk":
        provider.enqueue_response(content="late", delay=10)
    elif where == "mid_stream":
        provider.enqueue_response(content="a b", chunks=["a ", "b"], delay=0)
    else:
        provider.enqueue_response(tool_calls=[{"id": "1", "name": "slow"}])
    agent = Agent("A", model="m", provider=provider, tools=[slow, blocking])
    first_event = asyncio.Event()

    async def consume() -> None:
        async for _event in Runner().stream(agent, message="go"):
            first_event.set()
            await asyncio.sleep(10)

    task = asyncio.create_task(consume())
    if where == "before_first_chunk":
        await asyncio.sleep(0.02)
    elif where == "mid_stream":
        await asyncio.wait_for(first_event.wait(), 5)
    else:
        await asyncio.wait_for(tool_started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.01)
    assert agent.session.get_messages() == USER_ONLY
    assert not await other_tasks()


async def test_stream_failure_reaches_the_consumer_and_stores_only_the_user_message() -> None:
    provider = MockProvider()
    provider.enqueue_response(content="partial reply", error=TimeoutError("stalled"))
    agent = Agent("A", model="m", provider=provider)
    texts: list[str] = []
    with pytest.raises(Exception, match="stalled"):
        async for event in Runner().stream(agent, message="go"):
            if isinstance(event, TextDelta):
                texts.append(event.text)
    assert "".join(texts) == "partial reply"
    assert agent.session.get_messages() == USER_ONLY


async def test_wait_returns_the_result() -> None:
    provider = MockProvider()
    provider.enqueue_response(content="done")
    agent = Agent("A", model="m", provider=provider)
    result = await Runner().stream(agent, message="go").wait()
    assert result.content == "done"


async def test_a_stream_made_outside_a_loop_starts_when_consumed() -> None:
    provider = MockProvider()
    provider.enqueue_response(content="done")
    agent = Agent("A", model="m", provider=provider)

    def make() -> object:
        return Runner().stream(agent, message="go")

    stream = await asyncio.to_thread(make)  # no running loop in that thread
    assert agent.session.get_messages() == ()  # type: ignore[comparison-overlap]
    result = await stream.wait()  # type: ignore[attr-defined]
    assert result.content == "done"
