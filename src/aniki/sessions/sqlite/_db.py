"""The SQLite database behind :class:`~aniki.sessions.SQLiteSession`: the connection, its
transactions, the queries, and damage. One :class:`Database` (one connection and one lock)
serves every session of a file in a process, so a thousand sessions do not hold a thousand
connections; it is rebuilt after a ``fork`` (a child never touches the parent's connection).
Opening checks the file first (:mod:`~aniki.sessions.sqlite._connect`): only an empty
database or an aniki store that passes its checks is ever written.

Damage: every ``sqlite3`` error is translated by :mod:`~aniki.sessions.sqlite._errors`. Once
anything in this process found a file damaged (opening it, a query, or a record that does
not decode), the file is listed in :data:`aniki.sessions._local_file.DAMAGED` and no write is
attempted on it again until another file is at the same path: damaged data is never
rewritten.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, NoReturn, TypeAlias, TypeVar

from ...errors import CorruptStoreError
from .._args import Durability
from .._fork import count as fork_count
from .._local_file import DAMAGED, identity_at, reason_of
from .._now import LATER, NOT_NOW, NotNow, WouldWait
from ._blobs import append_all, append_records, empty
from ._checkpoint import AUTOCHECKPOINT, Checkpointer
from ._connect import close_quietly, connect, let_go
from ._errors import DB_ERRORS, LOCKED_CODES, result_code, store_error
from ._schema import damage_hint
from ._sql import (
    APPEND,
    APPEND_KEYED,
    APPEND_MARKED,
    BLOCK,
    DROP_META,
    REGISTER,
    ROW_ID,
    SESSION,
    appended,
)

__all__ = ["BLOCK", "Database", "Row", "database_for"]

Row: TypeAlias = tuple[Any, ...]
"""A row a read fetched: its last two columns are a message's key and its record."""

