"""Prune and delete on a SQLite store: whole sessions, in batches, safe beside writers, and
bad input refused before the file is touched."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from aniki import Message, UserError
from aniki.sessions import SQLiteSession, SQLiteStore, open_store
from aniki.sessions._catalog import PRUNE_BATCH
from aniki.sessions.base import SessionInfo

_DAY = 86400.0


def _user(text: str) -> Message:
    return Message("user", text)


def _age(path: Path, days: float, where: str = "1") -> None:
    """Make sessions look last written ``days`` earlier (as if the writes had been then)."""
    with sqlite3.connect(path) as conn:
        # A session's updated_at is its row's or its last message's, whichever is later.
        conn.execute(
            "UPDATE aniki_messages SET created_at = created_at - ? WHERE key >> 32 IN"
            f" (SELECT number FROM aniki_sessions WHERE updated_at IS NOT NULL AND {where})",
            (days * _DAY,),
        )
        conn.execute(
            f"UPDATE aniki_sessions SET updated_at = updated_at - ?, created_at = created_at - ?"
            f" WHERE updated_at IS NOT NULL AND {where}",
            (days * _DAY, days * _DAY),
        )


def _rows(path: Path, session_id: str) -> dict[str, int]:
    """How many rows of each table belong to ``session_id``."""
    with sqlite3.connect(path) as conn:
        (number,) = conn.execute(
            "SELECT number FROM aniki_sessions WHERE id = ?", (session_id,)
        ).fetchone()
        low = number << 32
        messages = "SELECT count(*) FROM aniki_messages WHERE key > ? AND key < ?"
        info = (
            "SELECT count(*) FROM aniki_sessions WHERE number = ? AND (title IS NOT NULL"
            " OR owner IS NOT NULL OR tags != '[]' OR created_at IS NOT NULL"
            " OR updated_at IS NOT NULL)"
        )
        queries: dict[str, tuple[str, tuple[object, ...]]] = {
            "messages": (messages, (low, low + (1 << 32))),
            "meta": ("SELECT count(*) FROM aniki_session_meta WHERE session_id = ?", (session_id,)),
            "tags": ("SELECT count(*) FROM aniki_session_tags WHERE number = ?", (number,)),
            "info": (info, (number,)),
        }
        return {
            name: conn.execute(sql, args).fetchone()[0] for name, (sql, args) in queries.items()
        }


def test_a_prune_removes_every_row_of_a_session_and_nothing_else(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    for session_id in ("old", "new"):
        session = SQLiteSession(session_id, path)
        session.add_messages([_user("q"), Message("assistant", "a")])
        session.set_meta("aniki.summary", {"text": "s"})
        session.set_info(title="t", owner="o", tags=["x", "y"])
    _age(path, 40, "id = 'old'")
    store = SQLiteStore(path)
    assert store.prune(older_than=timedelta(days=30), owner="someone-else") == 0
    assert store.prune(older_than=timedelta(days=30)) == 1
    assert _rows(path, "old") == {"messages": 0, "meta": 0, "tags": 0, "info": 0}
    assert _rows(path, "new") == {"messages": 2, "meta": 1, "tags": 2, "info": 1}
    assert [info.id for info in store.list_sessions(tag="x")] == ["new"]
    assert store.delete_sessions(owner="o") == 1
    assert _rows(path, "new") == {"messages": 0, "meta": 0, "tags": 0, "info": 0}
    assert store.list_sessions() == []


def test_250_sessions_are_pruned_in_3_transactions(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    store = SQLiteStore(path)
    for number in range(250):
        session = store.session(f"s{number:03d}")
        session.add_message(_user("q"))
        session.set_info(owner="big")
    _age(path, 40)
    db = store._existing()
    assert db is not None
    traced: list[str] = []
    db.conn.set_trace_callback(traced.append)
    try:
        assert store.prune(older_than=timedelta(days=30), owner="big") == 250
    finally:
        db.conn.set_trace_callback(None)
    batches: list[int] = []
    for statement in traced:
        if statement == "BEGIN IMMEDIATE":
            batches.append(0)
        elif statement.startswith("UPDATE aniki_sessions SET generation"):
            batches[-1] += 1  # one session emptied
    assert batches == [PRUNE_BATCH, PRUNE_BATCH, 50]
    assert traced.count("COMMIT") == 3
    assert store.list_sessions(owner="big") == []


def _whole_or_gone(path: Path, ids: list[str], appended: dict[str, int]) -> int:
    """Check that each session holds its old history and every pair appended, or only pairs
    appended after it went (its meta gone with it); how many were kept."""
    kept = 0
    for session_id in ids:
        session = SQLiteSession(session_id, path)
        texts = [message.content for message in session.get_messages()]
        new = [f"{session_id} new", "new"]
        if texts[:2] == ["old", "old answer"]:  # kept whole: written before its batch came
            kept += 1
            assert texts[2:] == new * appended[session_id]
            assert session.get_meta("summary") == "old"
        else:  # gone whole: only what was appended after it went, in whole batches
            assert texts == new * (len(texts) // 2)
            assert session.get_meta("summary") is None
        assert session.info().message_count == len(texts)
    return kept


def test_appends_between_and_during_a_prunes_batches_leave_each_session_whole_or_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chat.db"
    ids = [f"s{number:03d}" for number in range(250)]
    old = [_user("old"), Message("assistant", "old answer")]
    for session_id in ids:
        session = SQLiteSession(session_id, path)
        session.add_messages(old)
        session.set_meta("summary", "old")
    _age(path, 40)
    store = SQLiteStore(path)
    db = store._existing()
    assert db is not None
    turn, done, finished = threading.Semaphore(0), threading.Semaphore(0), threading.Event()
    transaction = db.transaction

    @contextmanager
    def paced(*, write: bool) -> Iterator[sqlite3.Connection]:
        with transaction(write=write) as conn:
            yield conn
        if write:  # a batch committed: the writer's turn, before the next batch
            turn.release()
            assert done.acquire(timeout=30)

    monkeypatch.setattr(db, "transaction", paced)
    appended: dict[str, int] = {}

    def append(session: SQLiteSession) -> None:
        session.add_messages([_user(f"{session.id} new"), Message("assistant", "new")])
        appended[session.id] = appended.get(session.id, 0) + 1

    def write() -> None:
        # Its own connection (another timeout: another Database): its appends contend with
        # the prune's transactions for the file's lock.
        sessions = [SQLiteSession(session_id, path, timeout=9.0) for session_id in ids]
        while not finished.is_set():
            if not turn.acquire(timeout=0.05):
                continue
            for session in sessions[::2]:  # between two batches
                append(session)
            done.release()
            append(sessions[-1])  # during the next batch: waits for it to commit

    writer = threading.Thread(target=write)
    writer.start()
    try:
        removed = store.prune(older_than=timedelta(days=30))
    finally:
        finished.set()
        writer.join(60)
    kept = _whole_or_gone(path, ids, appended)
    assert kept + removed == len(ids)
    assert kept > 0 and removed > PRUNE_BATCH  # the writes came between the batches


def test_an_instance_holding_a_pruned_session_starts_it_afresh(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    held = SQLiteSession("held", path)
    held.add_messages([_user("before"), Message("assistant", "a")])
    neighbour = SQLiteSession("neighbour", path)
    neighbour.add_message(_user("mine"))
    _age(path, 40, "id = 'held'")
    assert SQLiteStore(path).prune(older_than=timedelta(days=30)) == 1
    assert held.get_messages() == ()  # its cache starts over, as after a clear
    SQLiteSession("newcomer", path).add_message(_user("newcomer's"))
    held.add_message(_user("after"))
    assert [m.content for m in SQLiteSession("held", path).get_messages()] == ["after"]
    assert [m.content for m in neighbour.get_messages()] == ["mine"]
    assert [m.content for m in SQLiteSession("newcomer", path).get_messages()] == ["newcomer's"]
    assert held.info().message_count == 1


def test_a_missing_file_lists_and_prunes_nothing_without_creating_it(tmp_path: Path) -> None:
    path = tmp_path / "absent.db"
    store = SQLiteStore(path)
    assert store.list_sessions(owner="o") == []
    assert store.prune(older_than=timedelta(days=1)) == 0
    assert store.delete_sessions(owner="o") == 0
    assert not path.exists()


@pytest.mark.parametrize(
    "call",
    [
        lambda store: store.list_sessions(limit=0),
        lambda store: store.list_sessions(owner=""),
        lambda store: store.list_sessions(tag="x" * 101),
        lambda store: store.list_sessions(updated_after=datetime(2026, 1, 1)),
        lambda store: store.list_sessions(cursor=SessionInfo("s", 0, None)),
        lambda store: store.list_sessions(order="created"),
        lambda store: store.prune(older_than=timedelta(0)),
        lambda store: store.prune(older_than=30),
        lambda store: store.prune(older_than=timedelta(days=1), owner="nul\x00"),
        lambda store: store.delete_sessions(owner=""),
        lambda store: store.session("s").set_info(title=""),
        lambda store: store.session("s").set_info(tags="one-string"),
        lambda store: store.session("s").set_info(owner=7),
    ],
)
def test_bad_input_is_refused_before_the_file_is_touched(tmp_path: Path, call: object) -> None:
    path = tmp_path / "chat.db"
    with pytest.raises(UserError):
        call(SQLiteStore(path))  # type: ignore[operator]
    with pytest.raises(UserError):
        call(open_store(f"sqlite:///{path}"))  # type: ignore[operator]
    assert not path.exists()


def test_times_are_utc_and_prune_counts_on_the_cutoff(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    SQLiteSession("s", path).add_message(_user("q"))
    info = SQLiteStore(path).list_sessions()[0]
    assert info.updated_at is not None and info.updated_at.tzinfo == timezone.utc
    _age(path, 2)
    store = SQLiteStore(path)
    assert store.prune(older_than=timedelta(days=3)) == 0
    assert store.prune(older_than=timedelta(days=1)) == 1
