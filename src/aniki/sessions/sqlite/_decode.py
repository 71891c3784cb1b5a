"""The messages of rows a SQLite store read: decoded once each, with the blobs they name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import CorruptStoreError
from ...messages import Message
from .._blobs import MARK, join
from .._codec import decode_message, decode_meta
from .._codec_compact import COMPACT, read_compact
from ._blobs import NO_BLOBS
from ._db import Database, Row

__all__ = ["decoded", "decoded_meta"]


def decoded(
    db: Database, rows: list[Row], blobs: Mapping[str, bytes], own: dict[str, Message]
) -> list[Message]:
    """The messages stored as ``rows`` (each ending with a key and a record), oldest first.

    A record this session object wrote itself is taken from ``own`` (equal text means an
    equal message) instead of being decoded; one naming a blob gets its bytes from ``blobs``,
    and a blob that is gone is named in the error. Damage is remembered for the file
    (:meth:`Database.damaged`) and raised."""
    label = db.label
    messages: list[Message] = []
    append = messages.append
    try:
        for row in rows:
            body = row[-1]
            if type(body) is not str:
                raise db.damage(
                    f"the message stored at key {row[-2]!r} is {type(body).__name__}, not text"
                )
            if own:
                message = own.pop(body, None)
                if message is not None:
                    append(message)
                    continue
            if body[:1] == COMPACT:  # most records: a text message
                append(read_compact(body, label))
            elif blobs is not NO_BLOBS and MARK in body:
                append(join(body, blobs, store=label))
            else:
                append(decode_message(body, store=label))
        return messages
    except CorruptStoreError as exc:
        db.damaged(exc)
        raise


def decoded_meta(db: Database, text: str) -> Any:
    """The meta value stored as ``text``; damage (remembered) when it does not decode."""
    try:
        return decode_meta(text, store=db.label)
    except CorruptStoreError as exc:
        db.damaged(exc)
        raise
