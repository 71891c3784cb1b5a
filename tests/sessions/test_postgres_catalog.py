"""Conversations as an app keeps them, on PostgreSQL (against the real server): every write
keeps a session's count and times in step, a store of the layout before info is brought up
to date once, the listing follows the shared rule and is served by indexes, and a prune works
in batches, each its own transaction. Prunes racing writers: test_postgres_catalog_races.py."""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from aniki import Message, StoreUnavailableError, UserError
from aniki.sessions import open_store
from aniki.sessions._catalog import Listing, check_listing, select
from aniki.sessions._codec import encode_message
from aniki.sessions.base import SessionInfo
from aniki.sessions.postgres import PostgresSession
from aniki.sessions.postgres import _catalog as _postgres_catalog
from aniki.sessions.postgres import _core as _postgres_core
from aniki.sessions.postgres._flow import Query
from aniki.sessions.postgres._sql import render

from ..servers import postgres_dsn
from . import test_postgres
from .stores import Opener

pytestmark = pytest.mark.postgres

table = test_postgres.table  # the fixtures: a fresh table family, and a sync or async opener
store = test_postgres.store
admin = test_postgres.admin

HOUR = timedelta(hours=1)


def info(store: Opener, session: Any) -> SessionInfo:
    found: SessionInfo = store.call(session, "info")
    return found


def age(table: str, when: datetime, *session_ids: str) -> None:
    """Make the sessions (every one when none are named) first and last written at ``when``."""
    where, chosen = (
        (" WHERE session_id = ANY(%s)", [list(session_ids)]) if session_ids else ("", [])
    )
    admin(
        f'UPDATE "{table}_sessions" SET updated_at = %s, created_at = %s{where}',
        when,
        when,
        *chosen,
    )


@pytest.fixture
def catalog(store: Opener, table: str) -> Iterator[Any]:
    """An ``open_store`` store over ``table``, sync or async as ``store`` is."""
    opened = open_store(postgres_dsn(), asynchronous=store.is_async, table=table)
    if store.is_async:
        store.run(opened.open())
    yield opened
    store.run(opened.aclose() if store.is_async else opened.close())


def recorded(monkeypatch: pytest.MonkeyPatch, name: str) -> list[Query]:
    """The steps of every ``_postgres_catalog.<name>`` flow run from now on."""
    steps: list[Query] = []
    original = getattr(_postgres_catalog, name)

    def wrapper(*args: Any) -> Generator[Query, Any, Any]:
        flow, reply = original(*args), None
        try:
            while True:
                step = flow.send(reply)
                steps.append(step)
                reply = yield step
        except StopIteration as done:
            return done.value

    monkeypatch.setattr(_postgres_catalog, name, wrapper)
    return steps


# --- every write keeps the info in step -------------------------------------------------------


def test_every_write_path_keeps_the_count_and_the_times_in_step(store: Opener) -> None:
    session = store.open("s")
    seen: list[SessionInfo] = []

    def check(expected_count: int) -> None:
        found = info(store, session)
        assert found.message_count == expected_count
        assert len(store.read(store.open("s"))) == expected_count  # as another instance counts
        assert found.created_at is not None and found.updated_at is not None
        if seen:
            assert found.created_at == seen[0].created_at
            assert found.updated_at > seen[-1].updated_at  # type: ignore[operator]
        seen.append(found)
        time.sleep(0.01)  # the next write's time differs

    store.call(session, "set_info", title="first")
    check(0)
    store.add(session, "one")
    check(1)
    store.driver.add_messages(session, [Message("user", "two"), Message("assistant", "2")])
    check(3)
    store.run(session._add_then_get([Message("user", "three")], 2))
    check(4)
    last = store.driver.get_messages(session)[-1]
    store.run(session._add_after([Message("assistant", "3")], last.id))
    check(5)
    store.run(session._add_after([Message("assistant", "x")], "not the last"))  # refused
    assert info(store, session) == seen[-1]
    store.call(session, "undo")
    check(3)
    store.call(session, "set_info", tags=["t"])
    check(3)
    store.run(session._replace([Message("user", "imported")]))  # a clear, then a first write
    found = info(store, session)
    assert (found.message_count, found.title, found.tags) == (1, None, ())
    store.call(session, "clear")
    assert info(store, session) == SessionInfo("s", 0, None)


