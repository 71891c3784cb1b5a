"""fork() and undo() of the PostgreSQL sessions racing other writers, on other connections and
in other processes: a fork copies a prefix of whole appends, an undo removes whole turns and
leaves no orphan, forks into one session make it once, no two forks deadlock, a wait is
bounded by the timeout, and a fork killed midway leaves nothing behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from aniki import Message, StoreUnavailableError, UserError
from aniki._stamps import stamp
from aniki.sessions._codec import encode_message
from aniki.sessions.postgres import PostgresSession
from aniki.sessions.postgres import _sql as _postgres_sql

from ..servers import postgres_dsn
from . import test_postgres
from .test_postgres_edits import table_rows, turn

pytestmark = pytest.mark.postgres

table = test_postgres.table  # the fixture: a fresh table family
admin = test_postgres.admin


def _hold_append(table: str, session_id: str, messages: list[Message]) -> psycopg.Connection[Any]:
    """A connection that appended ``messages`` and has not committed: it holds the row lock
    (until its ``with`` block ends, which commits, or rolls back on an error)."""
    conn = psycopg.connect(postgres_dsn())
    records = [encode_message(m) for m in stamp(messages)]
    params = {"sid": session_id, "n": len(records), "records": records}
    conn.execute(_postgres_sql.statements(table).append, params)
    return conn


def _hold_rows(table: str, *session_ids: str) -> psycopg.Connection[Any]:
    """A connection holding the rows of ``session_ids`` locked as an undo would (until its
    ``with`` block ends)."""
    conn = psycopg.connect(postgres_dsn())
    conn.execute(
        f'SELECT 1 FROM "{table}_sessions" WHERE session_id = ANY(%s) FOR UPDATE',
        [list(session_ids)],
    )
    return conn


def _waiting_on_locks(table: str, count: int = 1) -> None:
    """Return once ``count`` statements on ``table``'s tables wait for a lock."""
    deadline = time.monotonic() + 20
    while True:
        rows = admin(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND query LIKE %s",
            f"%{table}%",
        )
        if rows[0][0] >= count:
            return
        assert time.monotonic() < deadline, "nothing waited for the lock"
        time.sleep(0.01)


