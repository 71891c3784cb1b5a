"""An ``undo()`` that removes a run's question while the run works: the reply is not stored.

Another worker (another session object over the same store; the same object for the
in-memory stores, which share nothing between objects) undoes the last turn while the model
call is in flight. The run must raise :class:`~aniki.TurnUndoneError` and store nothing, so
the session holds exactly what the undo left, for every store that has ``undo()``, through
``run``, ``run_sync`` and ``stream``.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from aniki import Agent, Message, ModelRequest, Runner, ToolCall, TurnUndoneError, tool
from aniki.sessions import (
    AsyncFileSession,
    AsyncInMemorySession,
    AsyncSQLiteSession,
    EncryptedSession,
    FileSession,
    InMemorySession,
    SQLiteSession,
    WindowedSession,
)
from aniki.testing import MockProvider, MockReply
from tests.servers import (
    delete_redis_prefix,
    drop_postgres_tables,
    postgres_dsn,
    redis_url,
    unique_name,
)

from .helpers import MODES, drive

KEY = "kT0LNc1Ex3rU2j4hW0qXkqJ2RZ4mG6dA8h5yV9eNbQw="
"""A Fernet key for the encrypted store."""

OSLO = ToolCall("call_1", "lookup", '{"city": "Oslo"}')

EARLIER = ["What is 2 + 2?", "4."]
"""The turn before the one that is undone."""


async def resolve(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


@dataclass
class Store:
    """Opens session objects over one store; ``shared``: another object sees the same history."""

    open: Callable[[str], Any]
    shared: bool = True
    one_loop: bool = False
    """Its objects belong to the event loop they were first used on (``run_sync`` has its own)."""
    cleanup: Callable[[], None] = lambda: None
    opened: list[Any] = field(default_factory=list)

    def session(self, session_id: str) -> Any:
        made = self.open(session_id)
        self.opened.append(made)
        return made

    async def close(self) -> None:
        for session in self.opened:
            await close(session)
        self.cleanup()


def make_store(kind: str, tmp_path: Path) -> Store:
    if kind == "memory":
        return Store(InMemorySession, shared=False)
    if kind == "async_memory":
        return Store(AsyncInMemorySession, shared=False)
    if kind in ("sqlite", "async_sqlite"):
        lite = SQLiteSession if kind == "sqlite" else AsyncSQLiteSession
        return Store(lambda sid: lite(sid, tmp_path / "chat.db"))
    if kind in ("file", "async_file"):
        files = FileSession if kind == "file" else AsyncFileSession
        return Store(lambda sid: files(sid, tmp_path / "chats"))
    if kind == "windowed_sqlite":
        return Store(lambda sid: WindowedSession(SQLiteSession(sid, tmp_path / "w.db"), 50))
    if kind == "encrypted_file":
        return Store(lambda sid: EncryptedSession(FileSession(sid, tmp_path / "enc"), key=KEY))
    if kind == "encrypted_sqlite":
        return Store(lambda sid: EncryptedSession(SQLiteSession(sid, tmp_path / "e.db"), key=KEY))
    if kind in ("redis", "async_redis"):
        from aniki.sessions.redis import AsyncRedisSession, RedisSession

        url, prefix = redis_url(), unique_name("undo") + ":"
        red = RedisSession if kind == "redis" else AsyncRedisSession
        return Store(
            lambda sid: red(sid, url, prefix=prefix),
            one_loop=kind == "async_redis",
            cleanup=lambda: delete_redis_prefix(prefix),
        )
    assert kind in ("postgres", "async_postgres")
    from aniki.sessions.postgres import AsyncPostgresSession, PostgresSession

    dsn, table = postgres_dsn(), unique_name("undo")
    pg = PostgresSession if kind == "postgres" else AsyncPostgresSession
    return Store(lambda sid: pg(sid, dsn, table=table), cleanup=lambda: drop_postgres_tables(table))


KINDS = [
    "memory",
    "async_memory",
    "sqlite",
    "async_sqlite",
    "file",
    "async_file",
    "windowed_sqlite",
    "encrypted_file",
    "encrypted_sqlite",
    pytest.param("redis", marks=pytest.mark.redis),
    pytest.param("async_redis", marks=pytest.mark.redis),
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("async_postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    made = make_store(request.param, tmp_path)
    if made.one_loop and "run_sync" in request.node.callspec.id:
        pytest.skip("its objects belong to one event loop, and run_sync runs on its own")
    yield made
    await made.close()


@tool
def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: The city.
    """
    return f"{city} is sunny"


ASKED = "What is the capital of France?"
ANSWER = "Paris is the capital of France."


