"""Replacing a whole history (``aniki sessions import --replace``) in one transaction.

SQLite, Redis and PostgreSQL sessions offer ``_replace(messages)``: a reader sees the old
history or the new one, never an empty or half-written one, and derived state goes with the
old history.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from aniki import Message
from aniki.cli._stores import replace_messages
from aniki.sessions.sqlite import SQLiteSession

from ..servers import (
    delete_redis_prefix,
    drop_postgres_tables,
    postgres_dsn,
    redis_url,
    unique_name,
)

Opener = Callable[[str], Any]


def _store(kind: str, tmp_path: Path) -> tuple[Opener, Callable[[], None]]:
    """How to open a session of ``kind``, and how to remove what the test stored."""
    if kind == "sqlite":
        path = tmp_path / "replace.db"
        return (lambda session_id: SQLiteSession(session_id, path)), (lambda: None)
    if kind == "redis":
        from aniki.sessions.redis import RedisSession

        url, prefix = redis_url(), unique_name("replace") + ":"
        return (
            lambda session_id: RedisSession(session_id, url, prefix=prefix),
            lambda: delete_redis_prefix(prefix),
        )
    from aniki.sessions.postgres import PostgresSession

    dsn, table = postgres_dsn(), unique_name("replace")
    return (
        lambda session_id: PostgresSession(session_id, dsn, table=table),
        lambda: drop_postgres_tables(table),
    )


@pytest.fixture(params=["sqlite", "redis", "postgres"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    make, cleanup = _store(request.param, tmp_path)
    opened: list[Any] = []

    def open_session(session_id: str) -> Any:
        session = make(session_id)
        opened.append(session)
        return session

    yield open_session
    for session in opened:
        session.close()
    cleanup()


def texts(prefix: str, count: int) -> list[Message]:
    return [Message(role="user", content=f"{prefix} {i}") for i in range(count)]


def test_replace_leaves_the_new_history_alone_and_drops_derived_state(opener: Opener) -> None:
    session, other = opener("r"), opener("r")
    session.add_messages(texts("old", 3))
    session.set_meta("summary", "of the old history")
    assert len(other.get_messages()) == 3  # the other instance has the old history cached
    session._replace(texts("new", 2))
    assert session.get_messages() == tuple(texts("new", 2))
    assert other.get_messages() == tuple(texts("new", 2))
    assert other.get_meta("summary") is None
    session._replace([])
    assert opener("r").get_messages() == ()
    session.add_message(Message(role="user", content="after"))
    assert [m.content for m in other.get_messages()] == ["after"]


def test_a_reader_sees_the_old_history_or_the_new_one_never_neither(opener: Opener) -> None:
    old, new = texts("old", 40), texts("new", 30)
    writer = opener("busy")
    writer.add_messages(old)
    seen: set[int] = set()
    done = threading.Event()
    errors: list[BaseException] = []

    def read() -> None:
        reader = opener("busy")
        try:
            while not done.is_set():
                history = reader.get_messages()
                seen.add(len(history))
                assert history in (tuple(old), tuple(new)), f"saw {len(history)} messages"
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=read)
    thread.start()
    try:
        for _ in range(15):
            writer._replace(new)
            writer._replace(old)
    finally:
        done.set()
        thread.join(10)
    assert errors == []
    assert seen <= {40, 30}


def test_the_cli_replaces_through_it(opener: Opener, monkeypatch: pytest.MonkeyPatch) -> None:
    session = opener("cli")
    session.add_messages(texts("old", 2))
    calls: list[int] = []
    monkeypatch.setattr(
        "aniki.cli._stores.open_store_session", lambda url, session_id: opener(session_id)
    )
    original = type(session)._replace

    def counted(self: Any, messages: Any) -> None:
        calls.append(len(messages))
        original(self, messages)

    monkeypatch.setattr(type(session), "_replace", counted)
    replace_messages("unused", "cli", texts("new", 3))
    assert calls == [3]
    assert opener("cli").get_messages() == tuple(texts("new", 3))
