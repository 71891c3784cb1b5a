"""``open_store``: one store per process, one pool or client, a session per request.

A web server opens the store once, at start-up, and asks it for the session of each request:
``store.session(id)`` makes no connection and hands out, for an id it handed out recently,
the same session object, so the history that object already read stays warm. A request
then costs what is new since the last one (another process's appends included: the stores
read past what they hold, as any kept session does), not the whole conversation.

What is shared, per scheme:

- ``redis://`` / ``rediss://``: one client for every session, with ``max_connections``
  connections at most.
- ``postgresql://``: one pool of ``max_connections`` connections at most (psycopg_pool's
  for the sync store; for the async one, a lighter pool of aniki's own, see
  ``postgres/_pool.py``).
- ``sqlite:///``: one connection per file and process, as every SQLite session has; the
  async twins' calls run on one worker thread per file.
- ``file:``: the directory's files, one lock each.
- ``memory:``: the sessions themselves (they live only in this store).

Memory stays bounded: the store keeps the ``max_cached`` sessions used most recently (and
with them their histories); an older one is dropped from the store and read again when asked
for. ``memory:`` keeps every session, as it is where they live.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from collections import OrderedDict
from types import TracebackType
from typing import Any, Literal, overload

from ..errors import UserError
from ._codec import check_session_id, redact
from .base import AsyncSession, Session, SessionInfo

__all__ = ["AsyncSessionStore", "SessionStore", "open_store"]

DEFAULT_MAX_CACHED = 1000
"""Sessions (with their histories) a store keeps by default: the most recently used."""

DEFAULT_MAX_CONNECTIONS = 10
"""Connections a ``postgresql:`` store's pool opens at most by default."""


@overload
def open_store(
    url: str,
    *,
    asynchronous: Literal[False] = False,
    max_cached: int = DEFAULT_MAX_CACHED,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    table: str | None = None,
    prefix: str | None = None,
) -> SessionStore: ...
@overload
def open_store(
    url: str,
    *,
    asynchronous: Literal[True],
    max_cached: int = DEFAULT_MAX_CACHED,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    table: str | None = None,
    prefix: str | None = None,
) -> AsyncSessionStore: ...
def open_store(
    url: str,
    *,
    asynchronous: bool = False,
    max_cached: int = DEFAULT_MAX_CACHED,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    table: str | None = None,
    prefix: str | None = None,
) -> SessionStore | AsyncSessionStore:
    """The store ``url`` names (the URLs of :func:`~aniki.sessions.open_session`), sharing
    one pool or client among the sessions it hands out.

    With ``asynchronous=True`` it hands out the async twins, whose calls never block the
    event loop; open it with ``async with`` (or ``await store.open()``).
    ``max_cached`` bounds the sessions kept warm; ``max_connections`` the connections of a
    ``postgresql:`` or ``redis:`` store (a call waits for one while all are in use, within
    the session's timeout). ``table`` (``postgresql:``) and ``prefix`` (``redis:``) are
    passed to every session, as to :class:`PostgresSession` and :class:`RedisSession`.
    Example::

        with open_store("sqlite:///chats.db") as store:
            store.session("user-42").add_message({"role": "user", "content": "Hi"})
            store.list_sessions()  # [SessionInfo(id='user-42', message_count=1, ...)]
    """
    if isinstance(max_cached, bool) or not isinstance(max_cached, int) or max_cached < 1:
        raise UserError(
            f"max_cached must be a whole number of sessions, 1 or more; got {max_cached!r}"
        )
    if (
        isinstance(max_connections, bool)
        or not isinstance(max_connections, int)
        or max_connections < 1
    ):
        raise UserError(
            f"max_connections must be a whole number, 1 or more; got {max_connections!r}"
        )
    options = {name: value for name, value in (("table", table), ("prefix", prefix)) if value}
    backend = _backend(
        url, asynchronous=asynchronous, max_connections=max_connections, options=options
    )
    if asynchronous:
        return AsyncSessionStore(url, backend, max_cached)
    return SessionStore(url, backend, max_cached)


class _Sessions:
    """The sessions a store handed out, by id: the ``limit`` used most recently."""

    def __init__(self, limit: int | None) -> None:
        self._limit = limit
        self._by_id: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session_id: str, make: Any) -> Any:
        with self._lock:
            found = self._by_id.get(session_id)
            if found is None:
                found = self._by_id[session_id] = make(session_id)
            self._by_id.move_to_end(session_id)
            if self._limit is not None and len(self._by_id) > self._limit:
                self._by_id.popitem(last=False)
            return found

    def __len__(self) -> int:
        return len(self._by_id)

    def clear(self) -> None:
        with self._lock:
            self._by_id.clear()


