"""A SQLite store's conversations as an app keeps them, beyond the conformance suite: every
write path keeps a session's row (times, count) in step, the listing agrees with the
reference rule and is served by indexes, and stores written before version 3 upgrade with
their sessions listed as they were."""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import sqlite3
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from aniki import CorruptStoreError, Message
from aniki.sessions import AsyncSQLiteSession, SQLiteSession, SQLiteStore
from aniki.sessions._catalog import Listing, check_listing, select
from aniki.sessions.base import SessionInfo
from aniki.sessions.sqlite._listing import listing_query, removal_query
from aniki.sessions.sqlite._schema import MIGRATIONS, statements
from aniki.sessions.sqlite._sql import APPEND, BLOCK, REGISTER

FIXTURES = Path(__file__).parent / "fixtures" / "v1"
_TICK = 0.002  # seconds between writes whose times must differ (the clock counts microseconds)


def _user(text: str) -> Message:
    return Message("user", text)


def _answer(text: str) -> Message:
    return Message("assistant", text)


def _in_step(session: SQLiteSession) -> SessionInfo:
    """The session's info, checked against its history: the count is the messages held."""
    info = session.info()
    assert info.message_count == len(SQLiteSession(session.id, session.path).get_messages())
    return info


def _later(session: SQLiteSession, before: SessionInfo) -> SessionInfo:
    after = _in_step(session)
    assert before.updated_at is not None and after.updated_at is not None
    assert after.updated_at > before.updated_at
    assert after.created_at == before.created_at
    return after


# --- every write keeps the row in step ------------------------------------------------------


