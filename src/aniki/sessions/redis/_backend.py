"""How ``redis://`` and ``rediss://`` URLs open (see :mod:`aniki.sessions.url`): sessions from
the URL, and a store whose sessions share one client."""

from __future__ import annotations

from .._backends import Backend, Shared
from .._server_backend import ServerBackend, ServerShared
from . import AsyncRedisSession, RedisSession
from ._client import DEFAULT_TIMEOUT, check_url, client_from_url, import_redis


class _Redis(ServerBackend):
    def shared(
        self, url: str, *, asynchronous: bool, max_connections: int, options: dict[str, str]
    ) -> Shared:
        redis = import_redis()
        check_url(url)
        if asynchronous:
            import redis.asyncio as aioredis
            import redis.asyncio.retry

            client = client_from_url(
                url,
                aioredis,
                redis.asyncio.retry.Retry,
                DEFAULT_TIMEOUT,
                deadline=True,
                max_connections=max_connections,
            )
            return _OneClient(AsyncRedisSession, options, "client", client)
        client = client_from_url(
            url, redis, redis.retry.Retry, DEFAULT_TIMEOUT, max_connections=max_connections
        )
        return _OneClient(RedisSession, options, "client", client)


class _OneClient(ServerShared):
    """Every session on one client, of ``max_connections`` connections at most."""

    async def close_async(self) -> None:
        from ._batch import close_batcher

        await close_batcher(self.resource)  # aniki's own connection beside the client's pool
        await self.resource.aclose()  # redis.asyncio's close() is deprecated


def _parse(url: str) -> object:
    """redis-py's own URL parser (``ImportError`` when redis-py is not installed)."""
    from redis.asyncio.connection import parse_url

    return parse_url(url)


BACKEND: Backend = _Redis("Redis", RedisSession, AsyncRedisSession, option="prefix", parse=_parse)
