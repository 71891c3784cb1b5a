"""``read_named_page``: a page whose attachments are named (media type, size, hash, name or
URL) without their bytes being read, on every store (Redis and PostgreSQL skip when their
servers are down, and fail under ``CI=true``).

Each store test deletes a blob behind the store's back: the named page still describes the
attachment, while a read of the bytes reports the blob missing.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from aniki import CorruptStoreError, Message
from aniki.messages import Attachment
from aniki.sessions import InMemorySession
from aniki.sessions._blobs import AttachmentRef, described, described_message, split
from aniki.sessions._codec import encode_message
from aniki.sessions._pages import NamedPage, Page, read_named_page, read_page

from ..servers import postgres_dsn, redis_url
from .stores import counting
from .test_pages import STORES, Store

IMAGE = os.urandom(200 * 1024)
"""Bytes no other test writes: deleting their blob touches nothing else."""
KEY = hashlib.sha256(IMAGE).hexdigest()
PDF = Attachment("application/pdf", url="https://example.com/report.pdf", name="report.pdf")
PDF_REF = AttachmentRef.of(PDF)


def _photo(text: str = "") -> Message:
    """A user message of an image alone (``text`` empty): only its attachment says anything."""
    picture = Attachment("image/png", data=IMAGE, name="<b>chart</b>.png")
    return Message("user", text, attachments=(picture, PDF))


def _image_named() -> AttachmentRef:
    return AttachmentRef("image/png", len(IMAGE), KEY, "<b>chart</b>.png")


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened = Store(request.param, tmp_path)
    yield opened
    opened.close()


def drop_blob(kind: str, place: str | Path, key: str) -> None:
    """Delete the blob ``key`` as something other than aniki would, its references kept:
    ``place`` is the SQLite file, the session directory, the Redis prefix or the PostgreSQL
    table."""
    if kind == "sqlite":
        with sqlite3.connect(place) as conn:
            assert conn.execute("DELETE FROM aniki_blobs WHERE hash = ?", (key,)).rowcount == 1
    elif kind == "file":
        (Path(place) / ".blobs" / key).unlink()
    elif kind == "redis":
        import redis

        client = redis.Redis.from_url(redis_url())
        try:
            assert client.delete(f"{place}blob:{key}") == 1
        finally:
            client.close()
    else:
        import psycopg

        with psycopg.connect(postgres_dsn(), autocommit=True) as conn:
            deleted = conn.execute(f'DELETE FROM "{place}_blobs" WHERE hash = %s', (key,))
            assert deleted.rowcount == 1


def _drop(store: Store, key: str) -> None:
    places = {"sqlite": store.tmp_path / "store.db", "file": store.tmp_path / "files"}
    drop_blob(store.kind, places.get(store.kind) or store.prefix or store.table, key)


# --- every store ----------------------------------------------------------------------------


def test_a_named_page_reads_no_blob(store: Store) -> None:
    writer = store.open("s")
    writer.add_messages([Message("user", "look"), _photo(), Message("assistant", "a chart")])
    writer.add_message(_photo("again"))  # the same bytes: one blob, named twice
    if store.kind != "memory":  # an in-memory session keeps its messages, not records
        _drop(store, KEY)
    page = read_named_page(store.open("s"), 0, 10)
    assert isinstance(page, NamedPage) and (page.total, page.start) == (4, 0)
    assert [m.content for m in page.messages] == ["look", "", "a chart", "again"]
    assert all(not m.attachments for m in page.messages)
    both = (_image_named(), PDF_REF)
    assert page.attachments == ((), both, (), both)
    assert page.attachments[1][0].line() == (
        f"image/png, 200 KB, sha256 {KEY[:12]}…, <b>chart</b>.png"
    )
    tail = read_named_page(store.open("s"), -1, 1)  # the last page alone
    assert (tail.start, tail.attachments) == (3, (both,))
    if store.kind == "memory":
        assert read_page(writer, 1, 1).messages[0].attachments[0].data == IMAGE  # untouched
        return
    with pytest.raises(CorruptStoreError, match=f"sha256:{KEY[:12]}.*missing"):
        read_page(store.open("s"), 0, 10)  # a read of the bytes finds the blob gone


def test_a_named_page_asks_for_no_blob(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """What each store's page reader calls to read blobs, counted: never, for a named page."""
    from aniki.sessions.file._file import SessionFile
    from aniki.sessions.postgres import _pages as postgres_pages
    from aniki.sessions.redis import _pages as redis_pages
    from aniki.sessions.sqlite import _pages as sqlite_pages

    store.open("s").add_messages([_photo(), _photo("again")])  # one line in a file store
    calls = [
        counting(monkeypatch, sqlite_pages, "fetch"),
        counting(monkeypatch, SessionFile, "decode"),
        counting(monkeypatch, redis_pages, "fetch"),
        counting(monkeypatch, postgres_pages, "load"),
    ]
    assert len(read_named_page(store.open("s"), 0, 2).attachments) == 2
    assert sum(map(len, calls)) == 0
    read_page(store.open("s"), 0, 2)
    assert sum(map(len, calls)) == (0 if store.kind == "memory" else 1)


