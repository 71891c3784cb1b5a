"""``AsyncPostgresSession``: :class:`~aniki.sessions.postgres.PostgresSession` for asyncio
code, on psycopg's async API; the same flows (``_core``, ``_edits``), driven by ``adrive``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from ...messages import Message
from .._edits import fork_target
from .._flow_store import AsyncFlowSession
from ._base import PostgresBase
from ._core import Flow, PostgresCore
from ._drive import adrive, borrow_autocommit
from ._pool import AsyncConnections

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import AsyncConnectionPool

__all__ = ["AsyncPostgresSession"]

T = TypeVar("T")
_Pool: TypeAlias = "AsyncConnectionPool[Any]"


class AsyncPostgresSession(PostgresBase[_Pool], AsyncFlowSession[PostgresCore]):
    """:class:`PostgresSession` for asyncio code (psycopg's async API): the same methods, awaited.

    Pass ``pool=`` a ``psycopg_pool.AsyncConnectionPool`` to share connections between many
    sessions (recommended for a server handling many conversations at once), or a ``dsn``
    for a connection of the session's own. ``timeout`` bounds each call as in
    :class:`PostgresSession`.

    Example::

        dsn = "postgresql://postgres@localhost/test"
        async with AsyncConnectionPool(dsn, open=False) as pool:  # from psycopg_pool
            session = AsyncPostgresSession("conversation-42", pool=pool)
            await session.add_message({"role": "user", "content": "Hi"})
            await session.get_messages()  # (Message(role='user', content='Hi', ...),)
    """

    blocking = False  # awaited on the event loop
    _pool_class = "AsyncConnectionPool"
    _conn: psycopg.AsyncConnection[Any] | None = None
    """The connection this instance opened (without ``pool=``), once it has."""

    async def fork(self, new_id: str, *, upto: str | None = None) -> AsyncPostgresSession:
        """As :meth:`PostgresSession.fork`: a new session ``new_id`` (an
        :class:`AsyncPostgresSession` opened as this one was) holding a copy of this history
        through the message whose id is ``upto`` (all of it when ``None``) and of its meta but
        a summary claim; one transaction. :class:`~aniki.UserError` when ``new_id`` is this
        session's id or holds messages, or no message has the id ``upto``."""
        target = fork_target(self.id, new_id)
        await self._run(lambda: self._core.fork(target, upto))
        return self._sibling(target)

    async def undo(self) -> tuple[Message, ...]:
        """As :meth:`PostgresSession.undo`: remove the last turn (the last user message and
        all after it) in one transaction and return it, oldest first; ``()`` when there is no
        user message. Every instance of the session reads the shortened history afresh."""
        return await self._run(self._core.undo)

    async def aclose(self) -> None:
        """Close this instance's connection (a passed ``pool=`` stays open)."""
        async with self._lock:
            if self._conn is not None:
                await self._conn.close()
                self._conn = None

    async def _run(self, make: Callable[[], Flow[T]], *, read: bool = False) -> T:
        async with self._lock:
            deadline = self._start()
            try:
                try:
                    return await self._attempt(make(), deadline)
                except self._psycopg.Error as exc:
                    if not self._again(exc, read):
                        raise
                return await self._attempt(make(), deadline)
            except self._psycopg.Error as exc:
                raise self._error(exc) from exc

    async def _attempt(self, flow: Flow[T], deadline: float) -> T:
        # Written out, with no context manager of its own: this is every call of the
        # session, and each generator-made context manager cost as much as psycopg's send.
        lender = self._pool
        if isinstance(lender, AsyncConnections):  # an async open_store's: always autocommit
            conn = await lender.take(self._left(deadline))
            try:
                return await self._watched(conn, flow, deadline, reused=True)
            finally:
                lender.give_back(conn)
        if lender is None:
            return await self._attempt_own(flow, deadline)
        pooled = await lender.getconn(timeout=self._left(deadline))
        try:
            borrow = borrow_autocommit(pooled)
            if borrow:
                await pooled.set_autocommit(True)
            try:
                return await self._watched(pooled, flow, deadline, reused=True)
            finally:
                if borrow and not pooled.closed:
                    with contextlib.suppress(self._psycopg.Error):
                        await pooled.set_autocommit(False)
        finally:
            await lender.putconn(pooled)  # broken, the pool drops it and lends another

    async def _attempt_own(self, flow: Flow[T], deadline: float) -> T:
        """:meth:`_attempt` on this instance's connection, made when it has none open."""
        conn = self._conn
        reused = conn is not None and not conn.closed
        if conn is None or not reused:
            conn = self._conn = await self._psycopg.AsyncConnection.connect(
                self._dsn, **self._connect_options(deadline)
            )
        try:
            return await self._watched(conn, flow, deadline, reused=reused)
        except self._psycopg.OperationalError:
            await conn.close()  # broken or not: the next call starts from a fresh connection
            self._conn = None
            raise

    async def _watched(
        self, conn: psycopg.AsyncConnection[Any], flow: Flow[T], deadline: float, *, reused: bool
    ) -> T:
        """``flow`` run on ``conn`` cut at ``deadline`` (then closed: a pool must not lend it
        again); see :meth:`_watch`."""
        try:
            with self._watch(conn, deadline, reused=reused) as renew:
                if not self._core.ready:
                    await adrive(conn, self._core.setup())
                    self._core.mark_ready(True)
                return await adrive(conn, flow, renew)
        finally:
            if self._timed_out:
                await conn.close()

    def _new_lock(self) -> asyncio.Lock:
        return asyncio.Lock()
