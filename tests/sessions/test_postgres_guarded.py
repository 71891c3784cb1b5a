"""A run's later appends on PostgreSQL check the turn guard in their own statement: one round
trip, and nothing written once the history moved (an undo or a clear by another worker)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from aniki import Message
from aniki.sessions._guard import HistoryMoved, TurnGuard, guarding
from aniki.sessions.postgres import PostgresSession

from ..servers import postgres_dsn, unique_name
from .test_postgres import drop_tables


@pytest.fixture
def table() -> Iterator[str]:
    postgres_dsn()
    name = unique_name("aniki_guard")
    yield name
    drop_tables(name)


def _round_trips(trace: Path) -> int:
    # Lines read "[time] F|B length type args...": a request the client sends ends with Sync
    # (or is one simple Query), and waits for the server's answer.
    sent = [line.split("\t") for line in trace.read_text().splitlines()]
    kinds = [fields[fields.index("F") + 2] for fields in sent if "F" in fields]
    return kinds.count("Sync") + kinds.count("Query")


@pytest.mark.parametrize("fused", [False, True], ids=["append", "append-then-read"])
def test_a_later_guarded_append_is_one_round_trip(table: str, tmp_path: Path, fused: bool) -> None:
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(postgres_dsn(), min_size=1, max_size=1, open=True)
    try:
        session = PostgresSession("run", pool=pool, table=table)
        session.add_message(Message("user", "creates the tables"))
        guard = TurnGuard()
        with guarding(guard):
            session.add_message(Message("user", "question"))  # learns the generation
        assert guard.marks  # the store's mark is known from here on
        trace = tmp_path / "libpq.trace"
        with trace.open("w") as handle:
            with pool.connection() as conn:
                conn.pgconn.trace(handle.fileno())
            with guarding(guard):
                if fused:
                    history = session._add_then_get([Message("assistant", "answer")])
                    assert [m.content for m in history][-1] == "answer"
                else:
                    session.add_message(Message("assistant", "answer"))
            with pool.connection() as conn:
                conn.pgconn.untrace()
        assert _round_trips(trace) == 1
    finally:
        pool.close()
    with PostgresSession("run", postgres_dsn(), table=table) as other:
        assert [m.content for m in other.get_messages()][-2:] == ["question", "answer"]


@pytest.mark.parametrize("fused", [False, True], ids=["append", "append-then-read"])
@pytest.mark.parametrize("move", ["undo", "clear"])
def test_a_guarded_append_after_the_history_moved_writes_nothing(
    table: str, fused: bool, move: str
) -> None:
    dsn = postgres_dsn()
    with PostgresSession("run", dsn, table=table) as session:
        session.add_message(Message("user", "earlier"))
        session.add_message(Message("assistant", "earlier answer"))
        guard = TurnGuard()
        with guarding(guard):
            session.add_message(Message("user", "question"))
        with PostgresSession("run", dsn, table=table) as worker:
            if move == "undo":
                assert [m.content for m in worker.undo()] == ["question"]
            else:
                worker.clear()
        with guarding(guard), pytest.raises(HistoryMoved):
            if fused:
                session._add_then_get([Message("assistant", "answer")])
            else:
                session.add_message(Message("assistant", "answer"))
        expected = ["earlier", "earlier answer"] if move == "undo" else []
        assert [m.content for m in session.get_messages()] == expected
        with PostgresSession("run", dsn, table=table) as reader:
            assert [m.content for m in reader.get_messages()] == expected
            assert reader.info().message_count == len(expected)