class _Store:
    """What the sync and async stores share: the URL, the backend, the handed-out sessions."""

    def __init__(self, url: str, backend: _Backend, max_cached: int) -> None:
        self._url = url
        self._backend = backend
        self._sessions = _Sessions(None if backend.keeps_data else max_cached)
        self._closed = False

    @property
    def url(self) -> str:
        """The store's URL, any password hidden."""
        return redact(self._url)

    def _session(self, session_id: str) -> Any:
        if self._closed:
            raise UserError(f"the store {self.url} is closed; open it again to use it")
        return self._sessions.get(check_session_id(session_id), self._backend.make)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._sessions)} sessions kept"
        return f"{type(self).__name__}({self.url!r}, {state})"


class SessionStore(_Store):
    """A store's sessions for synchronous code, sharing one pool or client
    (see :func:`open_store`)."""

    def session(self, id: str) -> Session:
        """The session ``id``: the one handed out before while it is kept, else a new one.
        Makes no connection."""
        session: Session = self._session(id)
        return session

    def list_sessions(self) -> list[SessionInfo]:
        """Every session holding messages: ids, message counts, last update."""
        if self._closed:
            raise UserError(f"the store {self.url} is closed; open it again to use it")
        return list(self._backend.list_sync())

    def close(self) -> None:
        """Close the pool or client; sessions handed out can no longer be used."""
        if not self._closed:
            self._closed = True
            self._sessions.clear()
            self._backend.close_sync()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncSessionStore(_Store):
    """A store's async sessions, sharing one pool or client (see :func:`open_store`). Use it
    from one event loop."""

    def session(self, id: str) -> AsyncSession:
        """The async session ``id``: the one handed out before while it is kept, else a new
        one. Makes no connection (a plain method: no ``await``)."""
        if not self._backend.opened:
            raise UserError(
                f"open the store {self.url} first: `async with open_store(url, "
                "asynchronous=True) as store:`, or `await store.open()`"
            )
        session: AsyncSession = self._session(id)
        return session

    async def open(self) -> AsyncSessionStore:
        """Open the pool (``postgresql:``); ``async with`` calls it. Idempotent."""
        if self._closed:
            raise UserError(f"the store {self.url} is closed; open it again to use it")
        await self._backend.open_async()
        return self

    async def list_sessions(self) -> list[SessionInfo]:
        """Every session holding messages: ids, message counts, last update."""
        if self._closed:
            raise UserError(f"the store {self.url} is closed; open it again to use it")
        await self.open()
        return list(await self._backend.list_async())

    async def aclose(self) -> None:
        """Close the pool or client; sessions handed out can no longer be used."""
        if not self._closed:
            self._closed = True
            self._sessions.clear()
            await self._backend.close_async()

    async def __aenter__(self) -> AsyncSessionStore:
        return await self.open()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


# --- per scheme ------------------------------------------------------------------------------


class _Backend:
    """How one scheme makes sessions on shared resources, lists them and closes them."""

    keeps_data = False
    opened = True
    options: dict[str, str]
    """Passed to every session made (``table=``, ``prefix=``)."""

    def make(self, session_id: str) -> Any:
        raise NotImplementedError

    def list_sync(self) -> list[SessionInfo]:
        raise NotImplementedError

    async def list_async(self) -> list[SessionInfo]:
        return await asyncio.to_thread(self.list_sync)

    async def open_async(self) -> None:
        return None

    def close_sync(self) -> None:
        return None

    async def close_async(self) -> None:
        self.close_sync()


def _backend(
    url: str, *, asynchronous: bool, max_connections: int, options: dict[str, str]
) -> _Backend:
    from .url import _check_remote, _local_store, _scheme

    scheme = _scheme(url)
    takes = {"redis": "prefix", "rediss": "prefix", "postgresql": "table", "postgres": "table"}
    for name in options:
        if takes.get(scheme) != name:
            kind = "redis:" if name == "prefix" else "postgresql:"
            raise UserError(f"{name}= applies to a {kind} store, not to {redact(url)!r}")
    if "table" in options:
        from .postgres._sql import check_table

        check_table(options["table"])  # now, not on the first session's first call
    backend: _Backend
    if scheme in ("redis", "rediss"):
        _check_remote(scheme, url)
        backend = _RedisBackend(url, asynchronous, max_connections)
    elif scheme in ("postgresql", "postgres"):
        _check_remote(scheme, url)
        backend = _PostgresBackend(url, asynchronous, max_connections)
    elif scheme == "memory":
        _local_store(scheme, url)  # checks the URL
        backend = _MemoryBackend(asynchronous)
    else:
        backend = _LocalBackend(_local_store(scheme, url), asynchronous)
    backend.options = options
    return backend


