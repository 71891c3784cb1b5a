"""The SQL text of a SQLite store's reads and writes, and the layout of its message keys.

A session owns the block of message keys ``number * BLOCK + 1`` to ``(number + 1) * BLOCK -
1`` (see :mod:`~aniki.sessions.sqlite._schema`): its messages are one contiguous range of the
table's own B-tree, so a read is a range scan and an append goes to the end of the range.

A session's row also holds its info and times (schema version 3): an insert into
``aniki_messages`` moves ``updated_at`` by a trigger, in the same statement, when the second
changes (schema version 5). A session's message count and exact ``updated_at`` are read with
its last message (:data:`COUNT`, :data:`UPDATED`: one seek each).
"""

from __future__ import annotations

import time

__all__ = [
    "ADD_TAG",
    "APPEND",
    "APPEND_IF",
    "APPEND_KEYED",
    "APPEND_MARKED",
    "BLOCK",
    "COUNT",
    "DELETE_META",
    "DROP_META",
    "DROP_TAGS",
    "EMPTIED",
    "GET_META",
    "INFO",
    "READ",
    "ROW_ID",
    "REGISTER",
    "SESSION",
    "SECOND",
    "SET_META",
    "SIZE",
    "TAIL",
    "UPDATED",
    "appended",
    "clock",
]

BLOCK = 1 << 32
"""Message keys per session: key = number * BLOCK + position (from 1)."""

APPEND = (  # the key after the session's last one: a single backward seek
    "INSERT INTO aniki_messages (key, body, created_at) VALUES (coalesce((SELECT key"
    " FROM aniki_messages WHERE key > ?1 AND key < ?2 ORDER BY key DESC LIMIT 1), ?1) + 1, ?3, ?4)"
)
APPEND_IF = (  # APPEND, made only while session ?5's generation is ?6 (a run's later writes)
    "INSERT INTO aniki_messages (key, body, created_at) SELECT coalesce((SELECT key"
    " FROM aniki_messages WHERE key > ?1 AND key < ?2 ORDER BY key DESC LIMIT 1), ?1) + 1, ?3, ?4"
    " WHERE (SELECT generation FROM aniki_sessions WHERE number = ?5) = ?6"
)
APPEND_MARKED = (  # APPEND, saying the key it took and session ?5's generation (or no row)
    "INSERT INTO aniki_messages (key, body, created_at) SELECT coalesce((SELECT key"
    " FROM aniki_messages WHERE key > ?1 AND key < ?2 ORDER BY key DESC LIMIT 1), ?1) + 1, ?3, ?4"
    " WHERE EXISTS (SELECT 1 FROM aniki_sessions WHERE number = ?5)"
    " RETURNING key, (SELECT generation FROM aniki_sessions WHERE number = ?5)"
)
APPEND_KEYED = APPEND_IF + " RETURNING key, ?6"  # APPEND_IF, saying the key it took
REGISTER = "INSERT OR IGNORE INTO aniki_sessions (id) VALUES (?)"
SESSION = "SELECT number, generation FROM aniki_sessions WHERE id = ?"
# The id in the sessions table's own row for the number its id index gives: another id there
# means a changed byte in one of them, which only integrity_check finds (the index alone
# answers every other lookup by id).
ROW_ID = (
    "SELECT id FROM aniki_sessions WHERE number = (SELECT number FROM aniki_sessions WHERE id = ?)"
)
DROP_META = "DELETE FROM aniki_session_meta WHERE session_id = ?"
# One statement, so one snapshot: the generation, and the rows past ``after`` when it is
# unchanged (all rows when a clear changed it). A session without a row yields no row.
READ = (
    "SELECT s.generation, m.key, m.body FROM aniki_sessions AS s"
    " LEFT JOIN aniki_messages AS m"
    " ON m.key > CASE WHEN s.generation = ?2 THEN max(?3, s.number * ?4) ELSE s.number * ?4 END"
    " AND m.key < (s.number + 1) * ?4"
    " WHERE s.id = ?1 ORDER BY m.key"
)
# The most recent rows only, newest first: what a reader with nothing cached needs for a limit.
TAIL = (
    "SELECT m.key, m.body FROM aniki_sessions AS s JOIN aniki_messages AS m"
    " ON m.key > s.number * ?2 AND m.key < (s.number + 1) * ?2"
    " WHERE s.id = ?1 ORDER BY m.key DESC LIMIT ?3"
)
GET_META = "SELECT value FROM aniki_session_meta WHERE session_id = ? AND key = ?"
SET_META = (
    "INSERT INTO aniki_session_meta (session_id, key, value) VALUES (?, ?, ?)"
    " ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value"
)
DELETE_META = "DELETE FROM aniki_session_meta WHERE session_id = ? AND key = ?"
# A session emptied (by clear, an import, a prune): a new generation, and no info left.
EMPTIED = (
    "UPDATE aniki_sessions SET generation = generation + 1, title = NULL, owner = NULL,"
    " tags = '[]', created_at = NULL, updated_at = NULL WHERE number = ?"
)
DROP_TAGS = "DELETE FROM aniki_session_tags WHERE number = ?"
ADD_TAG = "INSERT OR IGNORE INTO aniki_session_tags (tag, number) VALUES (?, ?)"

# Of a session's row ``s``: its last message's ``what``, one backward seek in its block.
_LAST = (
    "(SELECT m.{what} FROM aniki_messages AS m WHERE m.key > s.number << 32"
    " AND m.key < (s.number + 1) << 32 ORDER BY m.key DESC LIMIT 1)"
)
COUNT = f"coalesce({_LAST.format(what='key')} - (s.number << 32), 0)"
"""Session ``s``'s message count: its last key's position, its keys being contiguous."""
UPDATED = f"max(s.updated_at, coalesce({_LAST.format(what='created_at')}, s.updated_at))"
"""Session ``s``'s exact ``updated_at``: its row's, or its last message's if later (an append
moves the row only when the second changes)."""
SECOND = "CAST(s.updated_at AS INTEGER)"
"""The whole second of session ``s``'s ``updated_at``, which its time indexes hold."""
SIZE = f"SELECT {COUNT} FROM aniki_sessions AS s WHERE s.id = ?"
"""A session's message count (no row: it holds none)."""
INFO = f"s.id, {COUNT}, {UPDATED}, s.title, s.owner, s.tags, s.created_at"
"""What a :class:`~aniki.sessions.SessionInfo` is read from, of the sessions row ``s``."""


def clock() -> float:
    """Now, in seconds since 1970 rounded to the microsecond, as every time is stored: it
    reads back as a ``datetime`` and converts to the same float again, so a listing's
    ``cursor`` and ``updated_after`` compare exactly with the stored times."""
    return round(time.time() * 1_000_000) / 1_000_000


def appended(number: int, bodies: list[str], now: float) -> list[tuple[int, int, str, float]]:
    """The parameters of :data:`APPEND` for each of ``bodies``, appended to session
    ``number`` at ``now``."""
    low = number * BLOCK
    return [(low, low + BLOCK, body, now) for body in bodies]
