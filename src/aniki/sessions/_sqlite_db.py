"""The SQLite database behind :class:`~aniki.sessions.SQLiteSession`: opening, queries, errors.

One :class:`Database` (one connection and one lock) serves every session of a file in a
process, so a thousand sessions do not hold a thousand connections. It is rebuilt after a
``fork`` (a child never touches the parent's connection).

Opening checks the file first (``_sqlite_schema``): only an empty database or an aniki store
is ever written.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import NoReturn

from ..errors import CorruptStoreError, StoreError, StoreUnavailableError
from ._codec import Durability
from ._fork import count as fork_count
from ._sqlite_schema import check_header, prepare_schema

__all__ = ["BLOCK", "Database", "database_for"]

BLOCK = 1 << 32
"""Message keys per session: key = number * BLOCK + position (from 1)."""

_APPEND = (  # the key after the session's last one: a single backward seek
    "INSERT INTO aniki_messages (key, body, created_at) VALUES (coalesce((SELECT key"
    " FROM aniki_messages WHERE key > ?1 AND key < ?2 ORDER BY key DESC LIMIT 1), ?1) + 1, ?3, ?4)"
)
_REGISTER = "INSERT OR IGNORE INTO aniki_sessions (id) VALUES (?)"
_SESSION = "SELECT number, generation FROM aniki_sessions WHERE id = ?"
_DROP_META = "DELETE FROM aniki_session_meta WHERE session_id = ?"
# One statement, so one snapshot: the generation, and the rows past ``after`` when it is
# unchanged (all rows when a clear changed it). A session without a row yields no row.
_READ = (
    "SELECT s.generation, m.key, m.body FROM aniki_sessions AS s"
    " LEFT JOIN aniki_messages AS m"
    " ON m.key > CASE WHEN s.generation = ?2 THEN max(?3, s.number * ?4) ELSE s.number * ?4 END"
    " AND m.key < (s.number + 1) * ?4"
    " WHERE s.id = ?1 ORDER BY m.key"
)
# The most recent rows only, newest first: what a reader with nothing cached needs for a limit.
_TAIL = (
    "SELECT m.key, m.body FROM aniki_sessions AS s JOIN aniki_messages AS m"
    " ON m.key > s.number * ?2 AND m.key < (s.number + 1) * ?2"
    " WHERE s.id = ?1 ORDER BY m.key DESC LIMIT ?3"
)
_GET_META = "SELECT value FROM aniki_session_meta WHERE session_id = ? AND key = ?"
_SET_META = (
    "INSERT INTO aniki_session_meta (session_id, key, value) VALUES (?, ?, ?)"
    " ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value"
)
_DELETE_META = "DELETE FROM aniki_session_meta WHERE session_id = ? AND key = ?"
_LIST = (
    "SELECT s.id, count(*), max(m.created_at) FROM aniki_sessions AS s"
    " JOIN aniki_messages AS m ON m.key > s.number * ?1 AND m.key < (s.number + 1) * ?1"
    " GROUP BY s.number ORDER BY 3 DESC, s.id"
)

_SYNCHRONOUS: dict[Durability, str] = {"off": "OFF", "normal": "NORMAL", "full": "FULL"}


_INHERITED: list[sqlite3.Connection] = []
"""Connections a forked child inherited: kept, never used or closed (that is the parent's job)."""


def _close(conn: sqlite3.Connection) -> None:
    with suppress(sqlite3.Error):
        conn.close()


class Database:
    """A connection to one SQLite store, serialised by a lock; see the module docstring."""

    def __init__(self, path: Path, durability: Durability, timeout: float) -> None:
        self.path = path
        self.label = f"sqlite:///{path}"
        self.lock = threading.RLock()
        self._durability = durability
        self._timeout = timeout
        self._forks = -1
        self._conn: sqlite3.Connection | None = None
        self._closer: weakref.finalize[[sqlite3.Connection], Database] | None = None

    @property
    def conn(self) -> sqlite3.Connection:
        """The open connection (opened, checked and migrated on first use)."""
        if self._forks != fork_count() or self._conn is None:
            if self._conn is not None:  # the parent's, inherited through fork: never touch it
                if self._closer is not None:
                    self._closer.detach()
                _INHERITED.append(self._conn)
            conn = self._open()
            self._conn, self._forks = conn, fork_count()
            # A connection sits in a reference cycle with its statement cache, so without this
            # it would stay open (holding WAL locks) until the garbage collector ran.
            self._closer = weakref.finalize(self, _close, conn)
        return self._conn

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """One transaction under the lock: ``BEGIN IMMEDIATE`` when writing, a snapshot if not."""
        with self.lock, self.errors():
            conn = self.conn
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @contextmanager
    def errors(self) -> Iterator[None]:
        """Translate ``sqlite3`` errors raised inside into aniki errors naming the file."""
        try:
            yield
        except sqlite3.Error as exc:
            raise_store_error(exc, self.label, self._timeout)

    # --- the queries (the append and read paths avoid context managers: they are hot) ---

    def register(self, session_id: str) -> int:
        """The session's number (its block of message keys), creating it if needed."""
        with self.lock, self.errors():
            conn = self.conn
            conn.execute(_REGISTER, (session_id,))
            return int(conn.execute(_SESSION, (session_id,)).fetchone()[0])

    def append_one(self, number: int, body: str, now: float) -> None:
        """Append one encoded message to session ``number`` (the hottest path there is).

        One statement is one transaction: no ``BEGIN`` is needed, and SQLite takes the write
        lock (waiting up to the timeout) before it reads the session's last key.
        """
        low = number * BLOCK
        with self.lock:
            try:
                conn = self._conn
                if conn is None or self._forks != fork_count():
                    conn = self.conn
                conn.execute(_APPEND, (low, low + BLOCK, body, now))
            except sqlite3.Error as exc:
                raise_store_error(exc, self.label, self._timeout)

    def append(self, number: int, bodies: list[str], now: float) -> None:
        """Append encoded messages to session ``number`` in one transaction."""
        low = number * BLOCK
        with self.lock:
            try:
                conn = self.conn
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.executemany(_APPEND, [(low, low + BLOCK, body, now) for body in bodies])
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise_store_error(exc, self.label, self._timeout)

    def read_after(
        self, session_id: str, generation: int | None, after: int
    ) -> tuple[int, list[tuple[int, str]]]:
        """The session's generation and its rows with keys above ``after``.

        When the generation is not ``generation`` (a clear happened), all its rows instead.
        """
        with self.lock:
            try:
                rows = self.conn.execute(_READ, (session_id, generation, after, BLOCK)).fetchall()
            except sqlite3.Error as exc:
                raise_store_error(exc, self.label, self._timeout)
        if not rows:
            return 0, []
        return int(rows[0][0]), [(key, body) for _, key, body in rows if key is not None]

    def read_tail(self, session_id: str, limit: int) -> list[tuple[int, str]]:
        """The session's last ``limit`` rows, oldest first."""
        with self.lock:
            try:
                rows = self.conn.execute(_TAIL, (session_id, BLOCK, limit)).fetchall()
            except sqlite3.Error as exc:
                raise_store_error(exc, self.label, self._timeout)
        return [(key, body) for key, body in reversed(rows)]

    def clear(self, session_id: str) -> int:
        """Delete a session's messages and meta and bump its generation; the new generation."""
        with self.transaction(write=True) as conn:
            row = conn.execute(_SESSION, (session_id,)).fetchone()
            if row is None:
                conn.execute(_DROP_META, (session_id,))
                return 0
            return _empty(conn, session_id, *row)

    def replace(self, session_id: str, bodies: list[str], now: float) -> int:
        """Make ``bodies`` a session's whole history and drop its meta, in one transaction
        (a reader sees the old history or the new one, never neither); the new generation."""
        with self.transaction(write=True) as conn:
            conn.execute(_REGISTER, (session_id,))
            number, generation = conn.execute(_SESSION, (session_id,)).fetchone()
            generation = _empty(conn, session_id, number, generation)
            low = int(number) * BLOCK
            conn.executemany(_APPEND, [(low, low + BLOCK, body, now) for body in bodies])
            return generation

    def get_meta(self, session_id: str, key: str) -> str | None:
        """The stored meta text, or ``None``."""
        with self.lock, self.errors():
            row = self.conn.execute(_GET_META, (session_id, key)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, session_id: str, key: str, text: str | None) -> None:
        """Store meta text; ``None`` deletes the key."""
        with self.transaction(write=True) as conn:
            if text is None:
                conn.execute(_DELETE_META, (session_id, key))
            else:
                conn.execute(_SET_META, (session_id, key, text))

    def list_sessions(self) -> list[tuple[str, int, float]]:
        """``(id, message count, last append time)`` of every session with messages."""
        with self.transaction(write=False) as conn:
            rows = conn.execute(_LIST, (BLOCK,)).fetchall()
        return [(str(a), int(b), float(c)) for a, b, c in rows]

    def close(self) -> None:
        """Close the connection (it reopens on next use)."""
        with self.lock:
            if self._closer is not None and self._forks == fork_count():
                self._closer()
            self._conn, self._closer = None, None

    def _open(self) -> sqlite3.Connection:
        check_header(self.path, self.label)
        conn = sqlite3.connect(
            self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False
        )
        try:
            prepare_schema(conn, self.label)
            # Set only once the file is known to be ours: WAL rewrites the header.
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={_SYNCHRONOUS[self._durability]}")
        except BaseException:
            conn.close()
            raise
        return conn


def _empty(conn: sqlite3.Connection, session_id: str, number: int, generation: int) -> int:
    """Delete session ``number``'s messages and meta and bump its generation; the new one."""
    low = int(number) * BLOCK
    conn.execute(_DROP_META, (session_id,))
    conn.execute("DELETE FROM aniki_messages WHERE key > ? AND key < ?", (low, low + BLOCK))
    conn.execute(
        "UPDATE aniki_sessions SET generation = generation + 1 WHERE number = ?", (number,)
    )
    return int(generation) + 1


def raise_store_error(exc: sqlite3.Error, label: str, timeout: float) -> NoReturn:
    """Raise the aniki error for ``exc``, with ``exc`` as its cause."""
    text = str(exc)
    lowered = text.lower()
    error: StoreError
    if "not a database" in lowered or "malformed" in lowered or "corrupt" in lowered:
        error = CorruptStoreError(
            f"the database file is corrupt or not a SQLite database ({text}); "
            "restore it from a backup or use a new file",
            store=label,
        )
    elif "locked" in lowered or "busy" in lowered:
        error = StoreUnavailableError(
            f"the database stayed locked by another connection for {timeout:g} s ({text}); "
            "retry, or raise timeout=",
            store=label,
        )
    elif isinstance(exc, sqlite3.OperationalError):
        error = StoreUnavailableError(
            f"the database cannot be used ({text}); check the path, its permissions and "
            "free disk space",
            store=label,
        )
    else:
        error = StoreError(f"the database failed: {text}", store=label)
    raise error from exc


_DATABASES: weakref.WeakValueDictionary[tuple[str, str, float], Database] = (
    weakref.WeakValueDictionary()
)
_DATABASES_LOCK = threading.Lock()


def database_for(path: Path, durability: Durability, timeout: float) -> Database:
    """The process-wide :class:`Database` for this file and settings (shared while in use)."""
    key = (str(path), durability, timeout)
    with _DATABASES_LOCK:
        database = _DATABASES.get(key)
        if database is None:
            database = Database(path, durability, timeout)
            _DATABASES[key] = database
        return database