class Worker:
    """A model whose call number ``at`` (from 1) first has another worker change the session:
    ``undo()`` its last turn, ``clear()`` it, or ``"append"`` a note to it."""

    def __init__(self, store: Store, session: Any, session_id: str, at: int, action: str) -> None:
        self.store, self.session, self.session_id = store, session, session_id
        self.at, self.action = at, action
        self.removed: list[str] = []
        self.calls = count(1)

    async def reply(self, request: ModelRequest) -> MockReply:
        call = next(self.calls)
        if call == self.at:
            await self.act()
        if call == 1 and self.at == 2:  # a tool turn first
            return MockReply(tool_calls=(OSLO,))
        return MockReply(ANSWER)

    async def act(self) -> None:
        # Nothing but the same object can reach an in-memory history.
        other = self.store.open(self.session_id) if self.store.shared else self.session
        try:
            if self.action == "undo":
                self.removed = [m.content for m in await resolve(other.undo())]
            elif self.action == "clear":
                await resolve(other.clear())
            else:
                await resolve(other.add_messages([Message("user", "A note from elsewhere.")]))
        finally:
            if other is not self.session:
                await close(other)


async def close(session: Any) -> None:
    for name in ("aclose", "close"):
        closer = getattr(session, name, None)
        if closer is not None:
            await resolve(closer())
            return


async def stored(store: Store, session: Any, session_id: str) -> list[str]:
    """The history as a fresh reader sees it (the same object for in-memory stores)."""
    reader = store.session(session_id) if store.shared else session
    return [m.content for m in await resolve(reader.get_messages())]


async def run_with(store: Store, mode: str, *, at: int, action: str = "undo") -> Any:
    """Run an agent on a session holding :data:`EARLIER` while its model call ``at`` has
    another worker do ``action``; the run's result, or the ``TurnUndoneError`` it raised,
    the worker, and what the session holds afterwards."""
    session_id = unique_name("chat")
    session = store.session(session_id)
    await resolve(
        session.add_messages([Message("user", EARLIER[0]), Message("assistant", EARLIER[1])])
    )
    worker = Worker(store, session, session_id, at, action)
    agent = Agent("A", model="m", provider=MockProvider(handler=worker.reply), tools=[lookup])
    try:
        outcome: Any = await drive(mode, Runner(), agent, message=ASKED, session=session)
    except TurnUndoneError as error:
        assert error.session_id == session_id
        outcome = error
    return outcome, worker, await stored(store, session, session_id)


@pytest.mark.parametrize("mode", MODES)
async def test_an_answer_to_an_undone_question_is_not_stored(mode: str, store: Store) -> None:
    error, worker, history = await run_with(store, mode, at=1)
    assert isinstance(error, TurnUndoneError)
    assert history == EARLIER
    assert worker.removed == [ASKED]
    assert [m.content for m in error.messages] == [ANSWER]
    assert "undo" in str(error) and "not stored" in str(error)


@pytest.mark.parametrize("mode", MODES)
async def test_an_undo_between_a_tool_call_and_the_reply(mode: str, store: Store) -> None:
    error, worker, history = await run_with(store, mode, at=2)
    assert isinstance(error, TurnUndoneError)
    assert history == EARLIER
    if mode == "stream":  # the tool turn was pending too: only the question was stored
        assert worker.removed == [ASKED]
        assert [m.role for m in error.messages] == ["assistant", "tool", "assistant"]
    else:  # the tool turn was stored, and went with the question
        assert worker.removed == [ASKED, "", "Oslo is sunny"]
        assert [m.content for m in error.messages] == [ANSWER]


@pytest.mark.parametrize("mode", MODES)
async def test_a_clear_during_the_turn_refuses_the_answer(mode: str, store: Store) -> None:
    error, _, history = await run_with(store, mode, at=1, action="clear")
    assert isinstance(error, TurnUndoneError)
    assert history == []


@pytest.mark.parametrize("mode", MODES)
async def test_another_workers_append_does_not_refuse_the_answer(mode: str, store: Store) -> None:
    result, _, history = await run_with(store, mode, at=2, action="append")
    assert not isinstance(result, TurnUndoneError)
    assert result.content == ANSWER
    assert history[:3] == [*EARLIER, ASKED]
    assert "A note from elsewhere." in history
    assert history[-1] == ANSWER


@pytest.mark.parametrize("mode", MODES)
async def test_without_an_undo_the_turns_are_stored(mode: str, store: Store) -> None:
    session_id = unique_name("chat")
    session = store.session(session_id)
    calls = count(1)

    def reply(request: ModelRequest) -> MockReply:
        if next(calls) == 1:
            return MockReply(tool_calls=(OSLO,))
        return MockReply("Sunny.")

    agent = Agent("A", model="m", provider=MockProvider(handler=reply), tools=[lookup])
    runner = Runner()
    await drive(mode, runner, agent, message="Weather?", session=session)
    await drive(mode, runner, agent, message="Again?", session=session)
    assert await stored(store, session, session_id) == [
        "Weather?",
        "",
        "Oslo is sunny",
        "Sunny.",
        "Again?",
        "Sunny.",
    ]
