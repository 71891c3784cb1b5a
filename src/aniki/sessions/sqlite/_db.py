"""The SQLite database behind :class:`~aniki.sessions.SQLiteSession`: opening, queries, errors.

One :class:`Database` (one connection and one lock) serves every session of a file in a
process, so a thousand sessions do not hold a thousand connections. It is rebuilt after a
``fork`` (a child never touches the parent's connection).

Opening checks the file first (``_sqlite_schema``): only an empty database or an aniki store
that passes its checks is ever written.

Damage: every ``sqlite3`` error is translated by its result code (:meth:`Database.fail`):
damage (corrupt pages, a file that is not a database, rows that break aniki's own
constraints, text that is not UTF-8) is :class:`~aniki.CorruptStoreError`; a lock, a full
disk, missing permissions or a failing disk are :class:`~aniki.StoreUnavailableError`, each
with its own advice. Once anything in this process found a file damaged (opening it, a
query, or a record that does not decode), no write is attempted on that file again until
it is replaced by another file at the same path: damaged data is never rewritten.
"""

from __future__ import annotations

import math
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import NoReturn

from ...errors import CorruptStoreError, StoreError, StoreUnavailableError
from .._codec import Durability
from .._fork import count as fork_count
from ._schema import check_header, damage_hint, header_problem, prepare_schema

__all__ = ["BLOCK", "Database", "database_for"]

_DB_ERRORS = (sqlite3.Error, UnicodeDecodeError)
"""What a call into ``sqlite3`` raises for the file: its errors, and a message it could not
decode (SQLite quotes a damaged schema's text, which need not be UTF-8)."""

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


_DAMAGED: dict[str, tuple[tuple[int, int], str]] = {}
"""Files found damaged in this process: path -> (the file's device and inode, what was found)."""
_HELD: list[int] = []
"""A descriptor of every file in :data:`_DAMAGED`, never closed: while it is open, no new file
can be given the same inode (file systems reuse freed ones at once), so a refusal never
passes to another file. Never closed, too, because closing any descriptor of a file drops
the POSIX locks SQLite holds on it in this process."""
_DAMAGED_LOCK = threading.Lock()


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


# SQLite's primary result codes (https://sqlite.org/rescode.html) and what each one means here.
_DAMAGE_CODES = frozenset({11, 19, 20, 24, 26})  # CORRUPT CONSTRAINT MISMATCH FORMAT NOTADB
_LOCKED_CODES = frozenset({5, 6})  # BUSY LOCKED
_FULL = 13
_NO_PERMISSION_CODES = frozenset({3, 8, 23})  # PERM READONLY AUTH
_CANTOPEN = 14
_IOERR = 10
_NOMEM = 7
_TEXT_CODES = (  # for Python versions whose sqlite3 errors carry no result code
    ("malformed", 11),
    ("not a database", 26),
    ("corrupt", 11),
    ("unsupported file format", 24),
    ("could not decode", 11),
    ("constraint", 19),
    ("locked", 5),
    ("busy", 5),
    ("disk is full", _FULL),
    ("permission denied", 3),
    ("readonly", 8),
    ("read-only", 8),
    ("unable to open", _CANTOPEN),
    ("i/o error", _IOERR),
    ("out of memory", _NOMEM),
)
# Real seconds since 1970 that datetime can show: anything else in created_at is damage.
_TIMES = (-62135596800.0, 253402300799.0)