def test_a_record_written_before_blobs_is_named_as_one_naming_a_blob(store: Store) -> None:
    if store.kind == "memory":
        pytest.skip("an in-memory session holds no records")
    store.open("s").add_message(_photo("new"))
    store.append_raw("s", encode_message(_photo("old")))  # the bytes inline, as base64
    page = read_named_page(store.open("s"), 0, 2)
    assert [m.content for m in page.messages] == ["new", "old"]
    assert page.attachments[0] == page.attachments[1] == (_image_named(), PDF_REF)
    full = read_page(store.open("s"), 0, 2)
    assert full.messages[1].attachments[0].data == IMAGE


def test_an_empty_or_past_the_end_named_page(store: Store) -> None:
    assert read_named_page(store.open("never"), 0, 5) == NamedPage(0, 0, (), ())
    store.open("s").add_message(_photo("one"))
    assert read_named_page(store.open("s"), 5, 5) == NamedPage(1, 1, (), ())
    assert read_named_page(store.open("s"), 0, 0) == NamedPage(1, 0, (), ())


def test_a_damaged_reference_fails_the_named_page(store: Store) -> None:
    if store.kind == "memory":
        pytest.skip("an in-memory session holds no records")
    store.open("s").add_message(Message("user", "fine"))
    record, _ = split(_photo("bad"))
    store.append_raw("s", record.replace(f'"size":{len(IMAGE)}', '"size":"big"'))
    with pytest.raises(CorruptStoreError, match="damaged"):
        read_named_page(store.open("s"), 0, 5)
    assert read_named_page(store.open("s"), 0, 1).messages[0].content == "fine"


def test_a_full_read_after_a_named_one_still_loads_the_bytes(store: Store) -> None:
    session = store.open("s")
    session.add_message(_photo("one"))
    read_named_page(session, 0, 1)
    page = read_page(session, 0, 1)
    assert type(page) is Page
    assert page.messages[0].attachments[0].data == IMAGE


# --- the records themselves -------------------------------------------------------------


def test_described_checks_a_record_as_a_full_read_does() -> None:
    record, blobs = split(_photo("x"))
    assert list(blobs) == [KEY]
    message, named = described(record, store="test")
    assert message.content == "x" and named == (_image_named(), PDF_REF)
    for bad in (
        record.replace('"image/png"', '"image/bmp"'),  # a media type no attachment has
        record.replace('"role":"user"', '"role":"assistant"'),  # attachments on a reply
        record.replace(f'"blob":"{KEY}"', f'"blob":"{KEY[:10]}"'),  # not a hash
    ):
        with pytest.raises(CorruptStoreError):
            described(bad, store="test")


def test_a_message_named_from_memory_is_a_copy() -> None:
    message = _photo("x")
    bare, named = described_message(message)
    assert bare is not message and not bare.attachments and len(message.attachments) == 2
    assert named[0] == _image_named()
    assert described_message(Message("user", "plain"))[1] == ()


def test_a_session_without_pages_is_named_from_its_messages() -> None:
    class Plain:
        def get_messages(self) -> tuple[Message, ...]:
            return (Message("user", "hi"), _photo("p"))

    page = read_named_page(Plain(), -1, 1)
    assert (page.total, page.start, page.attachments) == (2, 1, ((_image_named(), PDF_REF),))


@pytest.mark.parametrize(
    ("size", "shown"),
    [
        (1, "1 byte"),
        (20, "20 bytes"),
        (1023, "1,023 bytes"),
        (1536, "1.5 KB"),
        (200 * 1024, "200 KB"),
        (3 * 1024 * 1024 + 1, "3.0 MB"),
        (20 * 1024 * 1024, "20 MB"),
    ],
)
def test_sizes_read_plainly(size: int, shown: str) -> None:
    named = AttachmentRef("audio/wav", size, "ab" * 32)
    assert named.line() == f"audio/wav, {shown}, sha256 {'ab' * 6}…"


def test_an_attachment_by_url_is_named_by_its_url() -> None:
    assert AttachmentRef.of(PDF).line() == (
        "application/pdf, at https://example.com/report.pdf, report.pdf"
    )
    assert read_named_page(InMemorySession("m"), 0, 1) == NamedPage(0, 0, (), ())
