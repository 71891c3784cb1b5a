"""``AsyncPostgresSession``: :class:`~aniki.sessions.postgres.PostgresSession` for asyncio
code, on psycopg's async API; the same flows (``_core``, ``_edits``), driven by ``adrive``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
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
        lender = self._pool
        if isinstance(lender, AsyncConnections):  # an async open_store's: lent directly
            return await self._attempt_lent(lender, flow, deadline)
        async with self._connection(deadline) as (conn, renew):
            return await self._drive(conn, flow, renew)

    async def _attempt_lent(self, lender: AsyncConnections, flow: Flow[T], deadline: float) -> T:
        """:meth:`_attempt` on a connection of aniki's own pool (always in autocommit mode),
        as :meth:`_connection` and :meth:`_lent` do it, written out: this is every call of
        a server's sessions."""
        conn = await lender.take(self._left(deadline))
        try:
            with self._watch(conn, deadline, reused=True) as renew:
                return await self._drive(conn, flow, renew)
        finally:
            if self._timed_out:
                await conn.close()
            lender.give_back(conn)

    async def _drive(
        self, conn: psycopg.AsyncConnection[Any], flow: Flow[T], renew: Callable[[], None]
    ) -> T:
        if not self._core.ready:
            await adrive(conn, self._core.setup())
            self._core.mark_ready(True)
        return await adrive(conn, flow, renew)

    @asynccontextmanager
    async def _connection(
        self, deadline: float
    ) -> AsyncIterator[tuple[psycopg.AsyncConnection[Any], Callable[[], None]]]:
        """As :meth:`PostgresSession._connection`."""
        reused = self._pool is not None or (self._conn is not None and not self._conn.closed)
        async with self._own(deadline) if self._pool is None else self._lent(deadline) as conn:
            try:
                with self._watch(conn, deadline, reused=reused) as renew:
                    yield conn, renew
            finally:
                if self._timed_out:
                    await conn.close()

    @asynccontextmanager
    async def _lent(self, deadline: float) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        assert self._pool is not None
        async with self._pool.connection(timeout=self._left(deadline)) as pooled:
            borrow = borrow_autocommit(pooled)
            if borrow:
                await pooled.set_autocommit(True)
            try:
                yield pooled
            finally:
                if borrow and not pooled.closed:
                    with contextlib.suppress(self._psycopg.Error):
                        await pooled.set_autocommit(False)

    @asynccontextmanager
    async def _own(self, deadline: float) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if self._conn is None or self._conn.closed:
            self._conn = await self._psycopg.AsyncConnection.connect(
                self._dsn, **self._connect_options(deadline)
            )
        conn = self._conn
        try:
            yield conn
        except self._psycopg.OperationalError:
            await conn.close()
            self._conn = None
            raise

    def _new_lock(self) -> asyncio.Lock:
        return asyncio.Lock()
