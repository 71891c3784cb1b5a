"""fork() and undo() of PostgresSession and AsyncPostgresSession against the real server:
what they copy and remove, what other instances see, what a refusal leaves, and the tables'
schema version. The races with other writers are in test_postgres_edits_races.py."""

from __future__ import annotations

from typing import Any

import pytest

from aniki import Message, SchemaVersionError, UserError
from aniki.sessions import open_store
from aniki.sessions.postgres import AsyncPostgresSession, PostgresSession
from aniki.sessions.postgres import _core as _postgres_core
from aniki.sessions.postgres import _edits as _postgres_edits

from ..servers import postgres_dsn
from . import test_postgres
from .stores import Opener

pytestmark = pytest.mark.postgres

table = test_postgres.table  # the fixtures: a fresh table family, and a sync or async opener
store = test_postgres.store
admin = test_postgres.admin

CLAIM = "aniki.summary.claim"


def fork(store: Opener, session: Any, new_id: str, **options: Any) -> Any:
    """``session.fork(new_id, **options)``, awaited if need be; closed with the store's."""
    child = store.call(session, "fork", new_id, **options)
    store._opened.append(child)
    return child


def turn(tag: str, *replies: str) -> list[Message]:
    """A user message ``tag`` and the assistant's ``replies`` to it."""
    return [Message("user", tag), *(Message("assistant", reply) for reply in replies)]


def table_rows(table: str) -> list[list[tuple[object, ...]]]:
    """Everything the session tables hold, in a fixed order (generations and times too)."""
    return [
        admin(f'SELECT session_id, seq, message, created_at FROM "{table}" ORDER BY seq'),
        admin(f'SELECT * FROM "{table}_sessions" ORDER BY session_id'),
        admin(f'SELECT * FROM "{table}_meta" ORDER BY session_id, key'),
    ]


def _ids(messages: Any) -> list[tuple[str | None, str]]:
    return [(m.id, m.content) for m in messages]


def _generation(table: str, session_id: str) -> object:
    rows = admin(f'SELECT generation FROM "{table}_sessions" WHERE session_id = %s', session_id)
    return rows[0][0] if rows else None


# --- fork ---------------------------------------------------------------------------------


def test_fork_copies_meta_but_the_claim_and_replaces_the_targets(store: Opener) -> None:
    source = store.open("source")
    store.driver.add_messages(source, turn("q", "a"))
    values = {"aniki.summary": {"covered": 1}, "aniki.cut": 7, CLAIM: {"owner": "r1"}}
    for key, value in values.items():
        store.call(source, "set_meta", key, value)
    target = store.open("target")  # meta but no messages: a fork may go there
    store.call(target, "set_meta", "stale", True)
    store.call(target, "set_meta", "aniki.summary", "old")
    child = fork(store, source, "target")
    assert store.call(child, "get_meta", "aniki.summary") == {"covered": 1}
    assert store.call(child, "get_meta", "aniki.cut") == 7
    assert store.call(child, "get_meta", CLAIM) is None
    assert store.call(child, "get_meta", "stale") is None  # replaced, not merged
    for key, value in values.items():  # the source keeps all of its own
        assert store.call(source, "get_meta", key) == value


def test_a_fork_is_opened_as_its_source_was(table: str) -> None:
    from psycopg_pool import ConnectionPool

    with ConnectionPool(postgres_dsn(), min_size=1, max_size=2, open=True) as pool:
        source = PostgresSession("s", pool=pool, table=table, timeout=7)
        source.add_message({"role": "user", "content": "hi"})
        child = source.fork("c")
        assert type(child) is PostgresSession and child.id == "c"
        assert (child._pool, child._table, child._timeout) == (pool, table, 7)
        assert [m.content for m in child.get_messages()] == ["hi"]
    with PostgresSession("s", postgres_dsn(), table=table) as source, source.fork("d") as child:
        assert child._pool is None and child._dsn == source._dsn
        assert child.get_messages() == source.get_messages()
        assert child._conn is not source._conn


async def test_a_fork_of_an_asynchronous_stores_session_shares_its_pool(table: str) -> None:
    async with open_store(postgres_dsn(), asynchronous=True, table=table) as opened:
        source = opened.session("s")
        await source.add_message({"role": "user", "content": "hi"})
        child = await source.fork("c")  # type: ignore[attr-defined]
        assert type(child) is AsyncPostgresSession
        assert child._pool is source._pool  # type: ignore[attr-defined]
        assert [m.content for m in await child.get_messages()] == ["hi"]


def test_fork_of_an_empty_session_copies_its_meta_and_is_listed_empty(store: Opener) -> None:
    # A fork is the target's first write (as in memory): it is listed, holding no message.
    source = store.open("empty")
    store.call(source, "set_meta", "note", "kept")
    child = fork(store, source, "child")
    assert store.read(child) == []
    assert store.call(child, "get_meta", "note") == "kept"
    assert [(i.id, i.message_count) for i in store.call(child, "list_sessions")] == [("child", 0)]
    with pytest.raises(UserError, match="no message with id"):
        fork(store, source, "other", upto="x")