def _in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """``call`` started in a thread; the list gets its result or its exception."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def _counts_agree(table: str) -> None:
    """Every session's row counts its messages, and no session has messages without a row
    (a row without messages counts none: an undo may empty a session, which keeps its row)."""
    stored = admin(
        f'SELECT m.session_id, count(*), s.message_count FROM "{table}" AS m'
        f' LEFT JOIN "{table}_sessions" AS s USING (session_id) GROUP BY 1, 3'
    )
    assert all(counted == kept for _, counted, kept in stored), stored
    empty = admin(
        f'SELECT session_id FROM "{table}_sessions" AS s WHERE message_count <> 0 AND NOT EXISTS'
        f' (SELECT 1 FROM "{table}" AS m WHERE m.session_id = s.session_id)'
    )
    assert empty == []


# --- one writer in flight -------------------------------------------------------------------


def test_a_fork_waits_for_an_append_in_flight_and_copies_it_whole(table: str) -> None:
    with PostgresSession("s", postgres_dsn(), table=table) as source:
        source.add_messages(turn("q1", "a1"))
        with _hold_append(table, "s", turn("q2", "a2")):
            thread, outcome = _in_thread(lambda: source.fork("child"))
            _waiting_on_locks(table)
        thread.join(10)
        (child,) = outcome
        with child:
            assert [m.content for m in child.get_messages()] == ["q1", "a1", "q2", "a2"]
    _counts_agree(table)


def test_an_undo_waits_for_an_append_in_flight_and_removes_that_turn(table: str) -> None:
    with PostgresSession("s", postgres_dsn(), table=table) as session:
        session.add_messages(turn("q1", "a1"))
        assert len(session.get_messages()) == 2
        with _hold_append(table, "s", turn("q2", "a2")):
            thread, outcome = _in_thread(session.undo)
            _waiting_on_locks(table)
        thread.join(10)
        assert [[m.content for m in removed] for removed in outcome] == [["q2", "a2"]]
        assert [m.content for m in session.get_messages()] == ["q1", "a1"]
    _counts_agree(table)


# --- many writers -----------------------------------------------------------------------------


def _append_batches(table: str, writer: int, batches: int, size: int) -> None:
    with PostgresSession("busy", postgres_dsn(), table=table) as session:
        for i in range(batches):
            replies = [f"w{writer}:{i}:{part}" for part in range(1, size)]
            session.add_messages(turn(f"w{writer}:{i}:0", *replies))


def test_forks_racing_appends_copy_a_prefix_of_whole_appends(table: str) -> None:
    writers, batches, size = 3, 30, 3
    with PostgresSession("busy", postgres_dsn(), table=table) as source:
        source.add_message(Message("system", "start"))
        threads = [
            _in_thread(lambda w=w: _append_batches(table, w, batches, size)) for w in range(writers)
        ]
        forks = []
        while any(thread.is_alive() for thread, _ in threads):
            forks.append(source.fork(f"fork {len(forks)}"))
        for thread, outcome in threads:
            thread.join()
            assert outcome == [None]
        final = source.get_messages()
    assert len(final) == 1 + writers * batches * size
    lengths = []
    for child in forks:
        with child:
            copied = child.get_messages()
        lengths.append(len(copied))
        assert [(m.id, m.content) for m in copied] == [
            (m.id, m.content) for m in final[: len(copied)]
        ]
        assert (len(copied) - 1) % size == 0  # whole appends only
    assert any(1 < n < len(final) for n in lengths), lengths  # the forks did race
    _counts_agree(table)


def test_undos_racing_appends_remove_whole_turns_and_leave_no_orphan(table: str) -> None:
    writers, batches = 2, 40
    threads = [_in_thread(lambda w=w: _append_batches(table, w, batches, 2)) for w in range(2)]
    removed: list[tuple[Message, ...]] = []

    def undo_while_writing() -> None:
        with PostgresSession("busy", postgres_dsn(), table=table) as session:
            while any(thread.is_alive() for thread, _ in threads):
                removed.append(session.undo())

    undoers = [_in_thread(undo_while_writing) for _ in range(2)]
    for thread, outcome in [*threads, *undoers]:
        thread.join()
        assert outcome == [None]
    with PostgresSession("busy", postgres_dsn(), table=table) as fresh:
        final = [m.content for m in fresh.get_messages()]
    taken = [[m.content for m in turn_] for turn_ in removed if turn_]
    assert taken, "no undo removed anything"
    pairs = [final[i : i + 2] for i in range(0, len(final), 2)] + taken
    for user, reply in pairs:  # every turn whole: no reply without its question
        assert reply == user[:-1] + "1" and user.endswith(":0"), (user, reply)
    every = {f"w{w}:{i}:{p}" for w in range(writers) for i in range(batches) for p in range(2)}
    kept_and_removed = [content for pair in pairs for content in pair]
    assert sorted(kept_and_removed) == sorted(every)  # each once: kept or removed
    _counts_agree(table)


def test_forks_into_one_new_session_at_once_make_it_once(table: str) -> None:
    with PostgresSession("s", postgres_dsn(), table=table) as source:
        source.add_messages(turn("q", "a"))
        history = source.get_messages()
    barrier = threading.Barrier(6)

    def fork_after_barrier() -> PostgresSession:
        with PostgresSession("s", postgres_dsn(), table=table) as session:
            barrier.wait()
            return session.fork("target")

    started = [_in_thread(fork_after_barrier) for _ in range(6)]
    outcomes = []
    for thread, outcome in started:
        thread.join()
        outcomes.extend(outcome)
    made = [o for o in outcomes if isinstance(o, PostgresSession)]
    refused = [o for o in outcomes if isinstance(o, UserError)]
    assert (len(made), len(refused)) == (1, 5), outcomes
    assert all("already holds messages" in str(error) for error in refused)
    with made[0]:
        assert [(m.id, m.content) for m in made[0].get_messages()] == [
            (m.id, m.content) for m in history
        ]
    _counts_agree(table)


def test_forks_between_two_sessions_both_ways_at_once_never_deadlock(table: str) -> None:
    a = PostgresSession("a", postgres_dsn(), table=table)
    b = PostgresSession("b", postgres_dsn(), table=table)
    try:
        a.add_message(Message("user", "in a"))
        b.add_message(Message("user", "in b"))
        # Both forks queue behind one lock holder, then start together: each locks its source
        # and reaches for the other's, which, taken in any order but one, is a deadlock.
        with _hold_rows(table, "a", "b"):
            started = [_in_thread(lambda: a.fork("b")), _in_thread(lambda: b.fork("a"))]
            _waiting_on_locks(table, count=2)
        for thread, outcome in started:
            thread.join(20)
            (error,) = outcome
            assert isinstance(error, UserError) and "already holds" in str(error), error
    finally:
        a.close()
        b.close()


# --- bounded waits and a crash ------------------------------------------------------------------


@pytest.mark.parametrize("operation", ["fork", "undo"])
def test_a_fork_or_undo_held_up_gives_up_within_its_timeout(table: str, operation: str) -> None:
    with PostgresSession("s", postgres_dsn(), table=table, timeout=1) as session:
        session.add_messages(turn("q", "a"))
        before = table_rows(table)
        with _hold_rows(table, "s"):
            started = time.monotonic()
            with pytest.raises(StoreUnavailableError, match="did not answer in time"):
                session.fork("child") if operation == "fork" else session.undo()
            assert time.monotonic() - started < 5
        assert table_rows(table) == before
        assert [m.content for m in session.get_messages()] == ["q", "a"]  # usable again


_FORKING_CHILD = """
import sys
from aniki.sessions.postgres import PostgresSession
session = PostgresSession("source", sys.argv[1], table=sys.argv[2], timeout=120)
session.fork("target")
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_fork_killed_midway_leaves_no_trace(table: str) -> None:
    with PostgresSession("source", postgres_dsn(), table=table) as source:
        source.add_messages(turn("q", *(f"a{i}" for i in range(20))))
        source.set_meta("summary", "s")
    with PostgresSession("target", postgres_dsn(), table=table) as target:
        target.set_meta("old", 1)
    before = table_rows(table)
    # Holding the target's meta row stops the fork after it has copied the messages.
    holder = psycopg.connect(postgres_dsn())
    holder.execute(f'SELECT 1 FROM "{table}_meta" WHERE session_id = %s FOR UPDATE', ["target"])
    tag = f"aniki-fork-victim-{os.getpid()}"
    child = subprocess.Popen(
        [sys.executable, "-c", _FORKING_CHILD, f"{postgres_dsn()}?application_name={tag}", table],
        stderr=subprocess.PIPE,
    )
    try:
        _waiting_on_locks(table)
        assert table_rows(table) == before  # the copy so far is seen by no one else
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        holder.rollback()
        holder.close()
    deadline = time.monotonic() + 20
    while admin("SELECT 1 FROM pg_stat_activity WHERE application_name = %s", tag):
        assert time.monotonic() < deadline, "the killed fork's transaction lingered"
        time.sleep(0.02)
    assert table_rows(table) == before
