"""How each scheme of :func:`~aniki.sessions.open_store` makes sessions on shared
resources (a client, a pool, a file's connection), lists them and closes them."""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

from ..errors import UserError
from ._codec import redact
from .base import SessionInfo

__all__ = ["Backend", "backend_for"]


class Backend:
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


def backend_for(
    url: str, *, asynchronous: bool, max_connections: int, options: dict[str, str]
) -> Backend:
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
    backend: Backend
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


class _MemoryBackend(Backend):
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


class _LocalBackend(Backend):
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


class _RedisBackend(Backend):
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


class _PostgresBackend(Backend):
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
