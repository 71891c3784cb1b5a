"""A prune or a delete of PostgreSQL sessions racing their writers, on other connections: a
session a writer holds is left, not waited for; every session ends whole or gone (its messages,
meta and row together), and one written again after it went starts afresh."""

from __future__ import annotations

import random
import threading
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from aniki import Message
from aniki.sessions.postgres import PostgresSession
from aniki.sessions.postgres import _catalog as _postgres_catalog

from ..servers import postgres_dsn
from . import test_postgres
from .test_postgres_catalog import age
from .test_postgres_edits import turn
from .test_postgres_edits_races import _hold_append, _in_thread, _waiting_on_locks

pytestmark = pytest.mark.postgres

table = test_postgres.table  # the fixture: a fresh table family
admin = test_postgres.admin

OLD = ["old 1", "old 2", "old 3"]


def _old_sessions(table: str, count: int, owner: str | None = None) -> list[str]:
    """``count`` sessions holding :data:`OLD` and a meta value, last written a day ago."""
    ids = [f"s{n}" for n in range(count)]
    for sid in ids:
        with PostgresSession(sid, postgres_dsn(), table=table) as session:
            session.add_messages([Message("user", content) for content in OLD])
            session.set_meta("journal", sid)
            if owner is not None:
                session.set_info(owner=owner)
    age(table, datetime.now(timezone.utc) - timedelta(days=1))
    return ids


def _whole_or_gone(table: str, ids: list[str]) -> set[str]:
    """Check that each session holds its old history and meta whole, or none of either (then
    only what was appended since, counted right); the ids of those that went."""
    counts = dict(admin(f'SELECT session_id, message_count FROM "{table}_sessions"'))
    meta = {sid for (sid,) in admin(f'SELECT session_id FROM "{table}_meta"')}
    gone = set()
    for sid in ids:
        with PostgresSession(sid, postgres_dsn(), table=table) as session:
            contents = [m.content for m in session.get_messages()]
        if contents[:3] == OLD:
            assert sid in meta, sid
            assert not set(OLD) & set(contents[3:]), (sid, contents)
        else:
            assert not set(OLD) & set(contents) and sid not in meta, (sid, contents)
            gone.add(sid)
        assert counts.get(sid, 0) == len(contents), (sid, counts.get(sid), contents)
    orphans = admin(
        f'SELECT DISTINCT session_id FROM "{table}" AS m WHERE NOT EXISTS'
        f' (SELECT FROM "{table}_sessions" AS s WHERE s.session_id = m.session_id)'
    )
    assert orphans == []
    return gone


def test_a_session_a_writer_holds_is_left_by_the_prune_which_does_not_wait(table: str) -> None:
    ids = _old_sessions(table, 3)
    held = _hold_append(table, "s1", turn("new", "reply"))
    try:
        with PostgresSession("pruner", postgres_dsn(), table=table) as pruner:
            # Returns while the append is still in flight: s1 was skipped, not waited for.
            assert pruner._prune(datetime.now(timezone.utc) - timedelta(hours=1), None) == 2
    finally:
        held.commit()
        held.close()
    assert _whole_or_gone(table, ids) == {"s0", "s2"}
    with PostgresSession("s1", postgres_dsn(), table=table) as session:
        assert [m.content for m in session.get_messages()] == [*OLD, "new", "reply"]


def test_an_append_that_waits_for_a_prune_makes_its_session_anew(
    table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _old_sessions(table, 3)
    original = _postgres_catalog.prune
    writers, written = [], []

    def prune(*args: Any) -> Any:
        # Once the batch's rows are locked, an append to one of them starts and waits.
        flow = original(*args)
        step = next(flow)
        rows = yield step
        sid = rows[-1][0]
        written.append(sid)
        writers.append(_in_thread(lambda: _append(table, sid, turn("new", "reply"))))
        _waiting_on_locks(table)
        return (yield from _resume(flow, rows))

    monkeypatch.setattr(_postgres_catalog, "prune", prune)
    with PostgresSession("pruner", postgres_dsn(), table=table) as pruner:
        assert pruner._prune(datetime.now(timezone.utc) - timedelta(hours=1), None) == 3
    ((thread, outcome),) = writers
    thread.join(10)
    assert outcome == [None]
    assert _whole_or_gone(table, ids) == set(ids)
    with PostgresSession(written[0], postgres_dsn(), table=table) as session:
        assert [m.content for m in session.get_messages()] == ["new", "reply"]
        assert session.get_meta("journal") is None and session.info().message_count == 2


def _append(table: str, session_id: str, messages: list[Message]) -> None:
    with PostgresSession(session_id, postgres_dsn(), table=table) as session:
        session.add_messages(messages)


def _resume(flow: Any, reply: Any) -> Any:
    """Run the rest of ``flow``, sending ``reply`` first."""
    try:
        while True:
            reply = yield flow.send(reply)
    except StopIteration as done:
        return done.value


@pytest.mark.parametrize("how", ["prune", "delete"])
def test_appends_racing_a_prune_leave_every_session_whole_or_gone(
    table: str, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_postgres_catalog, "PRUNE_BATCH", 5)  # many batches among the appends
    ids = _old_sessions(table, 60, owner="u")
    done, errors = threading.Event(), []

    def append(seed: int) -> None:
        chooser = random.Random(seed)
        sessions = {sid: PostgresSession(sid, postgres_dsn(), table=table) for sid in ids}
        try:
            n = 0
            while not done.is_set() or n < 20:
                n += 1
                sid = chooser.choice(ids)
                sessions[sid].add_messages(turn(f"{seed}.{n}", "reply"))
        except BaseException as exc:
            errors.append(exc)
        finally:
            for session in sessions.values():
                session.close()

    writers = [threading.Thread(target=append, args=(seed,)) for seed in range(4)]
    for writer in writers:
        writer.start()

    def remove() -> Any:
        with PostgresSession("pruner", postgres_dsn(), table=table) as pruner:
            if how == "prune":
                return pruner._prune(datetime.now(timezone.utc) - timedelta(hours=1), None)
            return pruner._delete("u")

    thread, outcome = _in_thread(remove)
    thread.join(60)
    done.set()
    for writer in writers:
        writer.join(60)
    assert errors == []
    (removed,) = outcome
    assert isinstance(removed, int) and removed > 0
    assert len(_whole_or_gone(table, ids)) == removed