def test_every_write_path_keeps_the_times_and_the_count(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    session = SQLiteSession("s", path)
    assert session.info() == SessionInfo("s", 0, None)
    session.add_message(_user("one"))
    info = _in_step(session)
    assert info.created_at is not None and info.created_at == info.updated_at
    steps: list[Callable[[], object]] = [
        lambda: session.add_messages([_answer("1"), _user("two")]),
        lambda: session._add_after([_answer("2")], session.get_messages()[-1].id),
        lambda: session.undo(),
        lambda: session.set_info(title="kept"),
    ]
    for step in steps:
        time.sleep(_TICK)
        step()
        info = _later(session, info)
    assert (info.message_count, info.title) == (2, "kept")
    time.sleep(_TICK)
    session.set_meta("summary", {"text": "derived state is not a write"})
    assert session.info() == info
    session._replace([_user("imported"), _answer("yes"), _user("and")])
    replaced = _in_step(session)
    assert replaced.message_count == 3 and replaced.title is None  # clear, then an append
    assert replaced.created_at == replaced.updated_at and replaced.created_at > info.created_at  # type: ignore[operator]
    session.clear()
    assert session.info() == SessionInfo("s", 0, None)


def test_a_fork_copies_the_labels_and_counts_what_it_copied(tmp_path: Path) -> None:
    source = SQLiteSession("source", tmp_path / "chat.db")
    source.add_messages([_user("a"), _answer("b"), _user("c"), _answer("d")])
    source.set_info(title="t", owner="o", tags=["x", "y"])
    time.sleep(_TICK)
    child = source.fork("child", upto=source.get_messages()[1].id)
    info = _in_step(child)
    assert (info.message_count, info.title, info.owner, info.tags) == (2, "t", "o", ("x", "y"))
    assert info.created_at == info.updated_at
    assert info.created_at > source.info().updated_at  # type: ignore[operator]
    store = SQLiteStore(tmp_path / "chat.db")
    assert [i.id for i in store.list_sessions(tag="y")] == ["child", "source"]
    empty = SQLiteSession("nothing", tmp_path / "chat.db").fork("copy-of-nothing")
    assert _in_step(empty).message_count == 0 and empty.info().tags == ()


async def test_the_async_twin_and_its_fused_append_keep_the_row_in_step(tmp_path: Path) -> None:
    session = AsyncSQLiteSession("s", tmp_path / "chat.db")
    await session.set_info(owner="u", tags=("b", "a"))
    first = await session.info()
    await asyncio.sleep(_TICK)
    history = await session._add_then_get([_user("hi"), _answer("hello")])
    info = await session.info()
    assert info.message_count == len(history) == 2
    assert info.updated_at > first.updated_at  # type: ignore[operator]
    assert (info.owner, info.tags, info.created_at) == ("u", ("a", "b"), first.created_at)
    await session.aclose()


def test_appends_in_one_second_write_the_row_once_and_still_order_exactly(tmp_path: Path) -> None:
    """An append rewrites the session's row (and its time indexes) only when the second of its
    ``updated_at`` changes; the info and the listing still give the exact times."""
    path = tmp_path / "chat.db"
    a, b = SQLiteSession("a", path), SQLiteSession("b", path)
    while time.time() % 1 > 0.5:  # room for every write below in one second
        time.sleep(0.05)
    a.add_message(_user("first"))
    b.add_message(_user("first"))
    with sqlite3.connect(path) as conn:
        row_before = conn.execute("SELECT updated_at FROM aniki_sessions WHERE id = 'a'").fetchone()
    time.sleep(_TICK)
    a.add_message(_answer("later, in the same second"))
    with sqlite3.connect(path) as conn:
        row_after = conn.execute("SELECT updated_at FROM aniki_sessions WHERE id = 'a'").fetchone()
    assert row_after == row_before  # the row was not written
    info = a.info()
    # yet the info gives the time of the last write, the listing orders by it
    assert info.updated_at is not None and info.updated_at.timestamp() > row_before[0]
    assert info.message_count == 2
    assert [i.id for i in SQLiteStore(path).list_sessions()] == ["a", "b"]
    assert [i.id for i in SQLiteStore(path).list_sessions(updated_after=b.info().updated_at)] == [
        "a"
    ]


# --- the listing ----------------------------------------------------------------------------


def _random_store(path: Path, rng: random.Random) -> list[SessionInfo]:
    """Sessions with random owners, tags, messages and info, some cleared; their infos."""
    sessions = [SQLiteSession(f"s{number:02d}", path) for number in range(40)]
    for _ in range(120):
        session = rng.choice(sessions)
        action = rng.random()
        if action < 0.45:
            session.add_message(_user("q"))
        elif action < 0.9:
            session.set_info(
                owner=rng.choice([None, "ann", "bob", "cy"]),
                tags=rng.sample(["red", "green", "blue", "gold"], rng.randrange(3)),
            )
        else:
            session.clear()
    infos = [session.info() for session in sessions]
    return [info for info in infos if info.message_count or info.created_at is not None]


def test_the_listing_agrees_with_the_reference_rule(tmp_path: Path) -> None:
    rng = random.Random(29)
    listed = _random_store(tmp_path / "chat.db", rng)
    store = SQLiteStore(tmp_path / "chat.db")
    assert store.list_sessions() == select(listed, Listing())
    times = sorted(info.updated_at for info in listed if info.updated_at is not None)
    for owner in (None, "ann", "bob", "nobody"):
        for tag in (None, "red", "gold"):
            for after in (None, times[0], times[len(times) // 2], times[-1]):
                query: dict[str, Any] = {"owner": owner, "tag": tag, "updated_after": after}
                assert store.list_sessions(**query) == select(listed, check_listing(**query))
                pages: list[SessionInfo] = []
                cursor = None
                while True:
                    page = store.list_sessions(**query, limit=3, cursor=cursor)
                    pages += page
                    if len(page) < 3:
                        break
                    cursor = page[-1]
                assert pages == select(listed, check_listing(**query))


def _plan(conn: sqlite3.Connection, sql: str, values: list[object]) -> list[str]:
    return [str(row[3]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", values)]


@pytest.mark.parametrize(
    ("query", "index"),
    [
        ({}, "aniki_sessions_by_second"),
        ({"limit": 5}, "aniki_sessions_by_second"),
        ({"updated_after": datetime(2026, 1, 1, tzinfo=timezone.utc)}, "aniki_sessions_by_second"),
        ({"owner": "ann"}, "aniki_sessions_by_owner_second"),
        ({"owner": "ann", "limit": 2, "cursor": True}, "aniki_sessions_by_owner_second"),
        ({"tag": "red"}, "t USING PRIMARY KEY (tag=?)"),
        ({"tag": "red", "owner": "ann", "cursor": True}, "t USING PRIMARY KEY (tag=?)"),
    ],
)
def test_each_listing_is_an_index_search(tmp_path: Path, query: dict[str, Any], index: str) -> None:
    path = tmp_path / "chat.db"
    _random_store(path, random.Random(3))
    if query.get("cursor"):
        query["cursor"] = SessionInfo("s07", 1, datetime(2026, 5, 1, tzinfo=timezone.utc))
    sql, values = listing_query(check_listing(**query))
    with sqlite3.connect(path) as conn:
        plan = _plan(conn, sql, values)
    # An ordered walk of the index (which holds only the sessions ever written), stopped by
    # the limit, or a search of it: never a scan of the table.
    assert plan[0].startswith(("SEARCH", "SCAN s USING INDEX")) and index in plan[0], plan
    assert not any(line.startswith("SCAN") for line in plan[1:]), plan
    if "tag" in query:  # then each tagged session by its number, and only those are sorted
        assert plan[1] == "SEARCH s USING INTEGER PRIMARY KEY (rowid=?)", plan
    else:  # the index's order by second; only each second's sessions are sorted
        assert not any("TEMP B-TREE FOR ORDER BY" in line for line in plan), plan
        assert plan[-1] == "USE TEMP B-TREE FOR RIGHT PART OF ORDER BY", plan


@pytest.mark.parametrize(
    ("cutoff", "owner", "index"),
    [
        (datetime(2026, 1, 1, tzinfo=timezone.utc), None, "aniki_sessions_by_second (<expr><?)"),
        (datetime(2026, 1, 1, tzinfo=timezone.utc), "ann", "owner_second (owner=? AND <expr><?)"),
        (None, "ann", "aniki_sessions_by_owner_second (owner=?)"),
    ],
)
def test_a_prune_and_a_delete_find_their_sessions_by_index(
    tmp_path: Path, cutoff: datetime | None, owner: str | None, index: str
) -> None:
    path = tmp_path / "chat.db"
    _random_store(path, random.Random(4))
    sql, values = removal_query(cutoff=cutoff, owner=owner)
    with sqlite3.connect(path) as conn:
        plan = _plan(conn, sql, values)
    assert plan[0].startswith("SEARCH") and index in plan[0], plan
    assert not any(line.startswith("SCAN") for line in plan), plan


def test_a_damaged_tags_column_is_reported_as_damage(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    SQLiteSession("s", path).set_info(tags=["a"])
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE aniki_sessions SET tags = '{not json'")
    with pytest.raises(CorruptStoreError, match="tags of session 's'"):
        SQLiteStore(path).list_sessions()
    with pytest.raises(CorruptStoreError, match="tags of session 's'"):
        SQLiteSession("s", path).info()


# --- upgrades -------------------------------------------------------------------------------


def _old_store(path: Path, version: int) -> None:
    """A store laid out as schema ``version`` made it, written with that layout's statements."""
    conn = sqlite3.connect(path, isolation_level=None)
    for step in MIGRATIONS[:version]:
        for statement in statements(step):
            conn.execute(statement)
    conn.execute("PRAGMA application_id = 1095650121")  # "ANKI"
    conn.execute(f"PRAGMA user_version = {version}")
    written = {"early": [1700000000.1234567, 1700000100.25], "late": [1700000200.9876543]}
    for session_id, times in [*written.items(), ("cleared", [])]:
        conn.execute(REGISTER, (session_id,))
        (number,) = conn.execute(
            "SELECT number FROM aniki_sessions WHERE id = ?", (session_id,)
        ).fetchone()
        for index, when in enumerate(times):
            body = json.dumps({"role": "user", "content": f"{session_id} {index}"})
            conn.execute(APPEND, (number * BLOCK, (number + 1) * BLOCK, body, when))
    conn.execute("UPDATE aniki_sessions SET generation = 1 WHERE id = 'cleared'")
    conn.close()


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


@pytest.mark.parametrize("version", [1, 2])
def test_an_older_store_lists_its_sessions_after_the_upgrade(tmp_path: Path, version: int) -> None:
    path = tmp_path / "old.db"
    _old_store(path, version)
    store = SQLiteStore(path)
    early = SessionInfo("early", 2, _at(1700000100.25), created_at=_at(1700000000.1234567))
    late = SessionInfo("late", 1, _at(1700000200.9876543), created_at=_at(1700000200.9876543))
    assert store.list_sessions() == [late, early]  # "cleared" holds nothing: not listed
    assert store.session("early").info() == early
    assert store.list_sessions(updated_after=early.updated_at) == [late]
    assert store.list_sessions(limit=1, cursor=late) == [early]
    store.session("early").add_message(_user("after the upgrade"))
    assert [info.id for info in store.list_sessions()] == ["early", "late"]
    assert store.session("early").info().message_count == 3
    assert store.prune(older_than=timedelta(days=1)) == 1
    assert [info.id for info in store.list_sessions()] == ["early"]


def test_the_stores_of_the_first_release_are_listed_as_before(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    shutil.copyfile(FIXTURES / "chats.db", path)
    with sqlite3.connect(path) as conn:  # what the first release's listing computed
        before = conn.execute(
            "SELECT s.id, count(*), max(m.created_at) FROM aniki_sessions AS s"
            " JOIN aniki_messages AS m ON m.key > s.number * ?1 AND m.key < (s.number + 1) * ?1"
            " GROUP BY s.number ORDER BY 3 DESC, s.id",
            (BLOCK,),
        ).fetchall()
    listed = SQLiteStore(path).list_sessions()
    assert [(info.id, info.message_count, info.updated_at) for info in listed] == [
        (session_id, count, _at(updated)) for session_id, count, updated in before
    ]
    assert {info.id for info in listed} == {"alpha", "beta"}
