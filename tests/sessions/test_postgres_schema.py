"""The layout version of a PostgreSQL store (against the real server): a store of layout 2
(attachments inline, no blob tables) opens, reads unchanged and is stamped 3, also when
several processes open it at once; a store stamped with a version newer than this aniki's is
refused with an upgrade hint, and an aniki of layout 2 refuses a store of layout 3."""

from __future__ import annotations

import threading
from datetime import datetime, timezone

import pytest

from aniki import Message, SchemaVersionError
from aniki.messages import Attachment
from aniki.sessions import open_store
from aniki.sessions._codec import encode_message
from aniki.sessions.base import SessionInfo
from aniki.sessions.postgres import PostgresSession
from aniki.sessions.postgres import _core as _postgres_core
from aniki.sessions.postgres import _schema as _postgres_schema
from aniki.sessions.postgres._schema import LAYOUT_VERSION

from ..servers import postgres_dsn
from . import test_postgres

pytestmark = pytest.mark.postgres

table = test_postgres.table  # the fixture: a fresh table family, dropped afterwards
admin = test_postgres.admin

PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452")
WHEN = datetime(2026, 5, 1, 9, tzinfo=timezone.utc)
OLD = (
    Message("user", "what is this?", attachments=(Attachment("image/png", data=PNG, name="a"),)),
    Message("assistant", "a header"),
)

# Layout 2 as the release before attachments apart made it: info columns, no blob tables.
_LAYOUT_2 = (
    'CREATE TABLE "{t}_schema" (id smallint PRIMARY KEY CHECK (id = 1), version integer NOT NULL)',
    'CREATE TABLE "{t}" (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,'
    " session_id text NOT NULL, message text NOT NULL,"
    " created_at timestamptz NOT NULL DEFAULT now())",
    'CREATE INDEX "{t}_by_session" ON "{t}" (session_id, seq)',
    'CREATE TABLE "{t}_sessions" (session_id text PRIMARY KEY,'
    " generation bigint GENERATED ALWAYS AS IDENTITY,"
    " message_count bigint NOT NULL, updated_at timestamptz NOT NULL,"
    " created_at timestamptz NOT NULL DEFAULT now(), title text, owner text,"
    " tags text[] NOT NULL DEFAULT '{}')",
    'CREATE TABLE "{t}_meta" (session_id text NOT NULL, key text NOT NULL,'
    " value text NOT NULL, PRIMARY KEY (session_id, key))",
    'CREATE INDEX "{t}_by_time" ON "{t}_sessions" (updated_at DESC, session_id COLLATE "C")',
    'CREATE INDEX "{t}_by_owner" ON "{t}_sessions"'
    ' (owner, updated_at DESC, session_id COLLATE "C") WHERE owner IS NOT NULL',
    'CREATE INDEX "{t}_by_tag" ON "{t}_sessions" USING gin (tags) WHERE tags <> \'{}\'',
    'INSERT INTO "{t}_schema" VALUES (1, 2)',
)


def _layout_2_store(table: str) -> None:
    """``table`` as an aniki of layout 2 left it: session "a" holding ``OLD`` (its image
    inline), with info and meta."""
    for statement in _LAYOUT_2:
        admin(statement.replace("{t}", table))
    for message in OLD:
        admin(
            f'INSERT INTO "{table}" (session_id, message, created_at) VALUES (%s, %s, %s)',
            "a",
            encode_message(message),
            WHEN,
        )
    admin(
        f'INSERT INTO "{table}_sessions" (session_id, message_count, updated_at, created_at,'
        " title, owner, tags) VALUES ('a', 2, %s, %s, 'trip', 'u1', '{x}')",
        WHEN,
        WHEN,
    )
    admin(f"INSERT INTO \"{table}_meta\" VALUES ('a', 'note', '\"kept\"')")


def _version(table: str) -> int:
    ((version,),) = admin(f'SELECT version FROM "{table}_schema"')
    assert isinstance(version, int)
    return version


