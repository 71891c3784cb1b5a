"""The connection pool of an asynchronous ``open_store("postgresql://...")``.

``psycopg_pool.AsyncConnectionPool`` spends about 110 µs of CPU lending and taking back a
connection when many tasks wait for one (measured: 200 tasks, 10 connections, ``SELECT 1``,
against 60 µs for the whole statement lent from a queue), which makes it the largest cost
of a turn on a busy server. aniki's sessions need far less than it offers: connections in
autocommit mode, made on demand up to a maximum, lent in the order they were asked for,
dropped when they break. This is that, over ``psycopg.AsyncConnection``.

A task waits at most the timeout it passes (``PoolTimeout`` then, as from psycopg_pool); a
connection that comes back broken, closed or inside a transaction is closed and its place
freed for a new one.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import math
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ..._aio import within, within_about

if TYPE_CHECKING:
    import psycopg

__all__ = ["AsyncConnections"]


class AsyncConnections:
    """Up to ``max_size`` autocommit connections to ``conninfo``, lent one task at a time."""

    def __init__(self, conninfo: str, *, max_size: int, connect_timeout: bool) -> None:
        """
        Args:
            conninfo: the DSN.
            max_size: the most connections open at once.
            connect_timeout: whether to bound connecting by the caller's timeout (``False``
                when the DSN sets its own ``connect_timeout``).
        """
        import psycopg
        import psycopg_pool

        self.conninfo = conninfo
        self.max_size = max_size
        self._psycopg = psycopg
        self._pool_timeout: type[Exception] = psycopg_pool.PoolTimeout
        self._idle_status = psycopg.pq.TransactionStatus.IDLE
        """A connection's status between transactions (read off ``pgconn``: ``conn.info``
        makes a new object on each use)."""
        self._connect_timeout = connect_timeout
        self._idle: list[psycopg.AsyncConnection[Any]] = []
        self._waiting: collections.deque[asyncio.Future[Any]] = collections.deque()
        self._count = 0  # open or being opened
        self._closed = False
        self._closing: set[asyncio.Task[None]] = set()  # kept until done (a task is weak)

    @contextlib.asynccontextmanager
    async def connection(self, timeout: float) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A connection for the block, waiting at most ``timeout`` seconds for one."""
        conn = await self.take(timeout)
        try:
            yield conn
        finally:
            self.give_back(conn)

    async def close(self) -> None:
        """Close the idle connections; those lent out close when they come back."""
        self._closed = True
        idle, self._idle = self._idle, []
        self._count -= len(idle)
        for waiter in self._waiting:
            if not waiter.done():
                waiter.set_exception(self._psycopg.OperationalError("the store was closed"))
        self._waiting.clear()
        for conn in idle:
            await conn.close()

    async def take(self, timeout: float) -> psycopg.AsyncConnection[Any]:
        """:meth:`connection` without the context manager, for a session's every call (each
        async context manager layer costs a call as much as a pooled lend does): a
        connection, waiting at most ``timeout`` seconds; hand it back with :meth:`give_back`."""
        if self._closed:
            raise self._psycopg.OperationalError("the store was closed")
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
            self._count -= 1
        if self._count >= self.max_size:
            slot = await self._wait(timeout)
            if slot is not None:
                return slot
        self._count += 1  # a place for a new connection: ours now
        try:
            return await self._connect(timeout)
        except BaseException:
            self._count -= 1
            self._hand_on(None)
            raise

    async def _wait(self, timeout: float) -> psycopg.AsyncConnection[Any] | None:
        """Wait in line for a connection given back (or ``None``: a place freed to connect)."""
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        try:
            return await within_about(timeout, waiter)
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._hand_on(waiter.result())  # handed one just as the wait ended: pass it on
            else:
                waiter.cancel()
            if isinstance(exc, asyncio.TimeoutError):
                raise self._pool_timeout(
                    f"no connection free within {timeout:.1f} s ({self.max_size} in use)"
                ) from None
            raise

    async def _connect(self, timeout: float) -> psycopg.AsyncConnection[Any]:
        """A new connection, within ``timeout`` (libpq's own ``connect_timeout`` counts whole
        seconds, at least 2, so the wait is cut here as well)."""
        options: dict[str, Any] = {"autocommit": True}
        if self._connect_timeout:
            options["connect_timeout"] = max(2, math.ceil(timeout))
        try:
            return await within(
                timeout, self._psycopg.AsyncConnection.connect(self.conninfo, **options)
            )
        except asyncio.TimeoutError:
            raise self._pool_timeout(f"could not connect within {timeout:.1f} s") from None

    def give_back(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Return a connection :meth:`take` lent (closed if it is broken, closed or in a
        transaction)."""
        if (
            self._closed
            or conn.closed
            or conn.pgconn.transaction_status != self._idle_status
            or not conn.autocommit
        ):
            self._count -= 1
            if not conn.closed:
                task = asyncio.get_running_loop().create_task(_close_quietly(conn))
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
            self._hand_on(None)
            return
        self._hand_on(conn)

    def _hand_on(self, conn: psycopg.AsyncConnection[Any] | None) -> None:
        """Give ``conn`` (or, with ``None``, a free place) to the first task waiting."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return
        if conn is not None:
            self._idle.append(conn)


async def _close_quietly(conn: psycopg.AsyncConnection[Any]) -> None:
    with contextlib.suppress(Exception):
        await conn.close()
