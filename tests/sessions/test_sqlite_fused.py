"""A SQLite session appends and reads back in one statement when it can: the append says the
key it took and the session's generation, and when that key follows the history this object
has read, under the same generation, nobody else wrote or removed a message in between, so
the history is what it read plus the message. Else it reads, as before. A read after a write
keeps the connection's busy timeout at 0 (a WAL read waits for no writer), and the rare read
that meets a lock then runs again, waiting."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from aniki import Agent, Message, Runner
from aniki.sessions import AsyncSQLiteSession, SQLiteSession
from aniki.sessions._capabilities import capabilities_of
from aniki.sessions._guard import HistoryMoved, TurnGuard, guarding
from aniki.sessions.sqlite import _reads
from aniki.sessions.sqlite import session as sqlite_session
from aniki.testing import MockProvider


def contents(messages: Any) -> list[str]:
    return [m.content for m in messages]


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times a SQLite session reads its rows after a position, from now on."""
    counted: list[int] = []
    original = _reads.read_after

    def read_after(*args: Any) -> Any:
        counted.append(1)
        return original(*args)

    monkeypatch.setattr(sqlite_session, "read_after", read_after)
    return counted


def test_an_append_onto_what_it_read_reads_nothing(tmp_path: Path, reads: list[int]) -> None:
    session = SQLiteSession("chat", tmp_path / "f.db")
    session.add_message(Message("user", "a"))
    assert contents(session.get_messages()) == ["a"]
    reads.clear()
    for text in "bcd":
        view = session._add_then_get([Message("user", text)])
    assert contents(view) == ["a", "b", "c", "d"] and not reads
    assert session._add_then_get([Message("user", "e")], 2) == tuple(session.get_messages()[-2:])
    fresh = SQLiteSession("chat", tmp_path / "f.db").get_messages()
    assert fresh == session.get_messages()  # the same messages, ids and times


def test_another_writer_in_between_is_read(tmp_path: Path, reads: list[int]) -> None:
    session, other = (SQLiteSession("chat", tmp_path / "f.db") for _ in range(2))
    session._add_then_get([Message("user", "a")])
    session.get_messages()
    other.add_message(Message("assistant", "b"))
    reads.clear()
    assert contents(session._add_then_get([Message("user", "c")])) == ["a", "b", "c"]
    assert reads == [1]


@pytest.mark.parametrize("change", ["undo", "clear"])
def test_a_removal_in_between_is_read(tmp_path: Path, change: str) -> None:
    session, other = (SQLiteSession("chat", tmp_path / "f.db") for _ in range(2))
    for text in ("q1", "a1", "q2", "a2"):
        session.add_message(Message("user" if text[0] == "q" else "assistant", text))
    session.get_messages()
    if change == "undo":
        other.undo()
        other.add_messages([Message("user", "q2'"), Message("assistant", "a2'")])
        expected = ["q1", "a1", "q2'", "a2'", "q3"]
    else:
        other.clear()
        for text in ("x", "y", "z", "w"):  # as many rows as before: the keys start over
            other.add_message(Message("user", text))
        expected = ["x", "y", "z", "w", "q3"]
    # The next key may follow the old position; the generation tells the removal.
    assert contents(session._add_then_get([Message("user", "q3")])) == expected
    assert contents(SQLiteSession("chat", tmp_path / "f.db").get_messages()) == expected


def test_a_guarded_append_after_an_undo_writes_nothing(tmp_path: Path) -> None:
    session, other = (SQLiteSession("chat", tmp_path / "f.db") for _ in range(2))
    session.get_messages()
    guard = TurnGuard()
    with guarding(guard):
        session._add_then_get([Message("user", "question")])  # the run's first write
    other.undo()
    with guarding(guard), pytest.raises(HistoryMoved):
        session._add_then_get([Message("assistant", "answer")])
    assert SQLiteSession("chat", tmp_path / "f.db").get_messages() == ()


def test_a_runs_turns_take_one_statement_each_store_call(tmp_path: Path, reads: list[int]) -> None:
    session = SQLiteSession("chat", tmp_path / "f.db")
    agent = Agent("A", model="m", provider=MockProvider(handler=lambda request: "ok"))

    async def turns() -> None:
        for n in range(4):
            await Runner().run(agent, message=f"q{n}", session=session)

    asyncio.run(turns())
    # The first append reads (nothing read yet); then every append follows what was read.
    assert len(reads) == 1
    assert contents(SQLiteSession("chat", tmp_path / "f.db").get_messages()) == [
        text for n in range(4) for text in (f"q{n}", "ok")
    ]


class _Busy:
    """A connection whose first statement meets a lock, as a read can during a recovery."""

    def __init__(self, real: sqlite3.Connection) -> None:
        self.real, self.failed = real, False

    def execute(self, *args: Any) -> Any:
        if not self.failed:
            self.failed = True
            error = sqlite3.OperationalError("database is locked")
            error.sqlite_errorcode = 5  # type: ignore[attr-defined]  # SQLITE_BUSY
            raise error
        return self.real.execute(*args)


def test_a_quick_read_that_meets_a_lock_runs_again_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = SQLiteSession("chat", tmp_path / "f.db")
    session.add_message(Message("user", "a"))
    session.get_messages()
    session._try_now(lambda: session.add_message(Message("user", "b")))  # writes, stays quick
    db = session._database
    assert db._quick  # the busy timeout is 0, and no call is tried now
    busy = _Busy(db._conn)  # type: ignore[arg-type]
    monkeypatch.setattr(type(db), "reader", property(lambda self: busy))
    _, rows, _ = _reads.read_after(db, "chat", None, 0)
    assert len(rows) == 2 and busy.failed
    assert not db._quick  # it waits for locks again
    assert db.conn.execute("PRAGMA busy_timeout").fetchone()[0] > 0


class _Audited(SQLiteSession):
    writes: list[int]

    def add_messages(self, messages: Any) -> None:
        self.writes.append(len(list(messages)))
        super().add_messages(messages)


class _AuditedAsync(AsyncSQLiteSession):
    writes: list[int]

    async def add_messages(self, messages: Any) -> None:
        self.writes.append(len(list(messages)))
        await super().add_messages(messages)


@pytest.mark.parametrize("cls", [_Audited, _AuditedAsync])
def test_a_subclass_that_replaces_its_appends_is_called(tmp_path: Path, cls: Any) -> None:
    session = cls("chat", tmp_path / "f.db")
    session.writes = []
    assert capabilities_of(session).add_then_get is None
    assert capabilities_of(cls.__mro__[1]("other", tmp_path / "f.db")).add_then_get is not None
    agent = Agent("A", model="m", provider=MockProvider(handler=lambda request: "ok"))
    asyncio.run(Runner().run(agent, message="hi", session=session))
    assert session.writes == [1, 1]  # the question, then the answer