def test_an_append_onto_no_message_lands_on_an_emptied_or_info_only_session(
    store: Opener,
) -> None:
    info_only, emptied, busy = store.open("info only"), store.open("emptied"), store.open("busy")
    store.call(info_only, "set_info", owner="u")
    store.add(emptied, "gone soon")
    store.call(emptied, "undo")
    store.add(busy, "here")
    for session in (info_only, emptied):
        assert store.run(session._add_after([Message("user", "first")], None)) is not None
        assert (store.read(session), info(store, session).message_count) == (["first"], 1)
    assert store.run(busy._add_after([Message("user", "first")], None)) is None
    assert info(store, info_only).owner == "u"  # the info stays


def test_a_refused_set_info_writes_nothing(store: Opener, table: str) -> None:
    session = store.open("s")
    assert info(store, session) == SessionInfo("s", 0, None)  # makes the tables
    for bad in ({"title": "a\x00b"}, {"tags": ["ok", "n\x00l"]}, {"owner": "o" * 201}):
        with pytest.raises(UserError):
            store.call(session, "set_info", **bad)
    assert admin(f'SELECT count(*) FROM "{table}_sessions"') == [(0,)]


# --- a store of the layout before info ----------------------------------------------------------

_OLD_LAYOUT = (
    'CREATE TABLE "{t}_schema" (id smallint PRIMARY KEY CHECK (id = 1), version integer NOT NULL)',
    'CREATE TABLE "{t}" (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,'
    " session_id text NOT NULL, message text NOT NULL,"
    " created_at timestamptz NOT NULL DEFAULT now())",
    'CREATE INDEX "{t}_by_session" ON "{t}" (session_id, seq)',
    'CREATE TABLE "{t}_sessions" (session_id text PRIMARY KEY,'
    " generation bigint GENERATED ALWAYS AS IDENTITY,"
    " message_count bigint NOT NULL, updated_at timestamptz NOT NULL)",
    'CREATE TABLE "{t}_meta" (session_id text NOT NULL, key text NOT NULL,'
    " value text NOT NULL, PRIMARY KEY (session_id, key))",
)


def _old_store(table: str, start: datetime) -> None:
    """``table`` as the aniki before info wrote it: "a" with three messages (its count left
    wrong, to be recounted), "b" with one and meta, "meta only" with meta alone."""
    for statement in _OLD_LAYOUT:
        admin(statement.replace("{t}", table))
    admin(f'INSERT INTO "{table}_schema" VALUES (1, 2)')  # the version that layout had
    for sid, contents, first in (("a", ["a1", "a2", "a3"], start), ("b", ["b1"], start + HOUR)):
        for n, content in enumerate(contents):
            admin(
                f'INSERT INTO "{table}" (session_id, message, created_at) VALUES (%s, %s, %s)',
                sid,
                encode_message(Message("user", content)),
                first + n * timedelta(minutes=1),
            )
        last = first + (len(contents) - 1) * timedelta(minutes=1)
        count = 99 if sid == "a" else len(contents)
        admin(f'INSERT INTO "{table}_sessions" VALUES (%s, DEFAULT, %s, %s)', sid, count, last)
    for sid in ("b", "meta only"):
        admin(f'INSERT INTO "{table}_meta" VALUES (%s, %s, %s)', sid, "note", '"kept"')