class _MemoryBackend(_Backend):
    keeps_data = True

    def __init__(self, asynchronous: bool) -> None:
        self._asynchronous = asynchronous

    def make(self, session_id: str) -> Any:
        from .memory import InMemorySession
        from .memory_async import AsyncInMemorySession

        if self._asynchronous:
            return AsyncInMemorySession(session_id)
        return InMemorySession(session_id)

    def list_sync(self) -> list[SessionInfo]:
        raise UserError("memory: sessions live inside one process and cannot be listed")


class _LocalBackend(_Backend):
    """SQLite and file stores: :class:`SQLiteStore` / :class:`FileStore` already share what
    there is to share (the connection per file, the locks)."""

    def __init__(self, local: Any, asynchronous: bool) -> None:
        self._local = local
        self._asynchronous = asynchronous

    def make(self, session_id: str) -> Any:
        session = self._local.session(session_id)
        if not self._asynchronous:
            return session
        from .url import _async_twin

        return _async_twin(session)

    def list_sync(self) -> list[SessionInfo]:
        return list(self._local.list_sessions())

    def close_sync(self) -> None:
        close = getattr(self._local, "close", None)
        if callable(close):
            close()


class _RedisBackend(_Backend):
    def __init__(self, url: str, asynchronous: bool, max_connections: int) -> None:
        from .redis import session as module
        from .redis._core import DEFAULT_TIMEOUT, check_url, import_redis

        redis = import_redis()
        check_url(url)
        self._asynchronous = asynchronous
        if asynchronous:
            import redis.asyncio as aioredis
            import redis.asyncio.retry

            self._client = module._client_from_url(
                url,
                aioredis,
                redis.asyncio.retry.Retry,
                DEFAULT_TIMEOUT,
                deadline=True,
                max_connections=max_connections,
            )
            self._class: Any = module.AsyncRedisSession
        else:
            self._client = module._client_from_url(
                url, redis, redis.retry.Retry, DEFAULT_TIMEOUT, max_connections=max_connections
            )
            self._class = module.RedisSession

    def make(self, session_id: str) -> Any:
        return self._class(session_id, client=self._client, **self.options)

    def list_sync(self) -> list[SessionInfo]:
        return list(self.make("aniki-list-sessions").list_sessions())

    async def list_async(self) -> list[SessionInfo]:
        return list(await self.make("aniki-list-sessions").list_sessions())

    def close_sync(self) -> None:
        self._client.close()

    async def close_async(self) -> None:
        await self._client.aclose()


class _PostgresBackend(_Backend):
    def __init__(self, url: str, asynchronous: bool, max_connections: int) -> None:
        from .postgres import session as module
        from .postgres._core import import_psycopg

        import_psycopg()
        try:
            pool_module = importlib.import_module("psycopg_pool")
        except ModuleNotFoundError as exc:
            raise UserError(
                f"a postgresql: store needs the {exc.name!r} package: "
                "pip install 'aniki-sdk[postgres]'"
            ) from None
        fixed = module._sets_connect_timeout(url, import_psycopg())  # a UserError for a bad DSN
        self._asynchronous = asynchronous
        if asynchronous:
            # Not psycopg_pool's: lending a connection cost it twice the statement's CPU.
            from .postgres._pool import AsyncConnections

            self._pool: Any = AsyncConnections(
                url, max_size=max_connections, connect_timeout=not fixed
            )
            self._class: Any = module.AsyncPostgresSession
            self.opened = False
        else:
            settings = {
                "min_size": 1,
                "max_size": max_connections,
                "open": False,
                "name": "aniki",
                "kwargs": {"autocommit": True},  # no switching it on and off per call
            }
            self._pool = pool_module.ConnectionPool(url, **settings)
            self._pool.open(wait=False)
            self._class = module.PostgresSession

    def make(self, session_id: str) -> Any:
        return self._class(session_id, pool=self._pool, **self.options)

    def list_sync(self) -> list[SessionInfo]:
        return list(self.make("aniki-list-sessions").list_sessions())

    async def list_async(self) -> list[SessionInfo]:
        return list(await self.make("aniki-list-sessions").list_sessions())

    async def open_async(self) -> None:
        self.opened = True  # its connections are made as the sessions need them

    def close_sync(self) -> None:
        self._pool.close()

    async def close_async(self) -> None:
        await self._pool.close()
