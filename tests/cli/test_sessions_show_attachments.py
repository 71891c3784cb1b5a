"""``aniki sessions show`` names attachments (media type, size, hash, name) without reading
their bytes, on every store: a blob deleted behind the store's back leaves ``show`` whole,
while ``export``, which writes the bytes, reports it missing."""

from __future__ import annotations

import hashlib
import os
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
from .test_cli import aniki

NAME = "[bold]chart[/bold] \x1b[31m.png"
"""A file name that would restyle a terminal if it were printed as markup or as it is."""
SHOWN_NAME = "[bold]chart[/bold] \\x1b[31m.png"


def _photo(data: bytes, text: str) -> Message:
    return Message("user", text, attachments=(Attachment("image/png", data=data, name=NAME),))


def _described(data: bytes) -> str:
    return f"image/png, 200 KB, sha256 {hashlib.sha256(data).hexdigest()[:12]}…, {SHOWN_NAME}"


@pytest.fixture(params=["sqlite", "file", "redis", "postgres"])
def store_at(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str | Path]]:
    """``(url, place)``: a store, and where its blobs are (see ``drop_blob``)."""
    kind = request.param
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'chats.db'}", tmp_path / "chats.db"
    elif kind == "file":
        yield f"file://{tmp_path / 'chats'}", tmp_path / "chats"
    elif kind == "redis":
        yield redis_url(), "aniki:"  # the command opens a store with its default names
    else:
        yield postgres_dsn(), "aniki_messages"


async def test_show_names_attachments_without_reading_them(
    store_at: tuple[str, str | Path], tmp_path: Path
) -> None:
    url, place = store_at
    kind = url.partition(":")[0].replace("postgresql", "postgres")
    session_id = f"shown-{uuid.uuid4().hex[:10]}"
    image = os.urandom(200 * 1024)  # bytes no other test writes: its blob is this test's
    with open_store(url) as store:
        store.session(session_id).add_messages([_photo(image, ""), Message("assistant", "ok")])
    drop_blob(kind, place, hashlib.sha256(image).hexdigest())
    try:
        code, out, err = await aniki(tmp_path, "sessions", "show", session_id, "--store", url)
        assert code == 0, err
        assert f"📎 {_described(image)}" in out
        assert "\x1b" not in out
        code, out, err = await aniki(tmp_path, "sessions", "export", session_id, "--store", url)
        # The bytes, read: the record names a blob the store lacks, and the error says so.
        assert code != 0 and "CorruptStoreError" in err
        assert "missing" in err
    finally:
        if kind in ("redis", "postgres"):  # shared servers; a local store goes with tmp_path
            with open_store(url) as store:
                store.session(session_id).clear()


async def test_show_names_a_record_written_before_blobs_alike(tmp_path: Path) -> None:
    image = os.urandom(200 * 1024)
    sqlite = Store("sqlite", tmp_path)  # appends a record as another program would
    sqlite.open("s").add_message(_photo(image, "new"))
    sqlite.append_raw("s", encode_message(_photo(image, "old")))  # the bytes inline, base64
    sqlite.close()
    url = f"sqlite:///{tmp_path / 'store.db'}"
    code, out, err = await aniki(tmp_path, "sessions", "show", "s", "--store", url)
    assert code == 0, err
    assert out.count(_described(image)) == 2


async def test_show_of_a_missing_session_or_store_fails(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'none.db'}"
    code, _, err = await aniki(tmp_path, "sessions", "show", "x", "--store", url)
    assert code != 0 and "no session 'x'" in err
    assert not (tmp_path / "none.db").exists()  # only read: nothing made
    Store("sqlite", tmp_path).open("other").add_message(Message("user", "hi"))
    url = f"sqlite:///{tmp_path / 'store.db'}"
    code, _, err = await aniki(tmp_path, "sessions", "show", "x", "--store", url)
    assert code != 0 and "no session 'x'" in err
