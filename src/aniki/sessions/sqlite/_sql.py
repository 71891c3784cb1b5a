"""The SQL text of a SQLite store's reads and writes, and the layout of its message keys.

A session owns the block of message keys ``number * BLOCK + 1`` to ``(number + 1) * BLOCK -
1`` (see :mod:`~aniki.sessions.sqlite._schema`): its messages are one contiguous range of the
table's own B-tree, so a read is a range scan and an append goes to the end of the range.
"""

from __future__ import annotations

__all__ = [
    "APPEND",
    "BLOCK",
    "DELETE_META",
    "DROP_META",
    "GET_META",
    "LIST",
    "READ",
    "REGISTER",
    "SESSION",
    "SET_META",
    "TAIL",
    "appended",
]

BLOCK = 1 << 32
"""Message keys per session: key = number * BLOCK + position (from 1)."""

APPEND = (  # the key after the session's last one: a single backward seek
    "INSERT INTO aniki_messages (key, body, created_at) VALUES (coalesce((SELECT key"
    " FROM aniki_messages WHERE key > ?1 AND key < ?2 ORDER BY key DESC LIMIT 1), ?1) + 1, ?3, ?4)"
)
REGISTER = "INSERT OR IGNORE INTO aniki_sessions (id) VALUES (?)"
SESSION = "SELECT number, generation FROM aniki_sessions WHERE id = ?"
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
LIST = (
    "SELECT s.id, count(*), max(m.created_at) FROM aniki_sessions AS s"
    " JOIN aniki_messages AS m ON m.key > s.number * ?1 AND m.key < (s.number + 1) * ?1"
    " GROUP BY s.number ORDER BY 3 DESC, s.id"
)


def appended(number: int, bodies: list[str], now: float) -> list[tuple[int, int, str, float]]:
    """The parameters of :data:`APPEND` for each of ``bodies``, appended to session
    ``number`` at ``now``."""
    low = number * BLOCK
    return [(low, low + BLOCK, body, now) for body in bodies]
