"""``fork`` and ``undo`` on a SQLite store: each one write transaction (``BEGIN IMMEDIATE``),
so another process sees the session before or after it, never in between.

A fork copies the source's rows (their text holds each message's id and time) into the
target's block of keys, and its meta rows except :data:`~aniki.sessions._edits.FORK_SKIPPED_META`.
An undo deletes the rows from the last user message on and bumps the session's generation,
so every instance's cache starts over on its next read (as after a clear). An append after a
named message (``append_after``, for an encrypted session's chain) checks the last row in the
same transaction, so it lands after exactly that message or not at all.

Under a run's turn guard (:mod:`aniki.sessions._guard`) an append reads the session's
generation in its own transaction, one lookup by key: an undo since the run stored its
question has bumped it, and the answer is refused.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator

from ...messages import Message
from .._codec import decode_message
from .._edits import FORK_SKIPPED_META, forked_count, taken
from .._guard import admit, in_force
from ._db import Database
from ._sql import APPEND, BLOCK, SESSION, appended

__all__ = ["append_after", "append_rows", "fork_rows", "undo_rows"]

_GENERATION = "SELECT generation FROM aniki_sessions WHERE number = ?"
_ROWS = "SELECT key, body, created_at FROM aniki_messages WHERE key > ? AND key < ? ORDER BY key"
_NEWEST_FIRST = "SELECT key, body FROM aniki_messages WHERE key > ? AND key < ? ORDER BY key DESC"
_ANY = "SELECT 1 FROM aniki_messages WHERE key > ? AND key < ? LIMIT 1"
_LAST = "SELECT body FROM aniki_messages WHERE key > ? AND key < ? ORDER BY key DESC LIMIT 1"
_INSERT = "INSERT INTO aniki_messages (key, body, created_at) VALUES (?, ?, ?)"
_COPY_META = (
    "INSERT INTO aniki_session_meta (session_id, key, value) SELECT ?, key, value"
    " FROM aniki_session_meta WHERE session_id = ? AND key NOT IN ({skipped})"
)


def fork_rows(db: Database, session_id: str, new_id: str, upto: str | None) -> None:
    """Copy session ``session_id`` (through message ``upto``) and its meta to ``new_id``."""
    with db.transaction(write=True) as conn:
        row = conn.execute(SESSION, (session_id,)).fetchone()
        rows: list[tuple[int, str, float]] = []
        if row is not None:
            low = _number(db, row) * BLOCK
            rows = conn.execute(_ROWS, (low, low + BLOCK)).fetchall()
        if upto is not None:
            messages = [_decoded(db, body) for _, body, _ in rows]
            rows = rows[: forked_count(messages, upto, session_id)]
        conn.execute("INSERT OR IGNORE INTO aniki_sessions (id) VALUES (?)", (new_id,))
        target = _number(db, conn.execute(SESSION, (new_id,)).fetchone()) * BLOCK
        if conn.execute(_ANY, (target, target + BLOCK)).fetchone() is not None:
            raise taken(new_id)
        conn.execute("DELETE FROM aniki_session_meta WHERE session_id = ?", (new_id,))
        if rows:
            source = rows[0][0] - rows[0][0] % BLOCK
            conn.executemany(_INSERT, [(target + key - source, body, at) for key, body, at in rows])
        skipped = ", ".join("?" for _ in FORK_SKIPPED_META)
        conn.execute(
            _COPY_META.format(skipped=skipped), (new_id, session_id, *sorted(FORK_SKIPPED_META))
        )


def undo_rows(db: Database, session_id: str) -> list[Message]:
    """Delete session ``session_id``'s last turn, bumping its generation; what was deleted."""
    with db.transaction(write=True) as conn:
        row = conn.execute(SESSION, (session_id,)).fetchone()
        if row is None:
            return []
        number = _number(db, row)
        low = number * BLOCK
        removed: list[Message] = []
        cursor = conn.execute(_NEWEST_FIRST, (low, low + BLOCK))
        for key, body in _rows(cursor):
            message = _decoded(db, body)
            removed.append(message)
            if message.role == "user":
                conn.execute(
                    "DELETE FROM aniki_messages WHERE key >= ? AND key < ?", (key, low + BLOCK)
                )
                conn.execute(
                    "UPDATE aniki_sessions SET generation = generation + 1 WHERE number = ?",
                    (number,),
                )
                removed.reverse()
                return removed
        return []


def append_after(
    db: Database, number: int, bodies: list[str], after: str | None, now: float
) -> bool:
    """Append ``bodies`` to session ``number`` only if its last message has the id ``after``
    (``None``: it holds none), in one write transaction; whether they were appended."""
    low = number * BLOCK
    with db.transaction(write=True) as conn:
        row = conn.execute(_LAST, (low, low + BLOCK)).fetchone()
        found = None if row is None else _decoded(db, row[0]).id or ""  # "": never named
        if found != after:
            return False
        _admit(conn, db, number)  # a turn guard's mark is taken by a write that is made
        conn.executemany(APPEND, appended(number, bodies, now))
        return True


def append_rows(db: Database, number: int, bodies: list[str]) -> None:
    """Append encoded messages to session ``number`` in one transaction (one statement for
    one message); under a turn guard, checked against the session's generation first."""
    now = time.time()
    if not in_force():
        db.append(number, bodies, now)
        return
    with db.transaction(write=True) as conn:
        _admit(conn, db, number)
        conn.executemany(APPEND, appended(number, bodies, now))


def _admit(conn: sqlite3.Connection, db: Database, number: int) -> None:
    """The turn guard's check (:func:`~aniki.sessions._guard.admit`), inside a write."""
    if in_force():
        (generation,) = conn.execute(_GENERATION, (number,)).fetchone()
        admit((db, number), generation)


def _rows(cursor: sqlite3.Cursor) -> Iterator[tuple[int, str]]:
    """The rows a few at a time: an undo usually stops within the first handful."""
    while batch := cursor.fetchmany(16):
        yield from batch


def _number(db: Database, row: tuple[object, ...] | None) -> int:
    if row is None or type(row[0]) is not int:
        raise db.damage("a row of the sessions table cannot be read")
    return row[0]


def _decoded(db: Database, body: object) -> Message:
    if type(body) is not str:
        raise db.damage(f"a stored message is {type(body).__name__}, not text")
    return decode_message(body, store=db.label)