class Database:
    """A connection to one SQLite store, serialised by a lock; see the module docstring."""

    def __init__(self, path: Path, durability: Durability, timeout: float) -> None:
        self.path = path
        self.label = f"sqlite:///{path}"
        self.lock = threading.RLock()
        self._key = str(path)
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
            try:
                conn = self._open()
            except CorruptStoreError as exc:
                self.damaged(exc)
                raise
            self._conn, self._forks = conn, fork_count()
            # A connection sits in a reference cycle with its statement cache, so without this
            # it would stay open (holding WAL locks) until the garbage collector ran.
            self._closer = weakref.finalize(self, _close, conn)
        return self._conn

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """One transaction under the lock: ``BEGIN IMMEDIATE`` when writing, a snapshot if not."""
        with self.lock, self.errors():
            if write:
                self.refuse_if_damaged()
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
        except _DB_ERRORS as exc:
            self.fail(exc)
        except CorruptStoreError as exc:
            self.damaged(exc)
            raise

    # --- damage ---------------------------------------------------------------------------

    def damaged(self, error: CorruptStoreError) -> CorruptStoreError:
        """Remember that this file is damaged (no write will touch it again); ``error``."""
        with _DAMAGED_LOCK:
            if self._key in _DAMAGED:
                return error
            try:
                held = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except OSError:
                return error  # gone already: there is nothing left to write to
            _HELD.append(held)
            status = os.fstat(held)
            reason = str(error).split(" [store: ")[0]
            _DAMAGED[self._key] = ((status.st_dev, status.st_ino), reason)
        return error

    def damage(self, what: str) -> CorruptStoreError:
        """A :class:`~aniki.CorruptStoreError` for damaged rows, remembered as :meth:`damaged`."""
        return self.damaged(
            CorruptStoreError(
                f"the database file is damaged: {what}; {damage_hint(self.path)}",
                store=self.label,
            )
        )

    def refuse_if_damaged(self) -> None:
        """Raise :class:`~aniki.CorruptStoreError` when this file was found damaged before."""
        with _DAMAGED_LOCK:
            found = _DAMAGED.get(self._key)
            if found is None:
                return
            if found[0] != _identity(self.path):  # another file is at the path now
                del _DAMAGED[self._key]
                replaced = True
            else:
                replaced = False
        if replaced:
            self.close()  # its connection is to the file that was moved away
            return
        raise CorruptStoreError(
            f"no write is made to a file found damaged earlier: {found[1]}", store=self.label
        )

    def fail(self, exc: sqlite3.Error | UnicodeDecodeError) -> NoReturn:
        """Raise the aniki error for ``exc`` (its cause), remembering damage."""
        error = store_error(exc, self.label, self._timeout, self.path)
        if isinstance(error, CorruptStoreError):
            self.damaged(error)
        raise error from exc

    # --- the queries (the append and read paths avoid context managers: they are hot) ---

    def register(self, session_id: str) -> int:
        """The session's number (its block of message keys), creating it if needed."""
        with self.lock, self.errors():
            self.refuse_if_damaged()
            conn = self.conn
            conn.execute(_REGISTER, (session_id,))
            row = conn.execute(_SESSION, (session_id,)).fetchone()
            return self._session_row(row)[0]

    def append_one(self, number: int, body: str, now: float) -> None:
        """Append one encoded message to session ``number`` (the hottest path there is).

        One statement is one transaction: no ``BEGIN`` is needed, and SQLite takes the write
        lock (waiting up to the timeout) before it reads the session's last key.
        """
        low = number * BLOCK
        with self.lock:
            if _DAMAGED:
                self.refuse_if_damaged()
            try:
                conn = self._conn
                if conn is None or self._forks != fork_count():
                    conn = self.conn
                conn.execute(_APPEND, (low, low + BLOCK, body, now))
            except _DB_ERRORS as exc:
                self.fail(exc)

    def append(self, number: int, bodies: list[str], now: float) -> None:
        """Append encoded messages to session ``number`` in one transaction."""
        low = number * BLOCK
        with self.lock:
            if _DAMAGED:
                self.refuse_if_damaged()
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
            except _DB_ERRORS as exc:
                self.fail(exc)

    def read_after(
        self, session_id: str, generation: int | None, after: int
    ) -> tuple[int, list[tuple[int, str]]]:
        """The session's generation and its rows with keys above ``after``.

        When the generation is not ``generation`` (a clear happened), all its rows instead.
        """
        with self.lock:
            try:
                rows = self.conn.execute(_READ, (session_id, generation, after, BLOCK)).fetchall()
            except _DB_ERRORS as exc:
                self.fail(exc)
        if not rows:
            return 0, []
        found = rows[0][0]
        if type(found) is not int:
            raise self.damage(f"session {session_id!r} has a generation that is not a number")
        records = [(key, body) for _, key, body in rows if key is not None]
        self._check_records(records)
        return found, records

    def read_tail(self, session_id: str, limit: int) -> list[tuple[int, str]]:
        """The session's last ``limit`` rows, oldest first."""
        # A session holds fewer than BLOCK messages: a larger limit means all of them.
        limit = min(limit, BLOCK)
        with self.lock:
            try:
                rows = self.conn.execute(_TAIL, (session_id, BLOCK, limit)).fetchall()
            except _DB_ERRORS as exc:
                self.fail(exc)
        records = [(key, body) for key, body in reversed(rows)]
        self._check_records(records)
        return records

    def _check_records(self, records: list[tuple[int, str]]) -> None:
        for key, body in records:
            if type(body) is not str or type(key) is not int:
                raise self.damage(
                    f"the message stored at key {key!r} is {type(body).__name__}, not text"
                )

    def _session_row(self, row: tuple[object, ...] | None) -> tuple[int, int]:
        if row is None or type(row[0]) is not int or type(row[1]) is not int:
            raise self.damage("a row of the sessions table cannot be read")
        return row[0], row[1]

    def clear(self, session_id: str) -> int:
        """Delete a session's messages and meta and bump its generation; the new generation."""
        with self.transaction(write=True) as conn:
            row = conn.execute(_SESSION, (session_id,)).fetchone()
            if row is None:
                conn.execute(_DROP_META, (session_id,))
                return 0
            return _empty(conn, session_id, *self._session_row(row))

    def replace(self, session_id: str, bodies: list[str], now: float) -> int:
        """Make ``bodies`` a session's whole history and drop its meta, in one transaction
        (a reader sees the old history or the new one, never neither); the new generation."""
        with self.transaction(write=True) as conn:
            conn.execute(_REGISTER, (session_id,))
            row = conn.execute(_SESSION, (session_id,)).fetchone()
            number, generation = self._session_row(row)
            generation = _empty(conn, session_id, number, generation)
            low = int(number) * BLOCK
            conn.executemany(_APPEND, [(low, low + BLOCK, body, now) for body in bodies])
            return generation

    def get_meta(self, session_id: str, key: str) -> str | None:
        """The stored meta text, or ``None``."""
        with self.lock, self.errors():
            row = self.conn.execute(_GET_META, (session_id, key)).fetchone()
        if row is not None and type(row[0]) is not str:
            raise self.damage(f"the meta value {key!r} of session {session_id!r} is not text")
        return None if row is None else row[0]

    def set_meta(self, session_id: str, key: str, text: str | None) -> None:
        """Store meta text; ``None`` deletes the key."""
        with self.transaction(write=True) as conn:
            if text is None:
                conn.execute(_DELETE_META, (session_id, key))
            else:
                conn.execute(_SET_META, (session_id, key, text))

    def swap_meta(
        self,
        session_id: str,
        key: str,
        matches: Callable[[str | None], bool],
        text: str | None,
    ) -> bool:
        """In one write transaction: when ``matches(stored text or None)``, store ``text``
        (``None`` deletes the key) and return ``True``; otherwise change nothing."""
        with self.transaction(write=True) as conn:
            row = conn.execute(_GET_META, (session_id, key)).fetchone()
            if row is not None and type(row[0]) is not str:
                raise self.damage(f"the meta value {key!r} of session {session_id!r} is not text")
            if not matches(None if row is None else row[0]):
                return False
            if text is None:
                conn.execute(_DELETE_META, (session_id, key))
            else:
                conn.execute(_SET_META, (session_id, key, text))
            return True

    def list_sessions(self) -> list[tuple[str, int, float]]:
        """``(id, message count, last append time)`` of every session with messages."""
        with self.transaction(write=False) as conn:
            rows = conn.execute(_LIST, (BLOCK,)).fetchall()
        for session_id, count, updated in rows:
            if (
                type(session_id) is not str
                or type(count) is not int
                or type(updated) not in (int, float)
                or not math.isfinite(updated)
                or not _TIMES[0] <= updated <= _TIMES[1]
            ):
                raise self.damage("a session's id, size or last update time cannot be read")
        return [(a, b, float(c)) for a, b, c in rows]

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
            prepare_schema(conn, self.path, self.label)
            # Set only once the file is known to be ours and intact: WAL rewrites the header.
            _use_wal(conn, self._timeout)
            conn.execute(f"PRAGMA synchronous={_SYNCHRONOUS[self._durability]}")
        except BaseException:
            conn.close()
            raise
        return conn


