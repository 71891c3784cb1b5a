"""``fork`` and ``undo`` on a SQLite store: each one write transaction (``BEGIN IMMEDIATE``),
so another process sees the session before or after it, never in between.

A fork copies the source's rows (their text holds each message's id and time) into the
target's block of keys, with their links to the blobs they name, and its meta rows except
:data:`~aniki.sessions._edits.FORK_SKIPPED_META`. An undo deletes the rows from the last user
message on (and the blobs no other message names) and bumps the session's generation, so
every instance's cache starts over on its next read (as after a clear). Both keep the
session's row in step: an undo moves ``updated_at``; a fork's
new session copies the source's title, owner and tags, its times being the fork's. An
append after a named message (``append_after``, for an encrypted session's chain) checks
the last row in the same transaction, so it lands after exactly that message or not at all.

Under a run's turn guard (:mod:`aniki.sessions._guard`) an append reads the session's
generation in its own transaction, one lookup by key: an undo since the run stored its
question has bumped it, and the answer is refused.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from typing import cast

from ...errors import CorruptStoreError
from ...messages import Message
from .._blobs import join, refs
from .._codec import decode_message
from .._edits import FORK_SKIPPED_META, forked_count, taken
from .._guard import HistoryMoved, admit, expected_mark, in_force
from ._blobs import NO_BLOBS, append_records, copy_links, fetch, unlink
from ._db import Database
from ._sql import BLOCK, DROP_TAGS, SESSION, clock

__all__ = ["append_after", "append_one", "append_rows", "append_text", "fork_rows", "undo_rows"]

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
_LABELS = "SELECT title, owner, tags FROM aniki_sessions WHERE number = ?"
_COPY_TAGS = (
    "INSERT INTO aniki_session_tags (tag, number) SELECT tag, ? FROM aniki_session_tags"
    " WHERE number = ?"
)
_FORKED = (
    "UPDATE aniki_sessions SET title = ?, owner = ?, tags = ?, created_at = ?, updated_at = ?"
    " WHERE number = ?"
)
_UNDONE = (
    "UPDATE aniki_sessions SET generation = generation + 1, updated_at = ?1,"
    " created_at = coalesce(created_at, ?1) WHERE number = ?2"
)


def fork_rows(db: Database, session_id: str, new_id: str, upto: str | None) -> None:
    """Copy session ``session_id`` (through message ``upto``), its meta and its labels (title,
    owner, tags) to ``new_id``."""
    with db.transaction(write=True) as conn:
        row = conn.execute(SESSION, (session_id,)).fetchone()
        rows: list[tuple[int, str, float]] = []
        labels: tuple[object, ...] = (None, None, "[]")
        source = None
        if row is not None:
            source = _number(db, row)
            rows = conn.execute(_ROWS, (source * BLOCK, (source + 1) * BLOCK)).fetchall()
            labels = conn.execute(_LABELS, (source,)).fetchone()
        if upto is not None:
            messages = [_decoded(db, conn, body) for _, body, _ in rows]
            rows = rows[: forked_count(messages, upto, session_id)]
        conn.execute("INSERT OR IGNORE INTO aniki_sessions (id) VALUES (?)", (new_id,))
        number = _number(db, conn.execute(SESSION, (new_id,)).fetchone())
        target = number * BLOCK
        if conn.execute(_ANY, (target, target + BLOCK)).fetchone() is not None:
            raise taken(new_id)
        conn.execute("DELETE FROM aniki_session_meta WHERE session_id = ?", (new_id,))
        if rows:
            low = rows[0][0] - rows[0][0] % BLOCK
            conn.executemany(_INSERT, [(target + key - low, body, at) for key, body, at in rows])
            copy_links(conn, rows[0][0], rows[-1][0], target - low)
        skipped = ", ".join("?" for _ in FORK_SKIPPED_META)
        conn.execute(
            _COPY_META.format(skipped=skipped), (new_id, session_id, *sorted(FORK_SKIPPED_META))
        )
        now = clock()
        conn.execute(_FORKED, (*labels, now, now, number))
        conn.execute(DROP_TAGS, (number,))
        if source is not None:
            conn.execute(_COPY_TAGS, (number, source))


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
            message = _decoded(db, conn, body)
            removed.append(message)
            if message.role == "user":
                unlink(conn, key, low + BLOCK)
                conn.execute(
                    "DELETE FROM aniki_messages WHERE key >= ? AND key < ?", (key, low + BLOCK)
                )
                conn.execute(_UNDONE, (clock(), number))
                removed.reverse()
                return removed
        return []


def append_after(
    db: Database,
    number: int,
    bodies: list[str],
    blobs: Mapping[str, bytes],
    after: str | None,
    now: float,
) -> bool:
    """Append ``bodies`` (naming ``blobs``) to session ``number`` only if its last message
    has the id ``after`` (``None``: it holds none), in one write transaction; whether they
    were appended."""
    low = number * BLOCK
    with db.transaction(write=True) as conn:
        row = conn.execute(_LAST, (low, low + BLOCK)).fetchone()
        found = None if row is None else _decoded(db, conn, row[0]).id or ""  # "": never named
        if found != after:
            return False
        _admit(conn, db, number)  # a turn guard's mark is taken by a write that is made
        append_records(conn, number, bodies, blobs, now)
        return True


def append_rows(db: Database, number: int, bodies: list[str], blobs: Mapping[str, bytes]) -> None:
    """Append encoded messages (naming ``blobs``) to session ``number`` in one transaction
    (one statement for one message without blobs); under a turn guard, checked against the
    session's generation in the same step."""
    if len(bodies) == 1 and not blobs:
        append_text(db, number, bodies[0])
    elif not in_force():
        db.append(number, bodies, clock(), blobs)
    else:
        _append_guarded(db, number, bodies, blobs, clock())


def append_text(db: Database, number: int, body: str) -> None:
    """:func:`append_rows` for one encoded message without blobs (a session's plain
    ``add_message``, the hottest path there is): one statement."""
    if in_force():
        append_one(db, number, body)
    else:
        db.append_one(number, body, clock())


def append_one(db: Database, number: int, body: str) -> tuple[int, int] | None:
    """:func:`append_rows` for one encoded message without blobs, in one statement that says
    the key it took and the session's generation then (``None``: appended otherwise, onto a
    session without a row). Under a turn guard the run's first write records the mark it
    reads, and a later one lands only while the mark is unchanged."""
    now = clock()
    if not in_force():
        found = db.append_returning(number, body, now)
        if found is None:
            db.append_one(number, body, now)
        return found
    generation = expected_mark((db, number))  # None: the run's first write records it
    found = db.append_returning(number, body, now, cast("int | None", generation))
    if found is None:
        if generation is not None:
            raise HistoryMoved
        _append_guarded(db, number, [body], NO_BLOBS, now)
        return None
    admit((db, number), found[1])
    return found


def _append_guarded(
    db: Database, number: int, bodies: list[str], blobs: Mapping[str, bytes], now: float
) -> None:
    with db.transaction(write=True) as conn:
        _admit(conn, db, number)
        append_records(conn, number, bodies, blobs, now)


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


def _decoded(db: Database, conn: sqlite3.Connection, body: object) -> Message:
    """The message stored as ``body``, its attachments' bytes read in the same transaction."""
    if type(body) is not str:
        raise db.damage(f"a stored message is {type(body).__name__}, not text")
    named = refs(body)
    try:
        if not named:
            return decode_message(body, store=db.label)
        return join(body, fetch(conn, named), store=db.label)
    except CorruptStoreError as exc:
        raise db.damaged(exc) from None