def test_fork_upto_finds_a_message_many_pages_back(
    store: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_postgres_edits, "FIRST_PAGE", 2)
    monkeypatch.setattr(_postgres_edits, "LAST_PAGE", 4)
    source = store.open("long")
    store.driver.add_messages(source, [*turn("q", *(f"a{i}" for i in range(30)))])
    stored = store.driver.get_messages(source)
    child = fork(store, source, "early", upto=stored[1].id)
    assert _ids(store.driver.get_messages(child)) == _ids(stored[:2])
    (listed,) = [info for info in store.call(child, "list_sessions") if info.id == "early"]
    assert listed.message_count == 2


# --- undo ---------------------------------------------------------------------------------


def test_other_instances_see_an_undo_even_once_the_count_is_back(store: Opener, table: str) -> None:
    first, second, third = store.open("s"), store.open("s"), store.open("s")
    store.driver.add_messages(first, [*turn("u1", "a1"), *turn("u2", "a2")])
    for session in (first, second, third):
        assert store.read(session) == ["u1", "a1", "u2", "a2"]  # each one's cache is full
    before = _generation(table, "s")
    assert store.read(first)[-2:] == ["u2", "a2"]
    assert [m.content for m in store.call(first, "undo")] == ["u2", "a2"]
    assert _generation(table, "s") not in (None, before)
    # Another instance brings the count back to 4: with the generation unchanged, the others'
    # caches would pass for current and keep the removed turn.
    store.driver.add_messages(first, turn("u3", "a3"))
    assert store.read(second) == ["u1", "a1", "u3", "a3"]
    store.add(third, "u4")  # an append on a stale cache, then a read
    assert store.read(third) == ["u1", "a1", "u3", "a3", "u4"]
    fused = store.run(second._add_then_get([Message("user", "u5")]))
    assert [m.content for m in fused] == ["u1", "a1", "u3", "a3", "u4", "u5"]


def test_an_undo_that_empties_a_session_keeps_it_listed_empty(store: Opener, table: str) -> None:
    # Its info (and created_at) outlive the messages, as in memory; only a clear ends it.
    session = store.open("s")
    store.driver.add_messages(session, turn("only", "reply"))
    store.call(session, "set_info", title="kept")
    store.call(session, "set_meta", "kept", 1)
    assert [m.content for m in store.call(session, "undo")] == ["only", "reply"]
    (listed,) = store.call(session, "list_sessions")
    assert (listed.id, listed.message_count, listed.title) == ("s", 0, "kept")
    assert admin(f'SELECT message_count FROM "{table}_sessions"') == [(0,)]
    assert store.call(session, "get_meta", "kept") == 1  # meta is kept
    store.add(session, "again")
    assert store.read(store.open("s")) == ["again"]


def test_undo_walks_back_over_a_long_turn_page_by_page(
    store: Opener, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_postgres_edits, "FIRST_PAGE", 2)
    monkeypatch.setattr(_postgres_edits, "LAST_PAGE", 4)
    session = store.open("s")
    long_turn = turn("q2", *(f"step {i}" for i in range(25)))
    store.driver.add_messages(session, [*turn("q1", "a1"), *long_turn])
    assert store.call(session, "undo") == tuple(long_turn)
    assert store.read(store.open("s")) == ["q1", "a1"]
    (listed,) = store.call(session, "list_sessions")
    assert listed.message_count == 2
    no_user = store.open("no user")
    store.driver.add_messages(no_user, [Message("assistant", f"{i}") for i in range(11)])
    before = table_rows(table)
    assert store.call(no_user, "undo") == ()
    assert table_rows(table) == before  # not even a new generation


# --- refusals ---------------------------------------------------------------------------


def test_refusals_leave_every_table_untouched(store: Opener, table: str) -> None:
    source = store.open("source")
    store.driver.add_messages(source, turn("q", "a"))
    store.call(source, "set_meta", "summary", "s")
    store.add(store.open("taken"), "already here")
    store.call(store.open("meta only"), "set_meta", "k", "v")
    before = table_rows(table)
    refused: list[tuple[str, dict[str, Any]]] = [
        ("source", {}),
        ("taken", {}),
        ("meta only", {"upto": "no-such-id"}),
        ("fresh", {"upto": "no-such-id"}),
        ("fresh", {"upto": 5}),
        ("bad\x00id", {}),
        ("", {}),
    ]
    for new_id, options in refused:
        with pytest.raises(UserError):
            fork(store, source, new_id, **options)
        assert table_rows(table) == before, (new_id, options)
    assert store.read(store.open("fresh")) == []
    assert store.call(store.open("meta only"), "get_meta", "k") == "v"


def test_a_newer_schema_is_refused_by_fork_and_undo(
    store: Opener, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.driver.add_messages(store.open("s"), turn("q", "a"))
    admin(f'UPDATE "{table}_schema" SET version = 99')
    before = table_rows(table)
    monkeypatch.setattr(_postgres_core, "_READY", set())  # as in a process started afterwards
    fresh = store.open("s")
    with pytest.raises(SchemaVersionError, match="upgrade aniki"):
        store.call(fresh, "fork", "child")
    with pytest.raises(SchemaVersionError, match="upgrade aniki"):
        store.call(fresh, "undo")
    assert table_rows(table) == before
