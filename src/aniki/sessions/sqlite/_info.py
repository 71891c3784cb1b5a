"""A SQLite session's info: its title, owner, tags and times, kept in its row of
``aniki_sessions`` (schema version 3, see :mod:`~aniki.sessions.sqlite._schema`), with its
message count and exact ``updated_at`` read from its last message (schema version 5); its
tags are also rows of ``aniki_session_tags``, which a listing by tag searches.

:func:`read_info` reads one session's, :func:`write_info` sets it (one write transaction,
the tags rows with the row), and :func:`info_of` reads a row of the listing's columns
(:data:`~._sql.INFO`) into a :class:`~aniki.sessions.SessionInfo`, treating what
cannot be read as damage.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from .._catalog import KEEP, InfoChange, from_timestamp
from ..base import SessionInfo
from ._db import Database
from ._sql import ADD_TAG, DROP_TAGS, INFO, REGISTER, SESSION

__all__ = ["info_of", "read_info", "write_info"]

_INFO = f"SELECT {INFO} FROM aniki_sessions AS s WHERE s.id = ?"

# Real seconds since 1970 that datetime can show: anything else in a time column is damage.
_TIMES = (-62135596800.0, 253402300799.0)


def read_info(db: Database, session_id: str) -> SessionInfo:
    """Session ``session_id``'s info (``SessionInfo(id, 0, None)`` before its first write)."""
    with db.lock, db.errors():
        row = db.conn.execute(_INFO, (session_id,)).fetchone()
    return SessionInfo(session_id, 0, None) if row is None else info_of(db, row)


def write_info(db: Database, session_id: str, change: InfoChange, now: float) -> None:
    """Apply ``change`` to session ``session_id`` at ``now`` (a write: ``updated_at`` moves,
    ``created_at`` is set if it was not), in one write transaction."""
    columns = ["created_at = coalesce(created_at, ?)", "updated_at = ?"]
    values: list[object] = [now, now]
    if change.title is not KEEP:
        columns.append("title = ?")
        values.append(change.title)
    if change.owner is not KEEP:
        columns.append("owner = ?")
        values.append(change.owner)
    if change.tags is not KEEP:
        columns.append("tags = ?")
        values.append(json.dumps(list(change.tags), ensure_ascii=False))
    with db.transaction(write=True) as conn:
        conn.execute(REGISTER, (session_id,))
        number = db.session_row(conn.execute(SESSION, (session_id,)).fetchone())[0]
        conn.execute(
            f"UPDATE aniki_sessions SET {', '.join(columns)} WHERE number = ?", (*values, number)
        )
        if change.tags is not KEEP:
            conn.execute(DROP_TAGS, (number,))
            conn.executemany(ADD_TAG, [(tag, number) for tag in change.tags])


def info_of(db: Database, row: Sequence[object]) -> SessionInfo:
    """A row of :data:`~._sql.INFO` as a :class:`~aniki.sessions.SessionInfo`;
    :class:`~aniki.CorruptStoreError` when a value is not what aniki writes."""
    session_id, count, updated, title, owner, tags, created = row
    if (
        type(session_id) is not str
        or type(count) is not int
        or count < 0
        or not (title is None or type(title) is str)
        or not (owner is None or type(owner) is str)
    ):
        raise db.damage("a row of the sessions table cannot be read")
    return SessionInfo(
        session_id,
        count,
        _time(db, session_id, updated),
        title,
        owner,
        _tags(db, session_id, tags),
        _time(db, session_id, created),
    )


def _time(db: Database, session_id: str, value: object) -> datetime | None:
    if value is None:
        return None
    # NaN fails the comparison too; SQLite gives no bools, so isinstance reads as type().
    if isinstance(value, (int, float)) and _TIMES[0] <= value <= _TIMES[1]:
        return from_timestamp(float(value))
    raise db.damage(f"session {session_id!r} has an impossible time ({value!r})")


def _tags(db: Database, session_id: str, text: object) -> tuple[str, ...]:
    if text == "[]":
        return ()
    try:
        tags = json.loads(text) if type(text) is str else None
    except ValueError:
        tags = None
    if type(tags) is not list or not all(type(tag) is str and tag for tag in tags):
        raise db.damage(f"the tags of session {session_id!r} cannot be read")
    return tuple(tags)
