"""A long first read pauses the cyclic garbage collector while it fetches and decodes
(aniki.sessions._gc), and leaves it as it found it."""

from __future__ import annotations

import gc
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aniki import CorruptStoreError, Message
from aniki.sessions import FileSession, SQLiteSession
from aniki.sessions._codec import decode_records, encode_message


@pytest.fixture
def collections() -> Iterator[list[int]]:
    seen: list[int] = []

    def note(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(note)
    try:
        yield seen
    finally:
        gc.callbacks.remove(note)


def _stored(path: Path, count: int) -> None:
    SQLiteSession("long", path).add_messages(
        [Message("user" if i % 2 == 0 else "assistant", f"message {i}") for i in range(count)]
    )


def test_a_long_first_read_runs_no_collection(tmp_path: Path, collections: list[int]) -> None:
    _stored(tmp_path / "a.db", 5_000)
    session = SQLiteSession("long", tmp_path / "a.db")
    gc.collect()
    collections.clear()
    # 10,000 tracked objects (rows and messages): without the pause, a dozen collections;
    # with it none, not even one to catch up once the read is over: what the read made goes
    # to the oldest generation as it is, and the young generation's count starts afresh.
    assert len(session.get_messages()) == 5_000
    assert collections == []
    assert gc.isenabled()
    collections.clear()
    tail = SQLiteSession("long", tmp_path / "a.db").get_messages(limit=3_000)
    assert len(tail) == 3_000
    assert collections == []
    assert gc.isenabled()


def test_after_a_long_read_the_young_generation_starts_afresh(tmp_path: Path) -> None:
    _stored(tmp_path / "a.db", 5_000)
    session = SQLiteSession("long", tmp_path / "a.db")
    gc.collect()
    assert len(session.get_messages()) == 5_000
    young, _, _ = gc.get_count()
    assert young < 100  # not the 10,000 objects the read made, waiting to be walked
    assert gc.get_freeze_count() == 0


def test_a_short_first_read_leaves_the_young_generation_as_it_was(tmp_path: Path) -> None:
    # A server making a session object per request reads a short history on every request:
    # each read must not reset the young generation, or its collections would never run.
    _stored(tmp_path / "a.db", 3)
    gc.collect()
    garbage = [[] for _ in range(300)]  # young objects the application made
    before, _, _ = gc.get_count()
    assert len(SQLiteSession("long", tmp_path / "a.db").get_messages()) == 3
    young, _, _ = gc.get_count()
    assert young >= before
    del garbage


def test_objects_an_application_froze_stay_frozen(tmp_path: Path, collections: list[int]) -> None:
    _stored(tmp_path / "a.db", 5_000)
    session = SQLiteSession("long", tmp_path / "a.db")
    gc.collect()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        collections.clear()
        assert len(session.get_messages()) == 5_000
        # Neither unfrozen (0) nor joined by the read's objects (5,000 more); one of the
        # frozen objects may have been freed meanwhile.
        assert frozen - 100 < gc.get_freeze_count() <= frozen
        assert gc.isenabled()
        assert collections in ([], [0])  # the collector resumed as it was: it may catch up
    finally:
        gc.unfreeze()


def test_a_collector_switched_off_stays_off(tmp_path: Path) -> None:
    _stored(tmp_path / "a.db", 3_000)
    gc.disable()
    try:
        assert len(SQLiteSession("long", tmp_path / "a.db").get_messages()) == 3_000
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_collector_runs_again_after_a_read_that_failed(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    _stored(path, 10)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE aniki_messages SET body = '{not json' WHERE key % 4294967296 = 5")
    with pytest.raises(CorruptStoreError, match="cannot be read"):
        SQLiteSession("long", path).get_messages()
    assert gc.isenabled()


def test_a_long_first_read_of_a_session_file_runs_no_collection(
    tmp_path: Path, collections: list[int]
) -> None:
    FileSession("long", tmp_path).add_messages(
        [Message("user" if i % 2 == 0 else "assistant", f"message {i}") for i in range(5_000)]
    )
    session = FileSession("long", tmp_path)
    gc.collect()
    collections.clear()
    assert len(session.get_messages()) == 5_000
    assert collections == []
    assert gc.isenabled()


def test_many_records_decode_with_the_collector_paused(collections: list[int]) -> None:
    records = [encode_message(Message("user", f"message {i}")) for i in range(5_000)]
    gc.collect()
    collections.clear()
    decoded = decode_records(records, store="test")
    assert [m.content for m in decoded[:2]] == ["message 0", "message 1"]
    assert collections == []
    assert gc.isenabled()
