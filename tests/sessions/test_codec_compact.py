"""The compact record of a text message (aniki.sessions._codec_compact): what is written so,
that it reads back equal, that anything else keeps its JSON record, and that a record not
written by aniki is damage, worded; and the SQLite store writing it."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aniki import Attachment, CorruptStoreError, Message, Reasoning, ToolCall, Usage
from aniki.sessions import SQLiteSession
from aniki.sessions._blobs import MARK
from aniki.sessions._codec import decode_message, encode_message
from aniki.sessions._codec_compact import BLOB_MARK, COMPACT, compact_record, read_compact

AT = datetime(2026, 12, 6, 22, 41, 51, 525002, tzinfo=timezone.utc)


def _round_trip(message: Message) -> Message:
    record = compact_record(message)
    assert record is not None and record.startswith(COMPACT)
    read = read_compact(record, "test")
    assert decode_message(record, store="test") == read
    return read


@pytest.mark.parametrize(
    "message",
    [
        Message("user", "hello"),
        Message("system", "be brief", id="a1", created_at=AT),
        Message("assistant", "hi", id="b2", created_at=AT, model="gpt-4o-mini"),
        Message("tool", '{"ok": true}', tool_call_id="call_1", id="c3", created_at=AT),
        Message("user", "tab\there, newline\nthere, unit\x1fseparators\x1f\x1f, NUL \x00, é✓🙂"),
        Message("user", "x", created_at=AT.astimezone(timezone(timedelta(hours=5, minutes=30)))),
        Message("user", '{"role":"user","content":"looks like JSON"}'),
        Message("user", COMPACT + "user\x1fstarts like a compact record"),
    ],
)
def test_a_text_message_reads_back_equal(message: Message) -> None:
    read = _round_trip(message)
    assert read == message
    assert (read.id, read.created_at, read.model) == (message.id, message.created_at, message.model)
    assert read.tool_call_id == message.tool_call_id
    if message.created_at is not None:
        assert read.created_at is not None
        assert read.created_at.utcoffset() == message.created_at.utcoffset()


@pytest.mark.parametrize(
    "message",
    [
        Message("assistant", tool_calls=(ToolCall("c1", "lookup", "{}"),)),
        Message("user", "look", attachments=(Attachment("image/png", data=b"\x89PNG"),)),
        Message("assistant", "so", reasoning=(Reasoning("thinking"),)),
        Message("assistant", "counted", usage=Usage(input_tokens=3, output_tokens=1)),
        Message("user", "hi", id="has\x1fseparator"),
        Message("assistant", "hi", model="model\x1fname"),
        Message("tool", "ok", tool_call_id="call\x1f1"),
        Message("user", f"quotes a blob reference: {MARK}abc"),
    ],
)
def test_anything_else_keeps_its_json_record(message: Message) -> None:
    assert compact_record(message) is None
    assert decode_message(encode_message(message), store="test") == message


def test_the_blob_mark_is_the_blob_layers() -> None:
    assert BLOB_MARK == MARK  # no compact record holds it: stores look for it to find blobs


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@given(
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    content=_TEXT.filter(bool),
    ident=st.none() | _TEXT.filter(bool),
    model=st.none() | _TEXT.filter(bool),
    answers=_TEXT.filter(bool),
    offset=st.integers(-14 * 60, 14 * 60),
)
def test_any_text_message_reads_back_equal_or_stays_json(
    role: str, content: str, ident: str | None, model: str | None, answers: str, offset: int
) -> None:
    message = Message(
        role,  # type: ignore[arg-type]
        content,
        id=ident,
        created_at=AT.astimezone(timezone(timedelta(minutes=offset))),
        model=model if role == "assistant" else None,
        tool_call_id=answers if role == "tool" else None,
    )
    record = compact_record(message)
    if record is None:  # a separator in a field, or the blob mark: the JSON record
        assert "\x1f" in f"{ident}{model}{answers}" or MARK in f"{content}{ident}{model}{answers}"
        return
    read = read_compact(record, "test")
    assert read == message
    assert (read.id, read.created_at, read.model) == (message.id, message.created_at, message.model)


@pytest.mark.parametrize(
    ("record", "said"),
    [
        ("\x01user\x1fa\x1f\x1f\x1f", "six fields"),
        ("\x01robot\x1fa\x1f\x1f\x1f\x1fhi", "unknown role 'robot'"),
        ("\x01user\x1fa\x1f\x1f\x1f\x1f", "content is empty"),
        ("\x01user\x1fa\x1fyesterday\x1f\x1f\x1fhi", "not a time with an offset"),
        ("\x01user\x1fa\x1f2026-12-06T22:41:51\x1f\x1f\x1fhi", "not a time with an offset"),
        ("\x01user\x1fa\x1f\x1fgpt\x1f\x1fhi", "only an assistant message names a model"),
        ("\x01tool\x1fa\x1f\x1f\x1f\x1fok", "a tool message needs a tool_call_id"),
        ("\x01user\x1fa\x1f\x1f\x1fcall_1\x1fhi", "a tool message needs a tool_call_id"),
        ("\x01user\x1fa\x1f\x1f\x1f\x1flone \ud800", "not valid Unicode"),
    ],
)
def test_a_record_aniki_did_not_write_is_damage_worded(record: str, said: str) -> None:
    for read in (
        lambda: read_compact(record, "sqlite:///x.db"),
        lambda: decode_message(record, store="sqlite:///x.db"),
    ):
        with pytest.raises(CorruptStoreError, match="cannot be read") as caught:
            read()
        assert said in str(caught.value)
        assert caught.value.store == "sqlite:///x.db"


def _bodies(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [body for (body,) in conn.execute("SELECT body FROM aniki_messages ORDER BY key")]


def test_the_sqlite_store_writes_text_messages_compact_and_the_rest_as_json(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chat.db"
    written = [
        Message("user", "what is the weather?"),
        Message("assistant", tool_calls=(ToolCall("c1", "weather", '{"city": "Oslo"}'),)),
        Message("tool", "rain", tool_call_id="c1"),
        Message("assistant", "It rains.", model="m", usage=Usage(input_tokens=9, output_tokens=3)),
        Message("assistant", "Take an umbrella.", model="m"),
    ]
    with SQLiteSession("s", path) as session:
        session.add_message(written[0])
        session.add_messages(written[1:])
    bodies = _bodies(path)
    assert [body[:1] for body in bodies] == [COMPACT, "{", COMPACT, "{", COMPACT]
    assert bodies[0].endswith("\x1fwhat is the weather?")
    stored = SQLiteSession("s", path).get_messages()  # a new object: every record decoded
    assert stored == tuple(written)
    assert [m.model for m in stored] == [None, None, None, "m", "m"]
    assert stored[3].usage == written[3].usage
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (6,)


def test_a_damaged_compact_record_is_refused_and_the_file_kept(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    with SQLiteSession("s", path) as session:
        session.add_messages([Message("user", "one"), Message("assistant", "two")])
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE aniki_messages SET body = replace(body, 'assistant', 'robot')")
    before = _bodies(path)
    with pytest.raises(CorruptStoreError, match="unknown role 'robot'"):
        SQLiteSession("s", path).get_messages()
    with pytest.raises(CorruptStoreError):
        SQLiteSession("s", path).add_message(Message("user", "three"))
    assert _bodies(path) == before


def test_a_session_row_whose_id_no_longer_matches_its_index_is_damage(tmp_path: Path) -> None:
    """A changed byte in the id in the sessions table's row (integrity_check's finding; the
    quick_check made on open does not compare an index with its table): the first read or
    write of a session object finds it, and no write is made."""
    path = tmp_path / "chat.db"
    for name in ("alpha-1", "alpha-2"):
        with SQLiteSession(name, path) as session:
            session.add_message(Message("user", f"hello from {name}"))
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'aniki_sessions'"
        ).fetchone()
        (size,) = conn.execute("PRAGMA page_size").fetchone()
    data = bytearray(path.read_bytes())
    page = slice((root - 1) * size, root * size)
    at = data[page].index(b"alpha-2") + page.start
    data[at] = ord("A")  # the table's row now says "Alpha-2"; its index still "alpha-2"
    path.write_bytes(bytes(data))
    assert SQLiteSession("alpha-1", path).get_messages()[0].content == "hello from alpha-1"
    with pytest.raises(CorruptStoreError, match="sessions table's row of session 'alpha-2'"):
        SQLiteSession("alpha-2", path).get_messages()
    with pytest.raises(CorruptStoreError, match="no write is made to a file found damaged"):
        SQLiteSession("alpha-1", path).add_message(Message("user", "more"))
    assert len(_bodies(path)) == 2