def test_an_old_layout_is_brought_up_to_date_once_and_read_unchanged(
    table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)
    _old_store(table, start)
    monkeypatch.setattr(_postgres_core, "_READY", set())
    with open_store(postgres_dsn(), table=table) as opened:
        assert [m.content for m in opened.session("a").get_messages()] == ["a1", "a2", "a3"]
        assert opened.session("b").get_meta("note") == "kept"
        listed = opened.list_sessions()
        assert listed == [
            SessionInfo("b", 1, start + HOUR, created_at=start + HOUR),
            SessionInfo("a", 3, start + 2 * timedelta(minutes=1), created_at=start),
        ]
        assert opened.session("meta only").info() == SessionInfo("meta only", 0, None)
    indexes = admin(
        "SELECT to_regclass(%s), to_regclass(%s), to_regclass(%s)",
        *(f'"{table}_{suffix}"' for suffix in ("by_time", "by_owner", "by_tag")),
    )
    assert None not in indexes[0]
    # Once: a set-up run again (an index gone) recounts and re-dates nothing.
    admin(f'UPDATE "{table}_sessions" SET created_at = %s WHERE session_id = %s', start, "b")
    admin(f'DROP INDEX "{table}_by_tag"')
    monkeypatch.setattr(_postgres_core, "_READY", set())
    with PostgresSession("b", postgres_dsn(), table=table) as b:
        assert b.info().created_at == start
        b.add_message({"role": "user", "content": "b2"})
        assert b.info().message_count == 2
    assert admin("SELECT to_regclass(%s) IS NOT NULL", f'"{table}_by_tag"') == [(True,)]


# --- the listing ------------------------------------------------------------------------------


def test_the_listing_follows_the_shared_rule_through_ties_and_pages(
    store: Opener, table: str, catalog: Any
) -> None:
    ids = ["B", "a", "\u00e9", "a b", "Z9", "b", "\U0001f600", "a-1", "c", "A"]
    for n, sid in enumerate(ids):
        session = store.open(sid)
        store.call(session, "set_info", owner=f"u{n % 2}", tags=["x", "y"][: n % 3])
        if n % 4:
            store.add(session, f"{n}")
    base = datetime(2026, 6, 1, tzinfo=timezone.utc)
    for n, sid in enumerate(ids):  # three times shared by several sessions each
        age(table, base + (n % 3) * HOUR, sid)
    infos = [info(store, store.open(sid)) for sid in ids]
    assert store.call(store.open("any"), "list_sessions") == select(infos, Listing())
    for query in (
        {"owner": "u1"},
        {"tag": "y"},
        {"owner": "u0", "tag": "x"},
        {"updated_after": base + HOUR},
        {"updated_after": base, "owner": "u1", "tag": "x"},
    ):
        for limit in (None, 1, 2, 3):
            pages: list[SessionInfo] = []
            cursor = None
            while True:
                page = store.run(catalog.list_sessions(**query, limit=limit, cursor=cursor))
                listing = check_listing(**query, limit=limit, cursor=cursor)
                assert page == select(infos, listing), (query, limit, cursor)
                pages += page
                if limit is None or len(page) < limit:
                    break
                cursor = page[-1]
            assert pages == select(infos, check_listing(**query)), (query, limit)


def test_the_listing_and_the_prune_are_served_by_indexes(table: str) -> None:
    with PostgresSession("first", postgres_dsn(), table=table) as session:
        session.add_message({"role": "user", "content": "makes the tables"})
    admin(
        f'INSERT INTO "{table}_sessions" (session_id, message_count, updated_at, owner, tags)'
        " SELECT 's' || g, 1, now() - g * interval '1 minute',"
        " CASE WHEN g % 10 = 0 THEN 'u' || g % 7 END,"
        " CASE WHEN g % 20 = 0 THEN ARRAY['pinned'] ELSE '{}' END"
        " FROM generate_series(1, 5000) AS g"
    )
    admin(f'ANALYZE "{table}_sessions"')
    now = datetime.now(timezone.utc)
    cursor = SessionInfo("s40", 1, now - 40 * timedelta(minutes=1))
    expected: list[tuple[str, Any]] = [
        ("by_time", _postgres_catalog.list_sessions(table, check_listing(limit=20))),
        ("by_owner", _postgres_catalog.list_sessions(table, check_listing(owner="u3"))),
        ("by_tag", _postgres_catalog.list_sessions(table, check_listing(tag="pinned"))),
        ("by_time", _postgres_catalog.list_sessions(table, check_listing(updated_after=now))),
        ("by_time", _postgres_catalog.list_sessions(table, check_listing(cursor=cursor))),
        (
            "by_owner",
            _postgres_catalog.list_sessions(table, check_listing(owner="u3", cursor=cursor)),
        ),
        ("by_time", _postgres_catalog.prune(table, now - HOUR, None)),
        ("by_owner", _postgres_catalog.prune(table, now - HOUR, "u3")),
        ("by_owner", _postgres_catalog.delete_sessions(table, "u3")),
    ]
    with psycopg_connection() as conn:
        conn.execute("SET enable_seqscan = off")  # a plan that needs a scan shows one anyway
        for index, flow in expected:
            step = next(flow)
            plan = "\n".join(
                row[0] for row in conn.execute(b"EXPLAIN " + step.statement, step.params)
            )
            assert f"{table}_{index}" in plan and "Seq Scan" not in plan, plan
        remove = render(table, _postgres_catalog._REMOVE)
        plan = "\n".join(
            row[0] for row in conn.execute(b"EXPLAIN " + remove, {"ids": ["s1", "s2"]})
        )
        assert "Seq Scan" not in plan and f"{table}_by_session" in plan, plan


