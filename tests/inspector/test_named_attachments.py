"""The inspector names attachments (media type, size, hash, name) without reading their bytes,
on every persistent store: a blob deleted behind the store's back leaves the pages whole,
and only the attachment's own download reports it missing."""

from __future__ import annotations

import hashlib
import os
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from aniki import Attachment, Message
from aniki.sessions import open_store
from aniki.sessions._codec import encode_message

from ..servers import postgres_dsn, redis_url
from ..sessions.test_pages import Store
from ..sessions.test_pages_named import drop_blob
from .test_http import fetch, page, text_of

pytest.importorskip("starlette", reason="the inspector needs the inspect extra")
pytest.importorskip("jinja2", reason="the inspector needs the inspect extra")

from aniki.inspector._serve import running

NAME = "<img src=x onerror=alert(1)>[bold]chart[/bold].png"
"""A file name that would render, or restyle a terminal, if it were shown as markup."""


def _photo(data: bytes, text: str) -> Message:
    note = Attachment("text/plain", data=b"a note", name="note.txt")
    return Message("user", text, attachments=(Attachment("image/png", data=data, name=NAME), note))


def _described(data: bytes) -> str:
    return f"image/png, 200 KB, sha256 {hashlib.sha256(data).hexdigest()[:12]}…, {NAME}"


@pytest.fixture(params=["sqlite", "file", "redis", "postgres"])
def store_at(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str | Path]]:
    """``(url, place)``: a store, and where its blobs are (see ``drop_blob``)."""
    kind = request.param
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'chats.db'}", tmp_path / "chats.db"
    elif kind == "file":
        yield f"file://{tmp_path / 'chats'}", tmp_path / "chats"
    elif kind == "redis":
        yield redis_url(), "aniki:"  # the inspector opens a store with its default names
    else:
        yield postgres_dsn(), "aniki_messages"


def test_pages_name_attachments_without_reading_them(store_at: tuple[str, str | Path]) -> None:
    url, place = store_at
    kind = url.partition(":")[0].replace("postgresql", "postgres")
    session_id = f"named-{uuid.uuid4().hex[:10]}"
    image = os.urandom(200 * 1024)  # bytes no other test writes: its blob is this test's
    with open_store(url) as store:
        store.session(session_id).add_messages(
            [_photo(image, "see the chart"), Message("assistant", "a rising line")]
        )
    drop_blob(kind, place, hashlib.sha256(image).hexdigest())
    try:
        with running(url) as address:
            html = page(address, f"/session?id={session_id}")
            assert _described(image) in text_of(html)
            assert "<img src=x" not in html and "&lt;img src=x onerror" in html
            assert f'title="sha256 {hashlib.sha256(image).hexdigest()}"' in html
            assert "text/plain, 6 bytes, sha256 " in text_of(html)
            query = urllib.parse.urlencode({"id": session_id, "q": "chart"})
            assert _described(image) in text_of(page(address, f"/search?{query}"))
            assert fetch(address, f"/usage?id={session_id}")[0] == 200
            status, _, body = fetch(address, f"/attachment?id={session_id}&index=0&part=0")
            assert status == 502 and b"missing" in body  # the bytes, read: the blob is gone
    finally:
        if kind in ("redis", "postgres"):  # shared servers (a damaged local store refuses
            with open_store(url) as store:  # writes, and goes with its temporary folder)
                store.session(session_id).clear()


def test_a_record_written_before_blobs_is_named_alike(tmp_path: Path) -> None:
    image = os.urandom(200 * 1024)
    sqlite = Store("sqlite", tmp_path)  # appends a record as another program would
    sqlite.open("s").add_message(_photo(image, "new"))
    sqlite.append_raw("s", encode_message(_photo(image, "old")))  # the bytes inline, base64
    sqlite.close()
    with running(f"sqlite:///{tmp_path / 'store.db'}") as address:
        shown = text_of(page(address, "/session?id=s"))
        assert shown.count(_described(image)) == 2
        status, _, body = fetch(address, "/attachment?id=s&index=1&part=0")
        assert (status, body) == (200, image)
