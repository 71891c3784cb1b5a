"""Sessions stored in PostgreSQL: ``PostgresSession`` and ``AsyncPostgresSession`` (psycopg 3).

Needs the ``postgres`` extra: ``pip install 'aniki-sdk[postgres]'``. The statements and the
incremental-read cache are shared by both classes and live in ``_postgres_core``, running them
on a connection in ``_postgres_drive``; this module holds the connections and the errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from ...errors import UserError
from ...messages import Message, MessageLike, stamp, stamp_one, to_message
from .._codec import check_limit, redact, to_messages
from ..base import SessionInfo
from ._core import (
    DEFAULT_TIMEOUT,
    Flow,
    PostgresCore,
    check_timeout,
    import_psycopg,
    translate,
)
from ._drive import Alarm, adrive, arm, borrow_autocommit, disarm, drive

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

__all__ = ["AsyncPostgresSession", "PostgresSession"]

T = TypeVar("T")
DEFAULT_TABLE = "aniki_messages"


class _Base:
    """Construction, deadlines and error handling shared by the sync and async classes.

    Every call has a deadline ``timeout`` seconds after it starts. Waiting for a pooled
    connection and connecting take at most the time left (connecting in whole seconds, at
    least 2: libpq's rule, unless the DSN sets ``connect_timeout``); the statements run
    under an alarm (see ``_postgres_drive``) that cuts the connection when the time is up.
    """

    _pool_class: str

    def __init__(self, id: str, dsn: object, table: str, pool: Any, timeout: object) -> None:
        self._psycopg = import_psycopg()
        if (dsn is None) == (pool is None):
            raise UserError(
                f"{type(self).__name__} needs a dsn (postgresql://user@host/db) or a pool=, "
                "not both"
            )
        if pool is not None:
            _check_pool(pool, self._pool_class)
        elif not isinstance(dsn, str):
            raise UserError(
                "dsn must be a string: a URL (postgresql://user:password@host:5432/db) or "
                f"key=value pairs (host=... dbname=...), got {type(dsn).__name__}"
            )
        self._timeout = check_timeout(timeout)
        conninfo: str = pool.conninfo if pool is not None else str(dsn)
        self._fixed_connect_timeout = _sets_connect_timeout(conninfo, self._psycopg)
        self._dsn = conninfo
        self._pool = pool
        self._broke_idle = False  # the last call's connection had died while idle
        self._timed_out = False  # the last call's deadline cut its connection
        store = f"{redact(conninfo)} (table {table!r})"
        self._core = PostgresCore(id, table=table, store=store, conninfo=conninfo)

    @property
    def id(self) -> str:
        """The conversation's id."""
        return self._core.id

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r}, store={self._core.store!r})"

    def _left(self, deadline: float) -> float:
        """Seconds left before ``deadline``; an ``OperationalError`` when none are."""
        left = deadline - time.monotonic()
        if left <= 0:
            self._timed_out = True
            raise self._psycopg.OperationalError("no time left for another attempt")
        return left

    def _connect_options(self, deadline: float) -> dict[str, Any]:
        left = self._left(deadline)
        return {} if self._fixed_connect_timeout else {"connect_timeout": max(2, math.ceil(left))}

    def _error(self, exc: Exception) -> Exception:
        return translate(
            exc,
            self._core.store,
            timeout=self._timeout,
            timed_out=self._timed_out,
            dsn_connect_timeout=self._fixed_connect_timeout,
        )


def _check_pool(pool: object, expected: str) -> None:
    if expected == "AsyncConnectionPool":
        from ._pool import AsyncConnections

        if isinstance(pool, AsyncConnections):  # an asynchronous open_store's
            return
    try:
        import psycopg_pool
    except ModuleNotFoundError as exc:
        raise UserError(
            f"pool= needs the {exc.name!r} package: pip install 'aniki-sdk[postgres]'"
        ) from exc
    if not isinstance(pool, getattr(psycopg_pool, expected)):
        raise UserError(
            f"pool must be a psycopg_pool.{expected} (or pass a dsn instead), got "
            f"{type(pool).__name__}"
        )


def _sets_connect_timeout(conninfo: str, psycopg: Any) -> bool:
    try:
        return "connect_timeout" in psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        pass  # raised below, outside this handler: the driver's error can quote the password
    raise UserError(
        f"invalid PostgreSQL DSN {redact(conninfo)!r}: expected a URL "
        "(postgresql://user:password@host:5432/db) or key=value pairs (host=... dbname=...)"
    )


class PostgresSession(_Base):
    """A conversation stored in PostgreSQL, shared by every instance and process using the id.

    The tables are created on first use if absent. Each write is one transaction: a batch is
    stored whole or not at all. Messages are ordered by an identity column, never by a clock.
    Reading the history again costs only the messages appended since this instance last read.

    Example::

        session = PostgresSession("conversation-42", "postgresql://postgres@localhost/test")
        session.add_message({"role": "user", "content": "Hi"})
        session.get_messages()  # (Message(role='user', content='Hi', ...),)
        session.list_sessions()  # [SessionInfo(id='conversation-42', message_count=1, ...)]
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

    def clear(self) -> None:
        """Delete the history and the session's derived state."""
        self._run(self._core.clear)

    def _replace(self, messages: Iterable[MessageLike]) -> None:
        # clear() then add_messages() in one transaction (used by `aniki sessions import`).
        batch = stamp(to_messages(messages), keep=True)
        self._run(lambda: self._core.replace(batch))

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


class AsyncPostgresSession(_Base):
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

    async def clear(self) -> None:
        """Delete the history and the session's derived state."""
        await self._run(self._core.clear)

    async def _replace(self, messages: Iterable[MessageLike]) -> None:
        # clear() then add_messages() in one transaction (used by `aniki sessions import`).
        batch = stamp(to_messages(messages), keep=True)
        await self._run(lambda: self._core.replace(batch))

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
