"""``PostgresSession``: sessions stored in PostgreSQL, for synchronous code (psycopg 3).

Needs the ``postgres`` extra: ``pip install 'aniki-sdk[postgres]'``. The statements and the
incremental-read cache are shared with :class:`AsyncPostgresSession` (``_async_session``) and
live in ``_core`` and ``_edits``, running them on a connection in ``_drive``; construction,
deadlines and errors in ``_base``. This module holds the connections.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from ...messages import Message
from .._edits import fork_target
from .._flow_store import SyncFlowSession
from .._pages import Page
from ._async_session import AsyncPostgresSession
from ._base import PostgresBase
from ._core import Flow, PostgresCore
from ._drive import borrow_autocommit, drive

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

__all__ = ["AsyncPostgresSession", "PostgresSession"]

T = TypeVar("T")
_Pool: TypeAlias = "ConnectionPool[Any]"


class PostgresSession(PostgresBase[_Pool], SyncFlowSession[PostgresCore]):
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
        session.set_info(title="Greetings", owner="user-7")  # what a list of chats shows
        session.list_sessions()  # [SessionInfo(id='conversation-42', message_count=0,
        #   title='Greetings', ...), SessionInfo(id='conversation-42b', message_count=1, ...)]
        branch.close()
        session.close()

    Each instance opens one connection when first used. To share connections between many
    sessions, pass ``pool=`` a ``psycopg_pool.ConnectionPool`` instead of ``dsn``.

    Each call gives up after ``timeout`` seconds (default 10: waiting for a pooled
    connection, connecting and every statement together) with
    :class:`~aniki.StoreUnavailableError`.
    """

    blocking = True  # its calls wait on I/O: the run engine makes them in a worker thread
    _pool_class = "ConnectionPool"
    _conn: psycopg.Connection[Any] | None = None
    """The connection this instance opened (without ``pool=``), once it has."""

    def _page(self, start: int, limit: int) -> Page:
        """Messages ``start`` to ``start + limit`` in one statement (see
        :func:`aniki.sessions._pages.read_page`); reads only those rows, caches nothing."""
        return self._run(lambda: self._core.page(start, limit), read=True)

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

    def close(self) -> None:
        """Close this instance's connection (a passed ``pool=`` stays open)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _run(self, make: Callable[[], Flow[T]], *, read: bool = False) -> T:
        with self._lock:
            deadline = self._start()
            try:
                try:
                    return self._attempt(make(), deadline)
                except self._psycopg.Error as exc:
                    if not self._again(exc, read):
                        raise
                return self._attempt(make(), deadline)
            except self._psycopg.Error as exc:
                raise self._error(exc) from exc

    def _attempt(self, flow: Flow[T], deadline: float) -> T:
        # Written out, with no context manager of its own: this is every call of the session.
        pool = self._pool
        if pool is None:
            return self._attempt_own(flow, deadline)
        pooled = pool.getconn(timeout=self._left(deadline))
        try:
            borrow = borrow_autocommit(pooled)  # in autocommit mode while this call holds it
            if borrow:
                pooled.autocommit = True
            try:
                return self._watched(pooled, flow, deadline, reused=True)
            finally:
                if borrow and not pooled.closed:
                    with contextlib.suppress(self._psycopg.Error):
                        pooled.autocommit = False
        finally:
            pool.putconn(pooled)  # broken, the pool drops it and lends another

    def _attempt_own(self, flow: Flow[T], deadline: float) -> T:
        """:meth:`_attempt` on this instance's connection, made when it has none open."""
        conn = self._conn
        reused = conn is not None and not conn.closed
        if conn is None or not reused:
            conn = self._conn = self._psycopg.connect(self._dsn, **self._connect_options(deadline))
        try:
            return self._watched(conn, flow, deadline, reused=reused)
        except self._psycopg.OperationalError:
            conn.close()  # broken or not: the next call starts from a fresh connection
            self._conn = None
            raise

    def _watched(
        self, conn: psycopg.Connection[Any], flow: Flow[T], deadline: float, *, reused: bool
    ) -> T:
        """``flow`` run on ``conn`` cut at ``deadline`` (then closed: a pool must not lend it
        again); see :meth:`_watch`."""
        try:
            with self._watch(conn, deadline, reused=reused) as renew:
                if not self._core.ready:
                    drive(conn, self._core.setup())
                    self._core.mark_ready(True)
                return drive(conn, flow, renew)
        finally:
            if self._timed_out:
                conn.close()

    def _new_lock(self) -> threading.Lock:
        return threading.Lock()