def _use_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Put the file in WAL mode (once per file), waiting up to ``timeout`` for the lock.

    Switching needs the file to itself, and SQLite answers "database is locked" at once,
    without its busy wait, when other connections are opening the same new file at the
    same moment: retried here until one of them has switched it or the time is up.
    """
    deadline = time.monotonic() + timeout
    pause = 0.002
    while True:
        try:
            if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if result_code(exc) not in _LOCKED_CODES or time.monotonic() >= deadline:
                raise
        time.sleep(min(pause, max(deadline - time.monotonic(), 0)))
        pause = min(pause * 2, 0.05)


def _empty(conn: sqlite3.Connection, session_id: str, number: int, generation: int) -> int:
    """Delete session ``number``'s messages and meta and bump its generation; the new one."""
    low = int(number) * BLOCK
    conn.execute(_DROP_META, (session_id,))
    conn.execute("DELETE FROM aniki_messages WHERE key > ? AND key < ?", (low, low + BLOCK))
    conn.execute(
        "UPDATE aniki_sessions SET generation = generation + 1 WHERE number = ?", (number,)
    )
    return int(generation) + 1


def result_code(exc: sqlite3.Error) -> int | None:
    """SQLite's primary result code for ``exc`` (``None``: an error of Python's module)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF != 1:
        return code & 0xFF
    # SQLITE_ERROR (1) is generic: its text says more (a damaged schema is reported so).
    lowered = str(exc).lower()
    return next((value for text, value in _TEXT_CODES if text in lowered), code)


def store_error(
    exc: sqlite3.Error | UnicodeDecodeError, label: str, timeout: float, path: Path
) -> StoreError:
    """The aniki error for ``exc``: damage, or the one kind of trouble it is, with advice."""
    if isinstance(exc, UnicodeDecodeError):
        # The sqlite3 module decodes SQLite's messages as UTF-8; one quoting a damaged
        # schema (a flipped byte in its text) cannot be decoded.
        return CorruptStoreError(
            "the database file is damaged: SQLite found text that is not UTF-8 in its "
            f"schema; {damage_hint(path)}",
            store=label,
        )
    text = str(exc)
    code = result_code(exc)
    if code == _IOERR:  # a failing disk, or a file cut short: the file's size tells them apart
        code = 11 if _file_problem(path) is not None else _IOERR
    if code in _DAMAGE_CODES:
        return CorruptStoreError(
            f"the database file is damaged ({text}); {damage_hint(path)}", store=label
        )
    if code in _LOCKED_CODES:
        advice = (
            f"stayed locked by another connection for {timeout:g} s ({text}); retry, or "
            "raise timeout="
        )
    elif code == _FULL:
        advice = f"cannot grow ({text}): the disk is full; free some space, then retry"
    elif code in _NO_PERMISSION_CODES:
        advice = (
            f"may not be written ({text}); check the permissions of the file, its -wal and "
            "-shm files and its directory"
        )
    elif code == _CANTOPEN:
        advice = (
            f"cannot be opened ({text}); check that it is a file and that aniki may create "
            "files in its directory (the -wal and -shm files)"
        )
    elif code == _IOERR:
        advice = f"could not be read or written ({text}): the disk or file system failed"
    elif code == _NOMEM:
        advice = f"could not be used ({text}): out of memory"
    else:
        return StoreError(f"the database failed: {text}", store=label)
    return StoreUnavailableError(f"the database file {advice}", store=label)


def _file_problem(path: Path) -> str | None:
    try:
        with path.open("rb") as file:
            header = file.read(100)
            return header_problem(header, os.fstat(file.fileno()).st_size) if header else None
    except OSError:
        return None


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
