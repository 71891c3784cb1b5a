"""The messages of rows a SQLite store read: decoded once each, with the blobs they name."""

from __future__ import annotations

from collections.abc import Mapping

from ...errors import CorruptStoreError
from ...messages import Message
from .._blobs import MARK, join
from .._codec import decode_message
from ._blobs import NO_BLOBS
from ._db import Database

__all__ = ["decoded"]


def decoded(
    db: Database, rows: list[tuple[int, str]], blobs: Mapping[str, bytes], own: dict[str, Message]
) -> list[Message]:
    """The messages stored as ``rows`` (key, record), oldest first.

    A record this session object wrote itself is taken from ``own`` (equal text means an
    equal message) instead of being decoded; one naming a blob gets its bytes from ``blobs``,
    and a blob that is gone is named in the error. Damage is remembered for the file
    (:meth:`Database.damaged`) and raised."""
    label = db.label
    try:
        if not own and blobs is NO_BLOBS:  # the common case: every row decoded as text
            return [decode_message(body, store=label) for _, body in rows]
        messages = []
        for _, body in rows:
            message = own.pop(body, None)
            if message is None:
                message = (
                    join(body, blobs, store=label)
                    if blobs is not NO_BLOBS and MARK in body
                    else decode_message(body, store=label)
                )
            messages.append(message)
        return messages
    except CorruptStoreError as exc:
        db.damaged(exc)
        raise
