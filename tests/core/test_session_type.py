"""``session=`` given something that is not a session fails at once, saying what to pass."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from aniki import Agent, InMemorySession, Message, Runner, UserError
from aniki.sessions import SQLiteSession
from aniki.testing import MockProvider

WAYS = ["run", "run_sync", "stream", "resume", "resume_sync", "Agent", "as_tool"]


class NoClear:
    """Three of the four members a session has."""

    id = "no-clear"

    def add_message(self, message: Message) -> None:
        pass

    def get_messages(self) -> Sequence[Message]:
        return ()


async def use_session(way: str, session: Any, provider: MockProvider) -> None:
    """Hand ``session`` to the Runner (or the Agent) the way ``way`` names."""
    if way == "Agent":
        Agent("A", model="m", provider=provider, session=session)
        return
    agent = Agent("A", model="m", provider=provider)
    if way == "as_tool":
        agent.as_tool(session=session)
        return
    runner = Runner()
    if way == "run":
        await runner.run(agent, message="hi", session=session)
    elif way == "run_sync":
        await asyncio.to_thread(runner.run_sync, agent, message="hi", session=session)
    elif way == "stream":
        async for _ in runner.stream(agent, message="hi", session=session):
            pass
    elif way == "resume":
        await runner.resume(agent, approve=["call_1"], session=session)
    else:
        assert way == "resume_sync"
        await asyncio.to_thread(runner.resume_sync, agent, approve=["call_1"], session=session)


@pytest.mark.parametrize("way", WAYS)
async def test_a_session_id_instead_of_a_session_says_what_to_pass(way: str) -> None:
    provider = MockProvider()
    with pytest.raises(UserError) as raised:
        await use_session(way, "user-1", provider)
    assert str(raised.value) == (
        "session= takes a Session or AsyncSession object such as SQLiteSession('user-1'), "
        "not a session id; got str 'user-1'"
    )
    assert provider.requests == []


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize(
    ("value", "said"),
    [
        (42, "got int"),
        ({"id": "user-1"}, "got dict"),
        (NoClear(), "got NoClear, which has no clear()"),
        (SQLiteSession, "got the class SQLiteSession itself: create one, SQLiteSession('user-1')"),
    ],
    ids=["int", "dict", "three-members", "class"],
)
async def test_other_objects_are_refused_naming_what_they_are(
    way: str, value: Any, said: str
) -> None:
    provider = MockProvider()
    with pytest.raises(UserError) as raised:
        await use_session(way, value, provider)
    message = str(raised.value)
    assert message.startswith("session= takes a Session or AsyncSession object such as ")
    assert message.endswith(said)
    assert provider.requests == []


@pytest.mark.parametrize("way", ["run", "run_sync", "stream"])
async def test_a_session_object_is_still_taken(way: str) -> None:
    session = InMemorySession("user-1")
    await use_session(way, session, MockProvider(["hello"]))
    assert [m.content for m in session.get_messages()] == ["hi", "hello"]
