"""Attachments apart from their records (``aniki.sessions._blobs``): the records written, the
blobs named, and reading them back."""

from __future__ import annotations

import base64
import json

import pytest

from aniki import Attachment, CorruptStoreError, Message
from aniki.sessions._blobs import digest, join, join_all, refs, split, split_batch, wanted
from aniki.sessions._codec import encode_message

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40


def _with_image(text: str = "look", data: bytes = PNG) -> Message:
    return Message(
        "user",
        text,
        attachments=(
            Attachment("image/png", data=data, name="chart.png"),
            Attachment("image/jpeg", url="https://example.com/a.jpg"),
        ),
    )


def test_a_record_names_its_bytes_by_hash_and_reads_back_equal() -> None:
    message = _with_image()
    record, blobs = split(message)
    assert blobs == {digest(PNG): PNG}
    stored = json.loads(record)["attachments"]
    assert stored[0] == {
        "media_type": "image/png",
        "blob": digest(PNG),
        "size": len(PNG),
        "name": "chart.png",
    }
    assert stored[1] == {"media_type": "image/jpeg", "url": "https://example.com/a.jpg"}
    assert base64.b64encode(PNG).decode() not in record
    assert refs(record) == (digest(PNG),)
    back = join(record, blobs, store="test")
    assert back == message and back.attachments[0].data == PNG


def test_text_records_are_the_codecs_and_name_nothing() -> None:
    message = Message("user", 'quoting "blob":"abc" in text')
    record, blobs = split(message)
    assert record == encode_message(message) and blobs == {}
    assert refs(record) == () and join(record, {}, store="test") == message


def test_a_batch_names_each_blob_once() -> None:
    messages = [_with_image(f"send {n}") for n in range(10)] + [Message("assistant", "ok")]
    records, blobs = split_batch(messages)
    assert len(records) == 11 and list(blobs) == [digest(PNG)]
    assert sum(len(r) for r in records) < len(PNG)  # ten sends, bytes stored nowhere inline
    assert wanted(records) == [digest(PNG)]
    assert join_all(records, blobs, store="test") == messages


def test_a_record_with_inline_bytes_from_before_reads_unchanged() -> None:
    message = _with_image()
    old = encode_message(message)  # bytes inline, as base64: the earlier layout
    assert refs(old) == () and join(old, {}, store="test") == message


def test_a_missing_or_wrong_blob_is_a_clear_error_without_the_bytes() -> None:
    record, _ = split(_with_image())
    with pytest.raises(CorruptStoreError, match="missing from the store") as missing:
        join(record, {}, store="sqlite:///chats.db")
    assert "sqlite:///chats.db" in str(missing.value)
    with pytest.raises(CorruptStoreError, match="not the") as short:
        join(record, {digest(PNG): PNG[:10]}, store="test")
    assert "PNG" not in str(short.value) and digest(PNG)[:12] in str(short.value)
