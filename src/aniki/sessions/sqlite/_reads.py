"""A SQLite session's reads of its rows: what it wrote since it last read, or its last few.

Each is one statement, so one snapshot; the blobs the rows name are read in the same
snapshot (:func:`~._blobs.with_blobs`). The rows are returned as fetched, to be decoded
by :func:`~._decode.decoded`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping

from .._blobs import MARK
from ._blobs import NO_BLOBS, with_blobs
from ._db import BLOCK, Database, Row
from ._errors import DB_ERRORS
from ._sql import READ, SIZE, TAIL

__all__ = ["read_after", "read_tail", "size_of"]


def read_after(
    db: Database, session_id: str, generation: int | None, after: int
) -> tuple[int, list[Row], Mapping[str, bytes]]:
    """The session's generation, its rows with keys above ``after`` (each ending with
    the key and the record: see :func:`~._decode.decoded`), and the blobs they name.

    When the generation is not ``generation`` (a clear happened), all its rows instead.
    """
    rows, blobs = _fetch(db, READ, (session_id, generation, after, BLOCK), 2)
    if not rows:
        return 0, [], blobs
    found = rows[0][0]
    if type(found) is not int:
        raise db.damage(f"session {session_id!r} has a generation that is not a number")
    if rows[0][1] is None:  # the session's row, joined to no message
        return found, [], blobs
    return found, rows, blobs


def read_tail(db: Database, session_id: str, limit: int) -> tuple[list[Row], Mapping[str, bytes]]:
    """The session's last ``limit`` rows (key, record), oldest first, and the blobs
    they name."""
    # A session holds fewer than BLOCK messages: a larger limit means all of them.
    rows, blobs = _fetch(db, TAIL, (session_id, BLOCK, min(limit, BLOCK)), 1)
    rows.reverse()
    return rows, blobs


def _fetch(
    db: Database, query: str, arguments: tuple[object, ...], column: int
) -> tuple[list[Row], Mapping[str, bytes]]:
    """The rows ``query`` gives, and the blobs named by their records (at ``column``)."""
    with db.lock:
        try:
            return _rows(db.reader, query, arguments, column)
        except DB_ERRORS as exc:
            db.read_again(exc)  # a lock met with the timeout at 0: read once more, waiting
        try:
            return _rows(db.conn, query, arguments, column)
        except DB_ERRORS as exc:
            db.fail(exc)


def _rows(
    conn: sqlite3.Connection, query: str, arguments: tuple[object, ...], column: int
) -> tuple[list[Row], Mapping[str, bytes]]:
    rows: list[Row] = conn.execute(query, arguments).fetchall()
    for row in rows:
        body = row[column]
        if type(body) is str and MARK in body:  # some record names a blob
            return with_blobs(
                conn, rows, lambda later: later.execute(query, arguments).fetchall(), column
            )
    return rows, NO_BLOBS


def size_of(db: Database, session_id: str) -> int:
    """How many messages the session holds (one seek)."""
    with db.lock, db.errors():
        row = db.conn.execute(SIZE, (session_id,)).fetchone()
    return 0 if row is None else int(row[0])
