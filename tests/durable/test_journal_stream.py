"""The run journal of streamed runs: a stream keeps its turns pending until it completes,
and its journal entry ends with it, however it ends."""

from __future__ import annotations

import asyncio
from pathlib import Path

from aniki import Agent, RunCompleted, Runner, ToolCall, ToolCallCompleted, tool
from aniki._run.journal import runs_of
from aniki.providers.base import ModelRequest
from aniki.sessions import SQLiteSession
from aniki.testing import MockProvider, MockReply

LOOKUP = ToolCall("call_lookup", "lookup", '{"order_id": "42"}')


def _agent(ran: list[str]) -> Agent:
    @tool
    def lookup(order_id: str) -> str:
        """Look an order up."""
        ran.append(order_id)
        return f"order {order_id}: shipped"

    def model(request: ModelRequest) -> MockReply:
        if request.messages[-1].role == "user":
            return MockReply(tool_calls=(LOOKUP,))
        return MockReply(content="It has shipped.")

    return Agent("Support", model="m", provider=MockProvider(handler=model), tools=[lookup])


async def _settled(session: SQLiteSession) -> list[str]:
    """The states of the session's runs, once none is left open (at most 5 s)."""
    for _ in range(250):
        states = [info.state for info in await runs_of(session)]
        if "running" not in states and "cut" not in states:
            return states
        await asyncio.sleep(0.02)
    return states


async def test_a_completed_stream_ends_its_entry(tmp_path: Path) -> None:
    ran: list[str] = []
    session = SQLiteSession("chat", tmp_path / "chat.db")
    events = [e async for e in Runner().stream(_agent(ran), message="Where?", session=session)]
    assert isinstance(events[-1], RunCompleted)
    assert await _settled(session) == ["done"]
    assert await Runner().recover(_agent(ran), session=session) == []
    assert ran == ["42"]


async def test_a_stream_aborted_after_its_tools_ran_leaves_no_run_to_recover(
    tmp_path: Path,
) -> None:
    ran: list[str] = []
    session = SQLiteSession("chat", tmp_path / "chat.db")
    stream = Runner().stream(_agent(ran), message="Where?", session=session)
    async for event in stream:
        if isinstance(event, ToolCallCompleted):
            await asyncio.sleep(0.2)  # the run answers in the background meanwhile
            break
    await stream.abort()
    assert [m.role for m in session.get_messages()] == ["user"]  # nothing else stored
    assert await _settled(session) == ["done"]
    assert await Runner().recover(_agent(ran), session=session) == []
    assert ran == ["42"]  # the tool is not run again by anything
