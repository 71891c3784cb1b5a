"""Attachments of a SQLite store, kept apart from the messages that name them (schema version
4; the records and their references are :mod:`aniki.sessions._blobs`'s).

- ``aniki_blobs``: each attachment's bytes once, by the SHA-256 of its bytes (so the same image
  sent ten times is stored once);
- ``aniki_blob_refs``: one row per message key and hash it names, in the write transaction
  that stores the message. A removal of messages (a clear, an undo, an import, a prune: a
  range of keys) finds the hashes they named in that range, drops the links, and deletes
  each blob no other link names: a blob goes with the last message that names it.

A message without inline bytes (nearly every one) costs nothing here: its append stays one
statement, and a read fetches blobs only when a record it read names one.

Reads: the rows are read first and the blobs they name next, two statements; a blob is never
changed once written (its key is its content's hash), so the pair is as if read at once,
unless a message was removed in between and took its blob with it. Then both are read again
inside one read transaction (:func:`with_blobs`). Only rows holding :data:`MARK` (a
reference) are looked at further: a read of text costs one substring test per row.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeVar

from ...messages import Message
from .._blobs import named, refs, split_batch
from .._codec import encode_message
from .._codec_compact import compact_record
from ._sql import APPEND, BLOCK, DROP_META, DROP_TAGS, EMPTIED, appended

__all__ = [
    "NO_BLOBS",
    "append_all",
    "append_records",
    "copy_links",
    "empty",
    "fetch",
    "record_of",
    "records_of",
    "unlink",
    "with_blobs",
]

Row = TypeVar("Row", bound=Sequence[Any])

_PUT = "INSERT OR IGNORE INTO aniki_blobs (hash, data) VALUES (?, ?)"
_LINK = "INSERT OR IGNORE INTO aniki_blob_refs (key, hash) VALUES (?, ?)"
_LINKED = "SELECT DISTINCT hash FROM aniki_blob_refs WHERE key >= ? AND key < ?"
_UNLINK = "DELETE FROM aniki_blob_refs WHERE key >= ? AND key < ?"
_ORPHAN = (
    "DELETE FROM aniki_blobs WHERE hash = ?1"
    " AND NOT EXISTS (SELECT 1 FROM aniki_blob_refs WHERE hash = ?1)"
)
_COPY = (
    "INSERT OR IGNORE INTO aniki_blob_refs (key, hash) SELECT key + ?, hash"
    " FROM aniki_blob_refs WHERE key >= ? AND key <= ?"
)
_CHUNK = 500  # hashes per query: under SQLite's smallest limit on parameters (999)

NO_BLOBS: Mapping[str, bytes] = MappingProxyType({})
"""The blobs of records that name none."""


def record_of(message: Message) -> str:
    """The record to store for ``message``, which has no attachments: the compact record of
    a text message (:mod:`aniki.sessions._codec_compact`), the JSON record of any other."""
    return compact_record(message) or encode_message(message)


def records_of(batch: Sequence[Message]) -> tuple[list[str], Mapping[str, bytes]]:
    """The records to store for ``batch`` and the blobs they name (attachment bytes kept
    apart, once per content); a batch without attachments costs one encoding per message."""
    for message in batch:
        if message.attachments:
            return split_batch(batch)
    return [record_of(message) for message in batch], NO_BLOBS


def append_records(
    conn: sqlite3.Connection,
    number: int,
    records: list[str],
    blobs: Mapping[str, bytes],
    now: float,
) -> None:
    """Append ``records`` to session ``number`` with the ``blobs`` they name and their links;
    inside the caller's write transaction."""
    if not blobs:
        conn.executemany(APPEND, appended(number, records, now))
        return
    conn.executemany(_PUT, blobs.items())
    low = number * BLOCK
    for record in records:
        key = conn.execute(APPEND, (low, low + BLOCK, record, now)).lastrowid
        named = refs(record)
        if named:
            conn.executemany(_LINK, [(key, hash) for hash in named])


def unlink(conn: sqlite3.Connection, first: int, stop: int) -> None:
    """Before the messages with keys ``first`` to ``stop - 1`` are deleted: drop their links,
    and every blob that no other message names. Inside the caller's write transaction."""
    named = conn.execute(_LINKED, (first, stop)).fetchall()
    if named:
        conn.execute(_UNLINK, (first, stop))
        conn.executemany(_ORPHAN, named)


def copy_links(conn: sqlite3.Connection, first: int, last: int, shift: int) -> None:
    """Link the copies of the messages with keys ``first`` to ``last``, made ``shift`` keys
    further on (a fork), to the blobs the originals name."""
    conn.execute(_COPY, (shift, first, last))


def fetch(conn: sqlite3.Connection, keys: Sequence[str]) -> dict[str, bytes]:
    """The blobs among ``keys`` the store holds, by hash (a missing one is left out, and so
    is one that is not bytes: damage, which joining reports)."""
    found: dict[str, bytes] = {}
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start : start + _CHUNK]
        marks = ", ".join("?" * len(chunk))
        query = f"SELECT hash, data FROM aniki_blobs WHERE hash IN ({marks})"
        for key, data in conn.execute(query, chunk):
            if type(key) is str and type(data) is bytes:
                found[key] = data
    return found


def with_blobs(
    conn: sqlite3.Connection,
    rows: list[Row],
    read: Callable[[sqlite3.Connection], list[Row]],
    column: int,
) -> tuple[list[Row], Mapping[str, bytes]]:
    """``rows`` (which ``read`` returned) and the blobs their records (at ``column``) name,
    as of one moment: read again with them in one snapshot when a blob went meanwhile (see
    the module docstring). Under the database's lock."""
    keys = named([row[column] for row in rows])
    if not keys:
        return rows, NO_BLOBS
    found = fetch(conn, keys)
    if len(found) == len(keys) or conn.in_transaction:
        return rows, found  # (in a transaction: one snapshot already; a gap is damage)
    conn.execute("BEGIN")
    try:
        rows = read(conn)
        found = fetch(conn, named([row[column] for row in rows]))
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")
    return rows, found


def append_all(conn: sqlite3.Connection, rows: list[tuple[int, int, str, float]]) -> None:
    """Append ``rows`` (see :func:`~._sql.appended`) in one ``BEGIN IMMEDIATE`` transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(APPEND, rows)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def empty(conn: sqlite3.Connection, session_id: str, number: int, generation: int) -> int:
    """Delete session ``number``'s messages (and blobs no other message names), meta, tags
    and info, and bump its generation
    (every instance's cache starts over); the new generation. Inside a write transaction."""
    low = int(number) * BLOCK
    conn.execute(DROP_META, (session_id,))
    conn.execute(DROP_TAGS, (number,))
    unlink(conn, low + 1, low + BLOCK)
    conn.execute("DELETE FROM aniki_messages WHERE key > ? AND key < ?", (low, low + BLOCK))
    conn.execute(EMPTIED, (number,))
    return int(generation) + 1
