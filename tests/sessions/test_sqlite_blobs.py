"""Attachments in a SQLite store: kept apart from their messages, once per content, removed
with the last message that names them, read back whole by every read path."""

from __future__ import annotations

import base64
import json
import os
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from aniki import CorruptStoreError, Message
from aniki.messages import Attachment
from aniki.sessions import AsyncSQLiteSession, SQLiteSession, SQLiteStore
from aniki.sessions._codec import encode_message
from aniki.sessions._guard import TurnGuard, guarding
from aniki.sessions.sqlite import _blobs as blobs_module
from aniki.sessions.sqlite._schema import MIGRATIONS, statements
from aniki.sessions.sqlite._sql import APPEND, BLOCK, REGISTER

IMAGE = os.urandom(300 * 1024)
OTHER = os.urandom(1000)


def _photo(data: bytes = IMAGE, text: str = "look") -> Message:
    return Message("user", text, attachments=(Attachment("image/png", data=data, name="p.png"),))


def _blob_rows(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT count(*) FROM aniki_blobs").fetchone()[0])


def _link_rows(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT count(*) FROM aniki_blob_refs").fetchone()[0])


def _used_bytes(path: Path) -> int:
    """The store's own size: the pages in use, once the write-ahead log is checkpointed."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    return int((pages - free) * size)


def test_every_read_path_gives_the_bytes_back(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    writer = SQLiteSession("s", path)
    writer.add_message(_photo())
    writer.add_messages([Message("assistant", "nice"), _photo(OTHER, "and this")])
    sent = writer.get_messages()
    assert sent[0].attachments[0].data == IMAGE
    assert _blob_rows(path) == 2
    with sqlite3.connect(path) as conn:  # the record names the blob; the bytes are apart
        bodies = [row[0] for row in conn.execute("SELECT body FROM aniki_messages")]
    assert all(base64.b64encode(IMAGE[:30]).decode()[:20] not in body for body in bodies)
    fresh = SQLiteSession("s", path)
    assert fresh.get_messages(limit=1) == sent[-1:]  # the tail, nothing cached
    assert fresh.get_messages() == sent
    writer.add_message(_photo(text="again"))  # read past what the reader holds
    again = fresh.get_messages()
    assert again[-1].attachments[0] == Attachment("image/png", data=IMAGE, name="p.png")
    page = fresh._page(2, 2)
    assert page.messages == again[2:4] and page.total == 4
    assert _blob_rows(path) == 2  # the same bytes twice: one blob


def test_the_same_image_ten_times_is_stored_once(tmp_path: Path) -> None:
    once, ten = tmp_path / "once.db", tmp_path / "ten.db"
    SQLiteSession("s", once).add_message(_photo())
    session = SQLiteSession("s", ten)
    for turn in range(10):
        session.add_messages([_photo(text=f"turn {turn}"), Message("assistant", "seen")])
    assert _blob_rows(ten) == 1 and _link_rows(ten) == 10
    assert _used_bytes(ten) <= 1.2 * _used_bytes(once)


def test_a_blob_goes_with_the_last_message_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    store = SQLiteStore(path)
    first, second = store.session("first"), store.session("second")
    first.set_info(owner="ann")
    second.set_info(owner="bob")
    first.add_messages([_photo(), Message("assistant", "a")])
    second.add_messages([_photo(), Message("assistant", "b")])
    assert store.delete_sessions(owner="ann") == 1
    assert SQLiteSession("second", path).get_messages()[0].attachments[0].data == IMAGE
    assert _blob_rows(path) == 1
    assert store.delete_sessions(owner="bob") == 1
    assert (_blob_rows(path), _link_rows(path)) == (0, 0)


@pytest.mark.parametrize("removal", ["undo", "clear", "replace", "prune"])
def test_each_removal_drops_the_blobs_only_it_named(tmp_path: Path, removal: str) -> None:
    path = tmp_path / "chat.db"
    kept = SQLiteSession("kept", path)
    kept.add_message(_photo(OTHER))
    session = SQLiteSession("s", path)
    session.add_messages([Message("user", "first"), Message("assistant", "ok")])
    session.add_messages([_photo(), Message("assistant", "seen")])
    assert _blob_rows(path) == 2
    if removal == "undo":
        removed = session.undo()
        assert removed[0].attachments[0].data == IMAGE  # what was undone, whole
    elif removal == "clear":
        session.clear()
    elif removal == "replace":
        session._replace([Message("user", "imported"), _photo(OTHER, "shared with kept")])
    else:
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE aniki_sessions SET updated_at = 0 WHERE id = 's'")
            conn.execute(
                "UPDATE aniki_messages SET created_at = 0 WHERE key >> 32 ="
                " (SELECT number FROM aniki_sessions WHERE id = 's')"
            )
        assert SQLiteStore(path).prune(older_than=timedelta(days=1)) == 1
    assert _blob_rows(path) == 1  # only OTHER, which "kept" still names
    assert SQLiteSession("kept", path).get_messages()[0].attachments[0].data == OTHER


def test_a_fork_links_its_copies_so_the_blob_outlives_the_source(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    source = SQLiteSession("source", path)
    source.add_messages([_photo(), Message("assistant", "a"), _photo(OTHER, "two")])
    child = source.fork("child", upto=source.get_messages()[1].id)
    source.clear()
    assert _blob_rows(path) == 1  # OTHER went with the source; IMAGE stays for the child
    assert SQLiteSession("child", path).get_messages()[0].attachments[0].data == IMAGE
    child.clear()
    assert _blob_rows(path) == 0


def test_appends_after_a_message_and_under_a_turn_guard_keep_their_blobs(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    session = SQLiteSession("s", path)
    assert session._add_after([_photo()], None) is not None
    assert session._add_after([_photo(OTHER, "wrong place")], "no-such-id") is None
    with guarding(TurnGuard()):
        session.add_message(_photo(OTHER, "guarded"))
    read = SQLiteSession("s", path).get_messages()
    assert [m.attachments[0].data for m in read] == [IMAGE, OTHER]
    assert (_blob_rows(path), _link_rows(path)) == (2, 2)


def test_a_record_with_inline_bytes_from_an_older_store_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for step in MIGRATIONS[:3]:  # the layout before attachments went apart
        for statement in statements(step):
            conn.execute(statement)
    conn.execute("PRAGMA application_id = 1095650121")
    conn.execute("PRAGMA user_version = 3")
    conn.execute(REGISTER, ("old",))
    conn.execute(APPEND, (BLOCK, 2 * BLOCK, encode_message(_photo()), 1700000000.0))
    conn.close()
    session = SQLiteSession("old", path)
    assert session.get_messages()[0].attachments[0].data == IMAGE
    session.add_message(_photo(text="new"))  # a new one goes apart, beside the old
    assert [m.attachments[0].data for m in SQLiteSession("old", path).get_messages()] == [
        IMAGE,
        IMAGE,
    ]
    assert _blob_rows(path) == 1
    session.clear()
    assert _blob_rows(path) == 0


def test_a_missing_blob_is_damage_that_names_the_store_and_not_the_bytes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chat.db"
    SQLiteSession("s", path).add_message(_photo())
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM aniki_blobs")
    with pytest.raises(CorruptStoreError) as caught:
        SQLiteSession("s", path).get_messages()
    error = caught.value
    assert error.store == f"sqlite:///{path}" and "missing" in str(error)
    assert base64.b64encode(IMAGE[:12]).decode() not in str(error)
    assert IMAGE[:12].hex() not in str(error)


def test_a_blob_removed_between_the_two_reads_is_read_again_in_one_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chat.db"
    SQLiteSession("s", path).add_message(_photo())
    fetch = blobs_module.fetch
    calls: list[bool] = []

    def first_finds_nothing(conn: sqlite3.Connection, keys: Any) -> dict[str, bytes]:
        calls.append(conn.in_transaction)
        return {} if len(calls) == 1 else fetch(conn, keys)

    monkeypatch.setattr(blobs_module, "fetch", first_finds_nothing)
    assert SQLiteSession("s", path).get_messages()[0].attachments[0].data == IMAGE
    assert calls == [False, True]


def test_an_attachment_by_url_stays_in_its_record(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    linked = Attachment("image/png", url="https://example.com/p.png")
    session = SQLiteSession("s", path)
    session.add_message(Message("user", "see", attachments=(linked,)))
    assert SQLiteSession("s", path).get_messages()[0].attachments == (linked,)
    assert _blob_rows(path) == 0
    with sqlite3.connect(path) as conn:
        (body,) = conn.execute("SELECT body FROM aniki_messages").fetchone()
    assert json.loads(body)["attachments"][0]["url"] == "https://example.com/p.png"


async def test_the_async_twin_stores_and_reads_blobs(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    session = AsyncSQLiteSession("s", path)
    history = await session._add_then_get([_photo(), Message("assistant", "ok")])
    assert history[0].attachments[0].data == IMAGE
    await session.add_messages([_photo(OTHER, "more")])
    assert [len(m.attachments) for m in await session.get_messages(limit=2)] == [0, 1]
    assert len(await session.undo()) == 1
    assert _blob_rows(path) == 1
    await session.aclose()