def _blob_tables(table: str) -> tuple[object, ...]:
    return admin(
        "SELECT to_regclass(%s), to_regclass(%s)", f'"{table}_blobs"', f'"{table}_blob_refs"'
    )[0]


def test_a_layout_2_store_reads_unchanged_and_is_stamped_3(
    table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _layout_2_store(table)
    rows = admin(f'SELECT seq, session_id, message FROM "{table}" ORDER BY seq')
    monkeypatch.setattr(_postgres_core, "_READY", set())  # as in a process started afterwards
    with open_store(postgres_dsn(), table=table) as store:
        session = store.session("a")
        assert session.get_messages() == OLD
        assert session.get_messages()[0].attachments[0].data == PNG
        assert session.get_meta("note") == "kept"
        expected = SessionInfo("a", 2, WHEN, "trip", "u1", ("x",), WHEN)
        assert session.info() == expected
        assert store.list_sessions(owner="u1") == [expected]
        assert _version(table) == LAYOUT_VERSION == 3
        assert None not in _blob_tables(table)
        # The old records stay as they were; a new image is stored apart.
        assert admin(f'SELECT seq, session_id, message FROM "{table}" ORDER BY seq') == rows
        session.add_message(Message("user", "and this?", attachments=OLD[0].attachments))
        assert admin(f'SELECT count(*) FROM "{table}_blobs"') == [(1,)]
        (last,) = admin(f'SELECT message FROM "{table}" ORDER BY seq DESC LIMIT 1')[0]
        assert isinstance(last, str) and '"blob":' in last and '"data":' not in last
    with PostgresSession("a", postgres_dsn(), table=table) as again:
        messages = again.get_messages()
        assert messages[:2] == OLD and messages[2].attachments[0].data == PNG


def test_a_layout_2_store_opened_by_many_at_once_is_upgraded_once(
    table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _layout_2_store(table)
    monkeypatch.setattr(_postgres_core, "_READY", set())
    barrier, errors, read = threading.Barrier(6), [], []

    def first_use(n: int) -> None:
        with PostgresSession("a" if n % 2 else f"new {n}", postgres_dsn(), table=table) as s:
            try:
                barrier.wait()
                if n % 2:
                    read.append(s.get_messages())
                else:
                    s.add_message(Message("user", f"{n}", attachments=OLD[0].attachments))
            except Exception as exc:
                errors.append(exc)

    threads = [threading.Thread(target=first_use, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert read == [OLD] * 3
    assert _version(table) == LAYOUT_VERSION
    assert admin(f'SELECT count(*) FROM "{table}_blob_refs"') == [(3,)]


def test_a_store_of_a_newer_layout_is_refused_with_an_upgrade_hint(
    table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with PostgresSession("a", postgres_dsn(), table=table) as session:
        session.add_message(Message("user", "kept"))
    admin(f'UPDATE "{table}_schema" SET version = %s', LAYOUT_VERSION + 1)
    monkeypatch.setattr(_postgres_core, "_READY", set())
    with PostgresSession("a", postgres_dsn(), table=table) as session:
        hint = "schema version 4, newer than this aniki's 3; upgrade aniki"
        with pytest.raises(SchemaVersionError, match=hint):
            session.get_messages()
        with pytest.raises(SchemaVersionError, match=hint):
            session.add_message(Message("user", "refused"))
    assert _version(table) == 4
    assert admin(f'SELECT count(*) FROM "{table}"') == [(1,)]


def test_an_aniki_of_layout_2_refuses_a_store_of_layout_3(
    table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the version is for: an aniki that knows layout 2 would take a record naming a
    # blob for damage; the stamp makes it ask for an upgrade first.
    with PostgresSession("a", postgres_dsn(), table=table) as session:
        session.add_message(OLD[0])
    monkeypatch.setattr(_postgres_core, "_READY", set())
    monkeypatch.setattr(_postgres_schema, "LAYOUT_VERSION", 2)
    session = PostgresSession("a", postgres_dsn(), table=table)
    with session, pytest.raises(SchemaVersionError, match="version 3, newer than this aniki's 2"):
        session.get_messages()
    assert _version(table) == 3
