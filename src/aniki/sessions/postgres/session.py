"""``PostgresSession``: sessions stored in PostgreSQL, for synchronous code (psycopg 3).

Needs the ``postgres`` extra: ``pip install 'aniki-sdk[postgres]'``. The statements and the
incremental-read cache are shared with :class:`AsyncPostgresSession` (``_async_session``) and
live in ``_core`` and ``_edits``, running them on a connection in ``_drive``; construction,
deadlines and errors in ``_base``. This module holds the connections.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from ..._stamps import stamp, stamp_one
from ...messages import Message, MessageLike, to_message
from .._codec import check_limit, to_messages
from .._edits import fork_target
from .._pages import Page
from ..base import SessionInfo
from ._async_session import AsyncPostgresSession
from ._base import DEFAULT_TABLE, PostgresBase, sets_connect_timeout
from ._core import DEFAULT_TIMEOUT, Flow
from ._drive import Alarm, arm, borrow_autocommit, disarm, drive

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

__all__ = ["AsyncPostgresSession", "PostgresSession"]

T = TypeVar("T")

_sets_connect_timeout = sets_connect_timeout  # open_store's backend checks a DSN with it


class PostgresSession(PostgresBase):
    """A conversation stored in PostgreSQL, shared by every instance and process using the id.

    The tables are created on first use if absent. Each write is one transaction: a batch is
    stored whole or not at all. Messages are ordered by an identity column, never by a clock.
    Reading the history again costs only the messages appended since this instance last read.

    Example::

        session = PostgresSession("conversation-42", "postgresql://postgres@localhost/test")
        session.add_message({"role": "user", "content": "Hi"})
        session.get_messages()  # (Message(role='user', content='Hi', ...),)
        branch = session.fork("conversation-42b")  # a copy that goes its own way
        session.undo()  # (Message(role='user', content='Hi', ...),): the last turn, removed
        session.list_sessions()  # [SessionInfo(id='conversation-42b', message_count=1, ...)]
        branch.close()
        session.close()

    Each instance opens one connection when first used. To share connections between many
    sessions, pass ``pool=`` a ``psycopg_pool.ConnectionPool`` instead of ``dsn``.

    Each call gives up after ``timeout`` seconds (default 10: waiting for a pooled
    connection, connecting and every statement together) with
    :class:`~aniki.StoreUnavailableError`.
    """

    _pool_class = "ConnectionPool"

    def __init__(
        self,
        id: str,
        dsn: str | None = None,
        *,
        table: str = DEFAULT_TABLE,
        pool: ConnectionPool[Any] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__(id, dsn, table, pool, timeout)
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()

    def add_message(self, message: MessageLike) -> None:
        """Validate and append one message."""
        batch = [stamp_one(to_message(message))]
        self._run(lambda: self._core.append(batch))

    def add_messages(self, messages: Iterable[MessageLike]) -> None:
        """Validate all, then append all in one transaction."""
        batch = stamp(to_messages(messages))
        self._run(lambda: self._core.append(batch))

    def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        """The history, oldest first; with ``limit``, only the most recent ``limit``."""
        checked = check_limit(limit)
        return self._run(lambda: self._core.read(checked), read=True)

    def _add_then_get(
        self, messages: list[Message], limit: int | None = None
    ) -> tuple[Message, ...]:
        # add_messages then get_messages, usually in one statement (see aniki._run.session_io).
        checked, batch = check_limit(limit), stamp(messages)
        return self._run(lambda: self._core.append_then_read(batch, checked))

    def _page(self, start: int, limit: int) -> Page:
        """Messages ``start`` to ``start + limit`` in one statement (see
        :func:`aniki.sessions._pages.read_page`); reads only those rows, caches nothing."""
        return self._run(lambda: self._core.page(start, limit), read=True)

    def _add_after(
        self,
        messages: list[Message],
        after: str | None,
        *,
        read: bool = False,
        limit: int | None = None,
    ) -> tuple[Message, ...] | None:
        # add_messages (with read, then get_messages) in one statement, only after the
        # message with the id `after` (aniki.sessions._chain.AppendsAfter); None, writing
        # nothing, if another message is last.
        checked, batch = check_limit(limit), stamp(messages)
        return self._run(lambda: self._core.append_after(batch, after, read, checked))

    def clear(self) -> None:
        """Delete the history and the session's derived state."""
        self._run(self._core.clear)

    def _replace(self, messages: Iterable[MessageLike]) -> None:
        # clear() then add_messages() in one transaction (used by `aniki sessions import`).
        batch = stamp(to_messages(messages), keep=True)
        self._run(lambda: self._core.replace(batch))

    def fork(self, new_id: str, *, upto: str | None = None) -> PostgresSession:
        """A new session ``new_id`` in this store holding a copy of this history.

        The copy runs through the message whose id is ``upto`` (the whole history when
        ``None``) and keeps each message's id, time, model and usage; this session's derived
        state (meta) is copied too, except a reader's claim on making the next summary. The
        new session is opened as this one was (same DSN or pool, table and timeout) and goes
        its own way from there.

        One transaction, holding this session's row lock (as an append does): the copy is a
        prefix of the history as some moment left it, whatever other processes append at
        the same time, and the new session is whole or absent, even if the process dies
        midway.

        Raises:
            UserError: ``new_id`` is this session's id, session ``new_id`` already holds
                messages (a cleared session holds none and may be forked into; its old
                meta is replaced), or no message has the id ``upto`` (messages stored
                before ids existed have none). Nothing is written then.
        """
        target = fork_target(self.id, new_id)
        self._run(lambda: self._core.fork(target, upto))
        return self._sibling(target)

    def undo(self) -> tuple[Message, ...]:
        """Remove the last turn: the last user message and everything after it.

        Returns the messages removed, oldest first, or ``()`` (removing nothing) when the
        history holds no user message. One transaction, holding the session's row lock: an
        append from another process lands wholly before the undo or wholly after it. The
        session takes a new generation, as after :meth:`clear`, so every instance (in this
        process or another) reads the shortened history afresh. Derived state (meta) is
        kept: the policies check their stored cut and summary against the history and start
        afresh where these no longer fit.
        """
        return self._run(self._core.undo)

    def get_meta(self, key: str) -> Any:
        """The derived-state value stored under ``key`` (``None`` when absent)."""
        return self._run(lambda: self._core.get_meta(key), read=True)

    def set_meta(self, key: str, value: Any) -> None:
        """Store derived state (a JSON-safe value) beside the history; ``None`` deletes."""
        self._run(lambda: self._core.set_meta(key, value))

    def _swap_meta(self, key: str, expected: Any, value: Any) -> bool:
        """Set meta ``key`` to ``value`` only if it now holds ``expected``; whether it did.

        Atomic across processes (each try one statement). Values compare as JSON (same types
        and values, any key order); ``expected=None`` means the key is absent, ``value=None``
        deletes it.
        """
        return self._run(lambda: self._core.swap_meta(key, expected, value))

    def list_sessions(self) -> list[SessionInfo]:
        """Every session holding messages in this table, most recently updated first."""
        return self._run(self._core.list_sessions, read=True)

    def close(self) -> None:
        """Close this instance's connection (a passed ``pool=`` stays open)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> PostgresSession:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _run(self, make_flow: Callable[[], Flow[T]], *, read: bool = False) -> T:
        with self._lock:
            deadline = time.monotonic() + self._timeout
            self._broke_idle = self._timed_out = False
            try:
                try:
                    return self._attempt(make_flow(), deadline)
                except self._psycopg.errors.UndefinedTable:
                    # Dropped since this process created them: create them again, once.
                    self._core.mark_ready(False)
                    return self._attempt(make_flow(), deadline)
                except self._psycopg.OperationalError:
                    if not (read and self._broke_idle) or self._timed_out:
                        raise  # a write may have committed before the connection broke
                    # A read on a connection that died while idle (a server restart, a
                    # proxy's timeout) changed nothing: once more, on a fresh connection.
                    return self._attempt(make_flow(), deadline)
            except self._psycopg.Error as exc:
                raise self._error(exc) from exc

    def _attempt(self, flow: Flow[T], deadline: float) -> T:
        with self._connection(deadline) as conn:
            if not self._core.ready:
                drive(conn, self._core.setup())
                self._core.mark_ready(True)
            return drive(conn, flow)

    @contextmanager
    def _connection(self, deadline: float) -> Iterator[psycopg.Connection[Any]]:
        if self._pool is not None:
            with self._pool.connection(timeout=self._left(deadline)) as pooled:
                borrow = borrow_autocommit(pooled)
                if borrow:
                    pooled.autocommit = True
                try:
                    with self._alarm(pooled, deadline):
                        yield pooled
                except self._psycopg.OperationalError:
                    self._broke_idle = pooled.closed  # the pool drops it and lends another
                    raise
                finally:
                    if borrow and not pooled.closed:
                        with contextlib.suppress(self._psycopg.Error):
                            pooled.autocommit = False
            return
        reused = self._conn is not None and not self._conn.closed
        if self._conn is None or self._conn.closed:
            self._conn = self._psycopg.connect(
                self._dsn, autocommit=True, **self._connect_options(deadline)
            )
        conn = self._conn
        try:
            with self._alarm(conn, deadline):
                yield conn
        except self._psycopg.OperationalError:
            self._broke_idle = reused and conn.closed
            conn.close()  # broken or not: the next call starts from a fresh connection
            self._conn = None
            raise

    @contextmanager
    def _alarm(self, conn: psycopg.Connection[Any], deadline: float) -> Iterator[None]:
        """Run the block with ``conn`` cut at ``deadline``; a cut connection is closed."""
        entry: Alarm = arm(conn, deadline)
        try:
            yield
        finally:
            if disarm(entry):
                self._timed_out = True
                conn.close()  # its socket is shut: a pool must not lend it again
