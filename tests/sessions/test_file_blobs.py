"""Attachments in the file store, kept apart from the records once per content
(``.blobs/`` in the session directory): round trips, one file for many sends, blobs removed
with the last record naming them (undo, clear, import, prune, delete), records of the
previous layout (bytes inline), a missing blob, and the async twin."""

from __future__ import annotations

import base64
import os
import threading
from datetime import timedelta
from pathlib import Path

import pytest

from aniki import Attachment, CorruptStoreError, Message
from aniki.sessions import AsyncFileSession, FileSession, FileStore
from aniki.sessions._blobs import digest
from aniki.sessions.file import _attachments
from aniki.sessions.file._format import header, record_line

IMAGE = os.urandom(50_000)
OTHER = os.urandom(30_000)


def _with(data: bytes, text: str = "look", name: str | None = "photo.png") -> Message:
    return Message("user", text, attachments=(Attachment("image/png", data=data, name=name),))


def _said(text: str) -> Message:
    return Message("assistant", text)


def _blobs(directory: Path) -> set[str]:
    folder = directory / ".blobs"
    if not folder.exists():
        return set()
    return {p.name for p in folder.iterdir() if len(p.name) == 64}


def _size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def test_attachments_round_trip_through_every_read(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.add_message(_with(IMAGE))
    session.add_messages([_said("nice"), _with(OTHER, "and this", None), _said("also nice")])
    for reader in (session, FileSession("s", tmp_path)):
        history = reader.get_messages()
        assert [m.attachments[0].data for m in history[::2]] == [IMAGE, OTHER]
        assert history[0].attachments[0].name == "photo.png"
        assert history[0].attachments[0].media_type == "image/png"
        assert history[2].attachments[0].name is None
    assert FileSession("s", tmp_path).get_messages(limit=2)[0].attachments[0].data == OTHER
    page = FileSession("s", tmp_path)._page(0, 1)
    assert page.messages[0].attachments[0].data == IMAGE
    assert _blobs(tmp_path) == {digest(IMAGE), digest(OTHER)}
    assert IMAGE not in session.path.read_bytes()  # the record names it; it is not in it
    assert base64.b64encode(IMAGE[:300]) not in session.path.read_bytes()
    assert session.info().message_count == 4


def test_ten_sends_of_one_image_keep_it_once(tmp_path: Path) -> None:
    once, ten = tmp_path / "once", tmp_path / "ten"
    FileSession("s", once).add_message(_with(IMAGE))
    session = FileSession("s", ten)
    for number in range(10):
        session.add_message(_with(IMAGE, f"again {number}"))
    assert len(_blobs(ten)) == 1
    assert _size(ten) <= 1.2 * _size(once)
    assert [m.attachments[0].data for m in FileSession("s", ten).get_messages()] == [IMAGE] * 10


def test_a_blob_goes_with_the_last_session_that_names_it(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    first, second = store.session("first"), store.session("second")
    for session, owner in ((first, "a"), (second, "b")):
        session.set_info(owner=owner)
        session.add_message(_with(IMAGE))
    assert store.delete_sessions(owner="a") == 1
    assert FileSession("second", tmp_path).get_messages()[0].attachments[0].data == IMAGE
    assert _blobs(tmp_path) == {digest(IMAGE)}
    assert store.prune(older_than=timedelta(microseconds=1)) == 1
    assert _blobs(tmp_path) == set()


def test_undo_clear_and_import_release_what_they_remove(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.add_messages([_with(IMAGE), _said("one")])
    session.add_messages([_with(IMAGE, "the same again"), _said("two")])
    session.add_messages([_with(OTHER, "another"), _said("three")])
    session.undo()  # a line cut off: OTHER is named no more, IMAGE still is
    assert _blobs(tmp_path) == {digest(IMAGE)}
    session.add_message(_with(OTHER, "inside a batch"))
    session.add_messages([_said("x"), _with(OTHER, "y"), _said("z")])
    session.undo()  # the turn starts inside a batch: a new file, OTHER still named before it
    assert _blobs(tmp_path) == {digest(IMAGE), digest(OTHER)}
    session._replace([_with(OTHER, "imported")])  # IMAGE named no more
    assert _blobs(tmp_path) == {digest(OTHER)}
    child = session.fork("child")
    session.clear()
    assert _blobs(tmp_path) == {digest(OTHER)}  # the fork names it
    assert child.get_messages()[0].attachments[0].data == OTHER
    child.undo()
    assert _blobs(tmp_path) == set()
    assert FileSession("s", tmp_path).get_messages() == ()


def test_a_record_of_the_previous_layout_reads_as_it_is(tmp_path: Path) -> None:
    inline = _with(IMAGE)
    path = tmp_path / "old.jsonl"
    path.write_bytes(header("old", 0) + record_line([inline]))  # the bytes inline, base64
    session = FileSession("old", tmp_path)
    assert session.get_messages() == (inline,)
    session.add_message(_with(IMAGE, "new"))  # written apart, beside the inline one
    assert [m.attachments[0].data for m in FileSession("old", tmp_path).get_messages()] == [
        IMAGE,
        IMAGE,
    ]
    assert FileStore(tmp_path).list_sessions()[0].message_count == 2


def test_a_missing_blob_is_refused_by_name_and_nothing_leaks(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.add_message(_with(IMAGE))
    (tmp_path / ".blobs" / digest(IMAGE)).unlink()
    with pytest.raises(CorruptStoreError) as raised:
        FileSession("s", tmp_path).get_messages()
    text = str(raised.value)
    assert "missing" in text and f"file://{session.path}" in text
    assert digest(IMAGE)[:12] in text and digest(IMAGE) not in text
    assert base64.b64encode(IMAGE[:30]).decode() not in text
    # A listing and info() count the record without reading its blob.
    assert FileSession("s", tmp_path).info().message_count == 1
    assert [i.message_count for i in FileStore(tmp_path).list_sessions()] == [1]


def test_a_listing_never_reads_a_blob(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = FileSession("s", tmp_path)
    session.set_info(owner="o")
    session.add_messages([_with(IMAGE), _said("seen")])
    monkeypatch.setattr(_attachments, "read", lambda *args: pytest.fail("a blob was read"))
    assert [i.message_count for i in FileStore(tmp_path).list_sessions(owner="o")] == [2]


async def test_the_async_twin_stores_and_reads_attachments_apart(tmp_path: Path) -> None:
    session = AsyncFileSession("s", tmp_path)
    await session.add_message(_with(IMAGE))
    await session.add_messages([_said("ok"), _with(IMAGE, "again")])
    fresh = AsyncFileSession("s", tmp_path)
    history = await fresh.get_messages()
    assert [m.attachments[0].data for m in history[::2]] == [IMAGE, IMAGE]
    assert _blobs(tmp_path) == {digest(IMAGE)}
    await session.clear()
    assert _blobs(tmp_path) == set()
    await session.aclose()
    await fresh.aclose()


def test_sessions_sending_and_dropping_one_image_at_once_never_lose_it(tmp_path: Path) -> None:
    # Each session sends the image, reads it back from a fresh instance and clears, over and
    # over: each clear may remove the blob while another session is sending it.
    errors: list[BaseException] = []

    def churn(session_id: str) -> None:
        session = FileSession(session_id, tmp_path)
        try:
            for number in range(40):
                session.add_messages([_with(IMAGE, f"q{number}"), _said("a")])
                fresh = FileSession(session_id, tmp_path).get_messages()
                assert [m.attachments[0].data for m in fresh[::2]] == [IMAGE]
                session.clear()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=churn, args=(f"s{n}",)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert _blobs(tmp_path) == set()
    keeper = FileSession("keeper", tmp_path, durability="full")
    keeper.add_message(_with(IMAGE))
    keeper._add_after([_with(OTHER, "after")], keeper.get_messages()[-1].id)
    assert [m.attachments[0].data for m in FileSession("keeper", tmp_path).get_messages()] == [
        IMAGE,
        OTHER,
    ]
