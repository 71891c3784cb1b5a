"""``AsyncPostgresSession``: :class:`~aniki.sessions.postgres.PostgresSession` for asyncio
code, on psycopg's async API; the same flows (``_core``, ``_edits``), driven by ``adrive``."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from ..._stamps import stamp, stamp_one
from ...messages import Message, MessageLike, to_message
from .._codec import check_limit, to_messages
from .._edits import fork_target
from ..base import SessionInfo
from ._base import DEFAULT_TABLE, PostgresBase
from ._core import DEFAULT_TIMEOUT, Flow
from ._drive import Alarm, adrive, arm, borrow_autocommit, disarm

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import AsyncConnectionPool

__all__ = ["AsyncPostgresSession"]

T = TypeVar("T")


class AsyncPostgresSession(PostgresBase):
    """:class:`PostgresSession` for asyncio code (psycopg's async API): the same methods, awaited.

    Example::

        session = AsyncPostgresSession("conversation-42", "postgresql://postgres@localhost/test")
        await session.add_message({"role": "user", "content": "Hi"})
        await session.get_messages()  # (Message(role='user', content='Hi', ...),)
        await session.aclose()

    Pass ``pool=`` a ``psycopg_pool.AsyncConnectionPool`` to share connections between many
    sessions (recommended for a server handling many conversations at once). ``timeout``
    bounds each call as in :class:`PostgresSession`.
    """

    _pool_class = "AsyncConnectionPool"

    def __init__(
        self,
        id: str,
        dsn: str | None = None,
        *,
        table: str = DEFAULT_TABLE,
        pool: AsyncConnectionPool[Any] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__(id, dsn, table, pool, timeout)
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._lock = asyncio.Lock()

    async def add_message(self, message: MessageLike) -> None:
        """Validate and append one message."""
        batch = [stamp_one(to_message(message))]
        await self._run(lambda: self._core.append(batch))

    async def add_messages(self, messages: Iterable[MessageLike]) -> None:
        """Validate all, then append all in one transaction."""
        batch = stamp(to_messages(messages))
        await self._run(lambda: self._core.append(batch))

    async def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        """The history, oldest first; with ``limit``, only the most recent ``limit``."""
        checked = check_limit(limit)
        return await self._run(lambda: self._core.read(checked), read=True)

    async def _add_then_get(
        self, messages: list[Message], limit: int | None = None
    ) -> tuple[Message, ...]:
        # add_messages then get_messages, usually in one statement (see aniki._run.session_io).
        checked, batch = check_limit(limit), stamp(messages)
        return await self._run(lambda: self._core.append_then_read(batch, checked))

    async def _add_after(
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
        return await self._run(lambda: self._core.append_after(batch, after, read, checked))

    async def clear(self) -> None:
        """Delete the history and the session's derived state."""
        await self._run(self._core.clear)

    async def _replace(self, messages: Iterable[MessageLike]) -> None:
        # clear() then add_messages() in one transaction (used by `aniki sessions import`).
        batch = stamp(to_messages(messages), keep=True)
        await self._run(lambda: self._core.replace(batch))

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

    async def get_meta(self, key: str) -> Any:
        """The derived-state value stored under ``key`` (``None`` when absent)."""
        return await self._run(lambda: self._core.get_meta(key), read=True)

    async def set_meta(self, key: str, value: Any) -> None:
        """Store derived state (a JSON-safe value) beside the history; ``None`` deletes."""
        await self._run(lambda: self._core.set_meta(key, value))

    async def _swap_meta(self, key: str, expected: Any, value: Any) -> bool:
        """As :meth:`PostgresSession._swap_meta`."""
        return await self._run(lambda: self._core.swap_meta(key, expected, value))

    async def list_sessions(self) -> list[SessionInfo]:
        """Every session holding messages in this table, most recently updated first."""
        return await self._run(self._core.list_sessions, read=True)

    async def aclose(self) -> None:
        """Close this instance's connection (a passed ``pool=`` stays open)."""
        async with self._lock:
            if self._conn is not None:
                await self._conn.close()
                self._conn = None

    async def __aenter__(self) -> AsyncPostgresSession:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _run(self, make_flow: Callable[[], Flow[T]], *, read: bool = False) -> T:
        async with self._lock:
            deadline = time.monotonic() + self._timeout
            self._broke_idle = self._timed_out = False
            try:
                try:
                    return await self._attempt(make_flow(), deadline)
                except self._psycopg.errors.UndefinedTable:
                    self._core.mark_ready(False)
                    return await self._attempt(make_flow(), deadline)
                except self._psycopg.OperationalError:
                    if not (read and self._broke_idle) or self._timed_out:
                        raise  # a write may have committed before the connection broke
                    # As PostgresSession._run says.
                    return await self._attempt(make_flow(), deadline)
            except self._psycopg.Error as exc:
                raise self._error(exc) from exc

    async def _attempt(self, flow: Flow[T], deadline: float) -> T:
        async with self._connection(deadline) as conn:
            if not self._core.ready:
                await adrive(conn, self._core.setup())
                self._core.mark_ready(True)
            return await adrive(conn, flow)

    @asynccontextmanager
    async def _connection(self, deadline: float) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if self._pool is not None:
            async with self._pool.connection(timeout=self._left(deadline)) as pooled:
                borrow = borrow_autocommit(pooled)
                if borrow:
                    await pooled.set_autocommit(True)
                try:
                    async with self._alarm(pooled, deadline):
                        yield pooled
                except self._psycopg.OperationalError:
                    self._broke_idle = pooled.closed  # the pool drops it and lends another
                    raise
                finally:
                    if borrow and not pooled.closed:
                        with contextlib.suppress(self._psycopg.Error):
                            await pooled.set_autocommit(False)
            return
        reused = self._conn is not None and not self._conn.closed
        if self._conn is None or self._conn.closed:
            self._conn = await self._psycopg.AsyncConnection.connect(
                self._dsn, autocommit=True, **self._connect_options(deadline)
            )
        conn = self._conn
        try:
            async with self._alarm(conn, deadline):
                yield conn
        except self._psycopg.OperationalError:
            self._broke_idle = reused and conn.closed
            await conn.close()
            self._conn = None
            raise

    @asynccontextmanager
    async def _alarm(
        self, conn: psycopg.AsyncConnection[Any], deadline: float
    ) -> AsyncIterator[None]:
        """As :meth:`PostgresSession._alarm`."""
        entry: Alarm = arm(conn, deadline)
        try:
            yield
        finally:
            if disarm(entry):
                self._timed_out = True
                await conn.close()