def psycopg_connection() -> Any:
    import psycopg

    return psycopg.connect(postgres_dsn(), autocommit=True)


# --- retention ------------------------------------------------------------------------------


def test_a_prune_of_250_sessions_runs_in_3_transactions(
    table: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn = postgres_dsn()
    with open_store(dsn, table=table) as opened:
        for n in range(251):
            session = opened.session(f"s{n}")
            session.add_message({"role": "user", "content": f"{n}"})
            session.set_meta("journal", {"n": n})
    age(table, datetime.now(timezone.utc) - 24 * HOUR)
    admin(f'UPDATE "{table}_sessions" SET updated_at = now() WHERE session_id = %s', "s250")
    steps = recorded(monkeypatch, "prune")
    trace = tmp_path / "libpq.trace"
    with PostgresSession("pruner", dsn, table=table) as pruner:
        pruner.info()  # connects
        assert pruner._conn is not None
        with trace.open("w") as handle:
            pruner._conn.pgconn.trace(handle.fileno())
            assert pruner._prune(datetime.now(timezone.utc) - HOUR, None) == 250
            pruner._conn.pgconn.untrace()
    assert [len(step.params["ids"]) for step in steps if step.commits] == [100, 100, 50]
    sent = trace.read_text()
    assert sent.count('Query\t "COMMIT"') == 3 and sent.count('Query\t "BEGIN"') == 3
    assert admin(f'SELECT DISTINCT session_id FROM "{table}"') == [("s250",)]
    assert admin(f'SELECT session_id FROM "{table}_meta"') == [("s250",)]
    assert admin(f'SELECT session_id FROM "{table}_sessions"') == [("s250",)]


def test_a_flow_in_several_transactions_commits_each_and_renews_its_deadline(table: str) -> None:
    sleep = b"SELECT pg_sleep(0.6)"

    def flow(commits: bool) -> Generator[Query, Any, list[Any]]:
        seen = []
        for n in range(3):
            insert = "INSERT INTO {meta} VALUES ('flow', %(key)s, '1')"
            yield Query(render(table, insert), {"key": f"k{n}"})
            yield Query(sleep, commits=commits)
            seen.append(admin(f'SELECT count(*) FROM "{table}_meta"')[0][0])  # another connection
        return seen

    with PostgresSession("s", postgres_dsn(), table=table, timeout=1.0) as session:
        session.info()  # makes the tables
        assert session._run(lambda: flow(True)) == [1, 2, 3]
        admin(f'DELETE FROM "{table}_meta"')
        with pytest.raises(StoreUnavailableError, match="in time"):
            session._run(lambda: flow(False))  # one transaction: 1.8 s against 1 s
    assert admin(f'SELECT count(*) FROM "{table}_meta"') == [(0,)]  # rolled back


def test_delete_sessions_removes_only_the_owners_in_batches(
    store: Opener, catalog: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_postgres_catalog, "PRUNE_BATCH", 3)
    for n in range(8):
        session = store.open(f"s{n}")
        store.call(session, "set_info", owner="gone" if n < 7 else "kept")
        if n % 2:
            store.add(session, f"{n}")
    steps = recorded(monkeypatch, "delete_sessions")
    assert store.run(catalog.delete_sessions(owner="gone")) == 7
    assert [len(step.params["ids"]) for step in steps if step.commits] == [3, 3, 1]
    assert [i.id for i in store.run(catalog.list_sessions())] == ["s7"]