T = TypeVar("T")


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
        self._hasty = False  # trying a call now: a wait gives up (WouldWait) until a write
        self._quick = False  # the connection's busy timeout is 0 (see now)
        self._trying = False  # a call tried now is running (on the event loop's thread)
        self._deferred = False  # no automatic checkpoint: they are handed to a thread
        self._writes = 0  # writes made with checkpoints deferred since the last one
        self._checkpoints = Checkpointer(path, durability)
        self._patience = f"PRAGMA busy_timeout = {int(timeout * 1000)}"

    @property
    def conn(self) -> sqlite3.Connection:
        """The open connection (opened, checked and migrated on first use)."""
        if self._forks != fork_count() or self._conn is None:
            let_go(self._conn, self._closer, self._forks)  # a parent's, if any: kept
            try:
                conn = connect(self.path, self.label, self._durability, self._timeout)
            except CorruptStoreError as exc:
                self.damaged(exc)
                raise
            self._conn, self._forks, self._quick, self._deferred = conn, fork_count(), False, False
            # A connection sits in a reference cycle with its statement cache, so without this
            # it would stay open (holding WAL locks) until the garbage collector ran.
            self._closer = weakref.finalize(self, close_quietly, conn)
        elif (self._quick and not self._hasty) or (self._deferred and not self._trying):
            self._wait_again()
        return self._conn

    def now(self, work: Callable[[], T], ready: Callable[[], bool] | None = None) -> T | NotNow:
        """``work()`` at once on this thread, or ``NOT_NOW`` having run nothing (the connection
        is busy or not open, each commit waits for the disk, or ``ready()`` says no); until
        it first writes, a lock held elsewhere stops it (see :mod:`aniki.sessions._now`).

        Such a call runs with the connection's busy timeout at 0, which it keeps afterwards:
        the next call tried now needs no statement to set it again, and any statement run
        otherwise (on a worker thread, or after the call's first write) sets the timeout
        back first (:attr:`conn`).

        It also runs with SQLite's automatic checkpoint off (it waits for the disk), which a
        statement run otherwise turns back on; ``_checkpoint`` says who checkpoints instead."""
        if self._durability == "full":
            return NOT_NOW
        if not self.lock.acquire(blocking=False):
            return LATER
        try:
            if (conn := self._conn) is None or self._forks != fork_count():
                return NOT_NOW
            try:
                if not self._quick:
                    conn.execute("PRAGMA busy_timeout = 0")
                    self._quick = True
                if not self._deferred:
                    conn.execute("PRAGMA wal_autocheckpoint = 0")
                    self._deferred = True
            except DB_ERRORS:
                return NOT_NOW
            self._hasty = self._trying = True
            try:
                return work() if ready is None or ready() else NOT_NOW
            except WouldWait:
                return NOT_NOW
            finally:
                self._hasty = self._trying = False
                self._writes = self._checkpoints.after(conn, self._writes)
        finally:
            self.lock.release()

    def wrote(self) -> None:
        """A write has committed. A call tried now that has written waits for locks again from
        here on, up to the timeout (:attr:`conn` sets it back before its next statement)."""
        self._hasty = False
        if self._deferred:
            self._writes += 1

    def _wait_again(self) -> None:
        # The busy timeout back (but before a call tried now writes), the checkpoints too.
        conn = self._conn
        with suppress(sqlite3.Error):
            if self._quick and not self._hasty:
                self._quick = False
                if conn is not None:
                    conn.execute(self._patience)
            if self._deferred and not self._trying:
                self._deferred = False
                if conn is not None:
                    conn.execute(f"PRAGMA wal_autocheckpoint = {AUTOCHECKPOINT}")

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
            if write:
                self.wrote()

    @contextmanager
    def errors(self) -> Iterator[None]:
        """Translate ``sqlite3`` errors raised inside into aniki errors naming the file."""
        try:
            yield
        except DB_ERRORS as exc:
            self.fail(exc)
        except CorruptStoreError as exc:
            self.damaged(exc)
            raise

    # --- damage ---------------------------------------------------------------------------

    def damaged(self, error: CorruptStoreError) -> CorruptStoreError:
        """Remember that this file is damaged (no write will touch it again); ``error``."""
        DAMAGED.remember(reason_of(error), path=self._key)
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
        if (found := DAMAGED.named(self._key)) is None:
            return
        if found[0] != identity_at(self.path):  # another file is at the path now
            DAMAGED.unname(self._key)
            self.close()  # its connection is to the file that was moved away
            return
        raise CorruptStoreError(
            f"no write is made to a file found damaged earlier: {found[1]}", store=self.label
        )

    def fail(self, exc: sqlite3.Error | UnicodeDecodeError) -> NoReturn:
        """Raise the aniki error for ``exc`` (its cause), remembering damage; when trying a
        call now (:meth:`now`), a lock held elsewhere gives the call up instead."""
        if self._hasty and isinstance(exc, sqlite3.Error) and result_code(exc) in LOCKED_CODES:
            raise WouldWait
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
            conn.execute(REGISTER, (session_id,))
            row = conn.execute(SESSION, (session_id,)).fetchone()
            number = self.session_row(row)[0]
            self.check_row(session_id)
            return number

    def check_row(self, session_id: str) -> None:
        """Damage when the sessions table's row that the id index gives for ``session_id``
        holds another id: a changed byte in one of them, found by the first read or write
        of each session object (``PRAGMA quick_check`` on open does not compare an index
        with its table, and every other lookup by id reads the index alone). Called with
        :attr:`lock` held, inside :meth:`errors`."""
        row = self.conn.execute(ROW_ID, (session_id,)).fetchone()
        if row is not None and row[0] != session_id:
            raise self.damage(f"the sessions table's row of session {session_id!r} is altered")

    def append(
        self, number: int, bodies: list[str], now: float, blobs: Mapping[str, bytes]
    ) -> None:
        """Append encoded messages to session ``number``, with the ``blobs`` they name, in
        one transaction (one message without blobs: :meth:`append_one`)."""
        if blobs:
            with self.transaction(write=True) as writing:
                append_records(writing, number, bodies, blobs, now)
            return
        with self.lock:
            try:
                append_all(self._writer(), appended(number, bodies, now))
            except DB_ERRORS as exc:
                self.fail(exc)
            self.wrote()

    def append_one(self, number: int, body: str, now: float) -> None:
        """:meth:`append` of one encoded message without blobs (the hottest path there is):
        one statement, so one transaction, in which SQLite takes the write lock (waiting up to
        the timeout) before it reads the session's last key."""
        with self.lock:
            try:
                low = number * BLOCK
                self._writer().execute(APPEND, (low, low + BLOCK, body, now))
            except DB_ERRORS as exc:
                self.fail(exc)
            self.wrote()

    def _writer(self) -> sqlite3.Connection:
        """The connection for a one-statement write, :attr:`lock` held: damage refused first,
        and a call tried now keeps its busy timeout of 0 until it has written."""
        if DAMAGED:
            self.refuse_if_damaged()
        conn = self._conn
        if conn is None or self._forks != fork_count() or (self._quick and not self._hasty):
            conn = self.conn
        return conn

    def append_returning(
        self, number: int, body: str, now: float, generation: int | None = None
    ) -> tuple[int, int] | None:
        """Append one encoded message without blobs to session ``number`` in one statement
        (one transaction) that says the key it took and the session's generation; with
        ``generation``, only if the session's is still that. ``None``, having written
        nothing, when it was not, or the session has no row."""
        with self.lock:
            try:
                conn = self._writer()
                low = number * BLOCK
                if generation is None:
                    found = conn.execute(APPEND_MARKED, (low, low + BLOCK, body, now, number))
                else:
                    row = (low, low + BLOCK, body, now, number, generation)
                    found = conn.execute(APPEND_KEYED, row)
                rows = found.fetchall()  # to its end: the statement's transaction commits
            except DB_ERRORS as exc:
                self.fail(exc)
            self.wrote()
        return rows[0] if rows else None

    @property
    def reader(self) -> sqlite3.Connection:
        """The connection for one read statement: :attr:`conn`, but keeping a busy timeout
        of 0 where it is (a call tried now that has written): a read in WAL mode waits for
        no writer, and the rare one that meets a lock (a recovery, a checkpoint closing the
        log) runs again after :meth:`read_again`, so a turn's read after its append costs no
        statement setting the timeout back and none setting it to 0 again after."""
        conn = self._conn
        if conn is None or self._forks != fork_count():
            return self.conn
        return conn

    def read_again(self, exc: sqlite3.Error | UnicodeDecodeError) -> None:
        """After ``exc`` from a read on :attr:`reader`: when it met a lock with the timeout
        at 0 outside a call still tried now, set the timeout back (the caller reads again);
        any other error raised as :meth:`fail` raises it."""
        if (
            self._hasty
            or not self._quick
            or isinstance(exc, UnicodeDecodeError)
            or result_code(exc) not in LOCKED_CODES
        ):
            self.fail(exc)
        self._wait_again()

    def session_row(self, row: tuple[object, ...] | None) -> tuple[int, int]:
        """``(number, generation)`` of a row :data:`~._sql.SESSION` read; damage if it is
        missing or not numbers."""
        if row is None or type(row[0]) is not int or type(row[1]) is not int:
            raise self.damage("a row of the sessions table cannot be read")
        return row[0], row[1]

    def clear(self, session_id: str) -> int:
        """Delete a session's messages, meta and info and bump its generation; the new
        generation."""
        with self.transaction(write=True) as conn:
            row = conn.execute(SESSION, (session_id,)).fetchone()
            if row is None:
                conn.execute(DROP_META, (session_id,))
                return 0
            return empty(conn, session_id, *self.session_row(row))

    def replace(
        self, session_id: str, bodies: list[str], now: float, blobs: Mapping[str, bytes]
    ) -> int:
        """Make ``bodies`` a session's whole history and drop its meta and info (``clear``
        then an append), in one transaction (a reader sees the old history or the new one,
        never neither); the new generation."""
        with self.transaction(write=True) as conn:
            conn.execute(REGISTER, (session_id,))
            row = conn.execute(SESSION, (session_id,)).fetchone()
            number, generation = self.session_row(row)
            generation = empty(conn, session_id, number, generation)
            append_records(conn, number, bodies, blobs, now)
            return generation

    def close(self) -> None:
        """Close the connection (it reopens on next use)."""
        with self.lock:
            let_go(self._conn, self._closer, self._forks)
            self._conn, self._closer = None, None
        self._checkpoints.close()


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
