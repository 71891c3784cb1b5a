"""Every example and statement of the specification's Memory page, in Python."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from aniki import (
    Agent,
    Context,
    InMemorySession,
    Memory,
    Message,
    MessageLike,
    Runner,
    Session,
    ValidationError,
)
from aniki.messages import to_message
from aniki.testing import MockProvider


def make_agent(provider: MockProvider, **kwargs: object) -> Agent:
    return Agent(
        name="Assistant",
        instructions="You are a helpful assistant.",
        model="gpt-4o-mini",
        provider=provider,
        **kwargs,  # type: ignore[arg-type]
    )


async def test_conversation_history_example() -> None:
    provider = MockProvider()
    provider.enqueue_response(content="Nice to meet you, Lalit!")
    provider.enqueue_response(content="Your name is Lalit.")
    agent = make_agent(provider)
    runner = Runner()

    await runner.run(agent, message="My name is Lalit.")
    second = await runner.run(agent, message="What's my name?")

    assert len(second.messages) == 4
    assert len(agent.session.get_messages()) == 4  # type: ignore[arg-type]
    assert list(second.messages) == list(agent.session.get_messages())  # type: ignore[call-overload]
    assert second.content == "Your name is Lalit."


async def test_runner_sends_instructions_and_the_entire_history_every_call() -> None:
    provider = MockProvider()
    provider.enqueue_response(content="Nice to meet you, Lalit!")
    provider.enqueue_response(content="Your name is Lalit.")
    agent = make_agent(provider)
    runner = Runner()
    await runner.run(agent, message="My name is Lalit.")
    await runner.run(agent, message="What's my name?")

    first, second = provider.requests
    assert first.messages[0] == Message(role="system", content="You are a helpful assistant.")
    assert [m.content for m in first.messages[1:]] == ["My name is Lalit."]
    assert [(m.role, m.content) for m in second.messages] == [
        ("system", "You are a helpful assistant."),
        ("user", "My name is Lalit."),
        ("assistant", "Nice to meet you, Lalit!"),
        ("user", "What's my name?"),
    ]


async def test_result_messages_is_a_snapshot_of_the_same_store() -> None:
    provider = MockProvider()
    provider.enqueue_response(content="one")
    provider.enqueue_response(content="two")
    agent = make_agent(provider)
    runner = Runner()
    first = await runner.run(agent, message="a")
    await runner.run(agent, message="b")
    assert len(first.messages) == 2
    assert len(agent.session.get_messages()) == 4  # type: ignore[arg-type]


def test_agent_gets_a_fresh_in_memory_session_when_none_is_given() -> None:
    provider = MockProvider()
    one, two = make_agent(provider), make_agent(provider)
    assert isinstance(one.session, InMemorySession)
    assert one.session is not two.session


def test_agent_uses_the_session_it_is_given() -> None:
    session = InMemorySession("conversation-42")
    agent = Agent(
        "Assistant", "You are helpful.", model="gpt-4o-mini", provider="openai", session=session
    )
    assert agent.session is session
    assert agent.session.id == "conversation-42"


def test_in_memory_sessions_with_the_same_id_never_share_state() -> None:
    one, two = InMemorySession("same"), InMemorySession("same")
    one.add_message({"role": "user", "content": "Hi"})
    assert len(one.get_messages()) == 1
    assert two.get_messages() == ()


def test_in_memory_session_without_id_gets_a_fresh_unique_id() -> None:
    ids = {InMemorySession().id for _ in range(50)}
    assert len(ids) == 50
    assert all(isinstance(i, str) and i for i in ids)


def test_memory_lifecycle_example() -> None:
    session = InMemorySession("s1")
    session.add_message({"role": "user", "content": "Hi"})
    assert session.get_messages() == (Message(role="user", content="Hi"),)
    session.clear()
    assert session.get_messages() == ()


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ({"role": "robot", "content": "Hi"}, "role"),
        ({"role": "user", "content": 42}, "content"),
        ({"role": "user", "content": ""}, "content"),
        ({"role": "assistant", "content": ""}, "content"),
        ({"role": "user", "content": "x", "tool_calls": [{"id": "1", "name": "f"}]}, "tool_calls"),
        ({"role": "tool", "content": "42"}, "tool_call_id"),
    ],
)
@pytest.mark.parametrize("as_message", [False, True])
def test_memory_validates_every_message(
    message: dict[str, object], field: str, as_message: bool
) -> None:
    memory = Memory()
    memory.add_message({"role": "user", "content": "kept"})
    with pytest.raises(ValidationError) as info:
        memory.add_message(Message(**message) if as_message else message)  # type: ignore[arg-type]
    assert info.value.field == field
    assert field.split(".")[0] in str(info.value)
    assert [m.content for m in memory.get_messages()] == ["kept"]


def test_assistant_message_with_tool_calls_may_have_empty_content() -> None:
    memory = Memory()
    memory.add_message(
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "f"}]}
    )
    memory.add_message({"role": "tool", "content": "done", "tool_call_id": "c1"})
    assert [m.role for m in memory.get_messages()] == ["assistant", "tool"]


class DatabaseSession:
    """The custom-session shape the specification shows, backed by a dict 'database'."""

    database: dict[str, list[dict[str, object]]] = {}

    def __init__(self, id: str) -> None:
        self.id = id

    def add_message(self, message: MessageLike) -> None:
        self.database.setdefault(self.id, []).append(to_message(message).to_dict())

    def get_messages(self) -> Sequence[Message]:
        return [Message.from_dict(d) for d in self.database.get(self.id, [])]

    def clear(self) -> None:
        self.database.pop(self.id, None)


class WindowedSession:
    """The windowed shape the specification shows: keeps everything, returns the tail."""

    def __init__(self, id: str, max_messages: int) -> None:
        self.id = id
        self._memory = Memory()
        self._max = max_messages

    def add_message(self, message: MessageLike) -> None:
        self._memory.add_message(message)

    def get_messages(self) -> Sequence[Message]:
        return self._memory.get_messages()[-self._max :]

    def clear(self) -> None:
        self._memory.clear()


async def test_a_custom_session_persists_across_agents() -> None:
    provider = MockProvider()
    provider.enqueue_response(content="Hello Lalit")
    provider.enqueue_response(content="You are Lalit")
    assert isinstance(DatabaseSession("d1"), Session)
    runner = Runner()
    await runner.run(make_agent(provider, session=DatabaseSession("d1")), message="I am Lalit")
    # A "restart": a new session object over the same database sees the history.
    result = await runner.run(make_agent(provider, session=DatabaseSession("d1")), message="Who?")
    assert [m.content for m in result.messages] == [
        "I am Lalit",
        "Hello Lalit",
        "Who?",
        "You are Lalit",
    ]
    DatabaseSession("d1").clear()


async def test_windowed_session_sends_only_the_tail_but_keeps_everything() -> None:
    provider = MockProvider(handler=lambda request: f"seen {len(request.messages)}")
    session = WindowedSession("w", max_messages=3)
    agent = make_agent(provider, session=session)
    runner = Runner()
    for turn in range(4):
        await runner.run(agent, message=f"turn {turn}")
    assert len(provider.requests[-1].messages) == 1 + 3
    assert len(session._memory.get_messages()) == 8


async def test_a_run_that_raises_keeps_every_completed_turn() -> None:
    provider = MockProvider()
    provider.enqueue_response(tool_calls=[{"id": "c1", "name": "ping"}])
    provider.enqueue_response(error=RuntimeError("provider down"))

    def ping() -> str:
        return "pong"

    agent = make_agent(provider, tools=[ping])
    with pytest.raises(Exception, match="provider down"):
        await Runner().run(agent, message="go")
    assert [m.role for m in agent.session.get_messages()] == [  # type: ignore[union-attr]
        "user",
        "assistant",
        "tool",
    ]


async def test_a_failed_stream_keeps_only_the_user_message() -> None:
    provider = MockProvider()
    provider.enqueue_response(content="half an answer", error=RuntimeError("connection reset"))
    agent = make_agent(provider)
    stream = Runner().stream(agent, message="Hello")
    deltas = []
    with pytest.raises(Exception, match="connection reset"):
        async for event in stream:
            deltas.append(event)
    assert deltas  # text arrived before the failure ...
    assert agent.session.get_messages() == (Message(role="user", content="Hello"),)  # ... unkept


async def test_context_is_fresh_per_run_and_unrelated_to_history() -> None:
    provider = MockProvider(handler=lambda request: "ok")
    seen: list[Context] = []

    async def remember(ctx: Context, request: object, call_next: object) -> object:
        assert not ctx.has("trace_id")
        ctx.set("trace_id", "t-1")
        seen.append(ctx)
        return await call_next(request)  # type: ignore[operator]

    agent = make_agent(provider, middleware=[remember])
    runner = Runner()
    first = await runner.run(agent, message="a")
    second = await runner.run(agent, message="b")
    assert seen[0] is first.context and seen[1] is second.context
    assert first.context is not second.context
    assert first.run_id != second.run_id
    assert first.context.get("trace_id") == "t-1"
    assert first.context.started_at.tzinfo is not None
    assert all("t-1" not in m.content for m in agent.session.get_messages())  # type: ignore[union-attr]
