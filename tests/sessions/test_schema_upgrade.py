"""Stores written by the previous release (schema version 1) open, read back whole, and are
upgraded in place on their first write, after which they hold messages with attachments and
reasoning. The fixtures in ``fixtures/v1`` were written by that release: a SQLite file, a
file-store directory, and the raw keys and rows it left in Redis and PostgreSQL.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from aniki import Message, ToolCall
from aniki.messages import Attachment, Reasoning
from aniki.sessions import FileSession, PostgresSession, RedisSession, SQLiteSession
from aniki.sessions._codec import SCHEMA_VERSION
from aniki.sessions.sqlite import _schema as sqlite_schema

from ..servers import postgres_dsn, redis_url

FIXTURES = Path(__file__).parent / "fixtures" / "v1"

WRITTEN = {
    "alpha": (
        Message("user", "What is 2 + 3?"),
        Message(
            "assistant",
            tool_calls=(ToolCall(id="call_1", name="add", arguments='{"a": 2, "b": 3}'),),
        ),
        Message("tool", "5", tool_call_id="call_1"),
        Message("assistant", "2 + 3 = 5 — «ok» ✓"),
    ),
    "beta": (Message("system", "Be brief."), Message("user", "Hi")),
}
SUMMARY = {"text": "adding numbers", "covers": 2}

PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489")
NEW = (
    Message("user", "", attachments=(Attachment("image/png", data=PNG, name="dot.png"),)),
    Message(
        "assistant",
        "A single pixel.",
        reasoning=(Reasoning("It is 1 x 1.", signature="sig-1"), Reasoning(redacted="opaque")),
    ),
)

Opener = Callable[[str], Any]


@pytest.fixture
def sqlite_store(tmp_path: Path) -> tuple[Opener, Callable[[], int]]:
    path = tmp_path / "chats.db"
    shutil.copyfile(FIXTURES / "chats.db", path)

    def version() -> int:
        with sqlite3.connect(path) as conn:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])

    assert version() == 1
    return (lambda sid: SQLiteSession(sid, path)), version


@pytest.fixture
def file_store(tmp_path: Path) -> tuple[Opener, Callable[[], int]]:
    directory = tmp_path / "files"
    shutil.copytree(FIXTURES / "files", directory)

    def version() -> int:
        first = (directory / "alpha.jsonl").read_bytes().split(b"\n", 1)[0]
        return int(json.loads(first)["version"])

    assert version() == 1
    return (lambda sid: FileSession(sid, directory)), version


@pytest.fixture
def redis_store() -> Iterator[tuple[Opener, Callable[[], int]]]:
    import redis

    client = redis.Redis.from_url(redis_url())
    prefix = f"upgrade-{uuid.uuid4().hex[:8]}:"
    for name, key in json.loads((FIXTURES / "redis.json").read_text()).items():
        full = prefix + name
        if key["type"] == "list":
            client.rpush(full, *key["value"])
        elif key["type"] == "hash":
            client.hset(full, mapping=key["value"])
        else:
            client.zadd(full, dict(key["value"]))

    def version() -> int:
        return int(client.hget(prefix + "{alpha}:info", "v") or 0)

    assert version() == 1
    try:
        yield (lambda sid: RedisSession(sid, redis_url(), prefix=prefix)), version
    finally:
        for key in client.scan_iter(prefix + "*"):
            client.delete(key)
        client.close()


@pytest.fixture
def postgres_store() -> Iterator[tuple[Opener, Callable[[], int]]]:
    import psycopg

    table = f"upgrade_{uuid.uuid4().hex[:8]}"
    rows = json.loads((FIXTURES / "postgres.json").read_text())
    with psycopg.connect(postgres_dsn(), autocommit=True) as conn:
        # The version-1 layout, as that release created it.
        conn.execute(
            f'CREATE TABLE "{table}_schema" (id smallint PRIMARY KEY CHECK (id = 1),'
            " version integer NOT NULL)"
        )
        conn.execute(
            f'CREATE TABLE "{table}" (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,'
            " session_id text NOT NULL, message text NOT NULL,"
            " created_at timestamptz NOT NULL DEFAULT now())"
        )
        conn.execute(f'CREATE INDEX "{table}_by_session" ON "{table}" (session_id, seq)')
        conn.execute(
            f'CREATE TABLE "{table}_sessions" (session_id text PRIMARY KEY,'
            " generation bigint GENERATED ALWAYS AS IDENTITY,"
            " message_count bigint NOT NULL, updated_at timestamptz NOT NULL)"
        )
        conn.execute(
            f'CREATE TABLE "{table}_meta" (session_id text NOT NULL, key text NOT NULL,'
            " value text NOT NULL, PRIMARY KEY (session_id, key))"
        )
        for row in rows["_messages"]:
            conn.execute(
                f'INSERT INTO "{table}" (seq, session_id, message, created_at)'
                " OVERRIDING SYSTEM VALUE VALUES (%s, %s, %s, %s)",
                row,
            )
        for row in rows["_sessions"]:
            conn.execute(
                f'INSERT INTO "{table}_sessions" (session_id, generation, message_count,'
                " updated_at) OVERRIDING SYSTEM VALUE VALUES (%s, %s, %s, %s)",
                row,
            )
        for suffix in ("", "_sessions"):
            conn.execute(
                f"SELECT setval(pg_get_serial_sequence('\"{table}{suffix}\"', %s), 100)",
                ("seq" if not suffix else "generation",),
            )
        for row in rows["_meta"]:
            conn.execute(f'INSERT INTO "{table}_meta" VALUES (%s, %s, %s)', row)
        for row in rows["_schema"]:
            conn.execute(f'INSERT INTO "{table}_schema" VALUES (%s, %s)', row)

    def version() -> int:
        with psycopg.connect(postgres_dsn(), autocommit=True) as conn:
            found = conn.execute(f'SELECT version FROM "{table}_schema"').fetchone()
            return int(found[0]) if found else 0

    assert version() == 1
    try:
        yield (lambda sid: PostgresSession(sid, postgres_dsn(), table=table)), version
    finally:
        with psycopg.connect(postgres_dsn(), autocommit=True) as conn:
            for suffix in ("", "_sessions", "_meta", "_schema"):
                conn.execute(f'DROP TABLE IF EXISTS "{table}{suffix}"')


@pytest.fixture(params=["sqlite", "file", "redis", "postgres"])
def old_store(request: pytest.FixtureRequest) -> tuple[Opener, Callable[[], int]]:
    store: tuple[Opener, Callable[[], int]] = request.getfixturevalue(f"{request.param}_store")
    return store


def _close(session: Any) -> None:
    close = getattr(session, "close", None)
    if callable(close):
        close()


def test_a_version_1_store_reads_whole_and_is_upgraded_on_its_first_write(
    old_store: tuple[Opener, Callable[[], int]],
) -> None:
    open_session, version = old_store
    for session_id, messages in WRITTEN.items():
        session = open_session(session_id)
        assert session.get_messages() == messages
        assert session.get_messages(limit=1) == messages[-1:]
        _close(session)
    alpha = open_session("alpha")
    assert alpha.get_meta("aniki.summary") == SUMMARY
    alpha.add_messages(NEW)
    _close(alpha)
    # The message format's version, or a later one where a store's layout changed since
    # (SQLite: 4, its sessions' info and attachments apart; PostgreSQL: 3, attachments apart).
    assert version() >= SCHEMA_VERSION
    again = open_session("alpha")  # a new instance reads it all from the store
    stored = again.get_messages()
    assert stored == WRITTEN["alpha"] + NEW
    assert stored[-2].attachments[0].data == PNG
    assert stored[-1].reasoning == NEW[1].reasoning
    assert again.get_meta("aniki.summary") == SUMMARY
    _close(again)
    beta = open_session("beta")
    assert beta.get_messages() == WRITTEN["beta"]  # untouched by the upgrade
    _close(beta)


def test_a_version_1_sqlite_file_migrates_on_open_keeping_every_row(
    sqlite_store: tuple[Opener, Callable[[], int]], tmp_path: Path
) -> None:
    open_session, version = sqlite_store
    tables = ("aniki_messages", "aniki_session_meta", "aniki_sessions")
    with sqlite3.connect(tmp_path / "chats.db") as conn:
        before = {table: conn.execute(f"SELECT * FROM {table}").fetchall() for table in tables}
    session = open_session("beta")
    assert session.get_messages() == WRITTEN["beta"]
    session.close()
    assert version() == sqlite_schema.schema_version() == 6
    with sqlite3.connect(tmp_path / "chats.db") as conn:
        for table in tables[:2]:
            assert conn.execute(f"SELECT * FROM {table}").fetchall() == before[table]
        # Version 3 added columns to the sessions table (see test_sqlite_catalog.py).
        rows = conn.execute("SELECT number, id, generation FROM aniki_sessions").fetchall()
        assert rows == before["aniki_sessions"]
