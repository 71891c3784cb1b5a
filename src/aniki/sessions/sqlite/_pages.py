"""A page of a SQLite session (:func:`read_page`): its rows found by key, in one snapshot.

Every write keeps a session's keys contiguous: message ``i`` (from 0) of session ``number``
has key ``number * BLOCK + 1 + i`` (an append takes the last key plus one, an undo cuts the
end, a clear empties the block, a fork copies keys as they are). The read counts the
session's rows (``count(*)``, a walk over the block that decodes nothing: about 9 ms for
100,000 messages) and seeks its last key: when the two agree, the keys are contiguous and
the page is a range of keys, a few B-tree seeks. When they do not (rows deleted by something
other than aniki), the page is read by position, with ``OFFSET``. The blobs the page's
messages name are read in the same transaction, unless the page names its attachments
instead (see :func:`~aniki.sessions._pages.read_named_page`): then no blob is read.
"""

from __future__ import annotations

import sqlite3

from ...errors import CorruptStoreError
from .._blobs import described, join_all, named
from .._codec import decode_message
from .._pages import Page, named_page, naming, window
from ._blobs import fetch
from ._db import Database
from ._sql import BLOCK

__all__ = ["read_page"]

_NUMBER = "SELECT number FROM aniki_sessions WHERE id = ?"
_LAST = "SELECT key FROM aniki_messages WHERE key > ? AND key < ? ORDER BY key DESC LIMIT 1"
_RANGE = "SELECT key, body FROM aniki_messages WHERE key >= ? AND key < ? ORDER BY key"
_COUNT = "SELECT count(*) FROM aniki_messages WHERE key > ? AND key < ?"
_OFFSET = (
    "SELECT key, body FROM aniki_messages WHERE key > ? AND key < ? ORDER BY key LIMIT ? OFFSET ?"
)


def read_page(db: Database, session_id: str, start: int, limit: int) -> Page:
    """Messages ``start`` to ``start + limit`` of session ``session_id`` (see
    :func:`~aniki.sessions._pages.read_page`), read in one read transaction."""
    names_only = naming()
    with db.transaction(write=False) as conn:
        total, first, rows = _rows(db, conn, session_id, start, limit)
        bodies: list[str] = []
        for key, body in rows:
            if type(body) is not str:
                raise db.damage(
                    f"the message stored at key {key!r} is {type(body).__name__}, not text"
                )
            bodies.append(body)
        keys = [] if names_only else named(bodies)
        blobs = fetch(conn, keys) if keys else {}
    label = db.label
    try:
        if names_only:
            return named_page(total, first, [described(body, store=label) for body in bodies])
        if keys:  # joined even when no blob was found: joining names the missing one
            messages = tuple(join_all(bodies, blobs, store=label))
        else:
            messages = tuple(decode_message(body, store=label) for body in bodies)
    except CorruptStoreError as exc:
        db.damaged(exc)
        raise
    return Page(total, first, messages)


def _rows(
    db: Database, conn: sqlite3.Connection, session_id: str, start: int, limit: int
) -> tuple[int, int, list[tuple[int, object]]]:
    """The total, the page's first index and its rows, all from the transaction's snapshot."""
    row = conn.execute(_NUMBER, (session_id,)).fetchone()
    if row is None:
        return 0, 0, []
    if type(row[0]) is not int:
        raise db.damage("a row of the sessions table cannot be read")
    low = row[0] * BLOCK
    (total,) = conn.execute(_COUNT, (low, low + BLOCK)).fetchone()
    first, stop = window(start, limit, total)
    if stop == first:
        return total, first, []
    (last,) = conn.execute(_LAST, (low, low + BLOCK)).fetchone()
    if last - low == total:  # ``total`` distinct keys from low + 1 to ``last``: all of them
        return total, first, conn.execute(_RANGE, (low + 1 + first, low + 1 + stop)).fetchall()
    rows = conn.execute(_OFFSET, (low, low + BLOCK, stop - first, first)).fetchall()
    return total, first, rows
