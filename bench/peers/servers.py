"""Connecting to the local Redis and PostgreSQL servers, and cleaning up after a run.

Only loopback addresses are ever used. A server that does not answer raises
:class:`ServerMissing` (a subclass of :class:`~peers.base.Unsupported`), which a workload
records as a note; the smoke test turns that note into a failure when ``CI=true``.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from .base import Unsupported

REDIS_URL = os.environ.get("ANIKI_BENCH_REDIS", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get("ANIKI_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
POOL_SIZE = 20
"""Connections one framework holds to a server (200 conversations share them)."""


class ServerMissing(Unsupported):
    """The server a store needs is not running (or its driver is not installed)."""


async def redis_client(url: str) -> Any:
    """A ``redis.asyncio`` client that has answered a PING."""
    try:
        import redis.asyncio as aioredis
    except ImportError as exc:
        raise ServerMissing("the redis package is not installed") from exc
    pool = aioredis.BlockingConnectionPool.from_url(
        url or REDIS_URL, max_connections=POOL_SIZE, timeout=30
    )
    client = aioredis.Redis(connection_pool=pool)
    try:
        # Open every connection now, as a running server would have them.
        await asyncio.gather(*(client.ping() for _ in range(POOL_SIZE)))
    except Exception as exc:
        await client.aclose()
        raise ServerMissing(f"Redis does not answer at {url or REDIS_URL}: {exc}") from exc
    return client


async def drop_redis_keys(client: Any, prefix: str) -> None:
    """Delete every key this run wrote (they all start with its namespace)."""
    batch = [key async for key in client.scan_iter(match=prefix + "*", count=1000)]
    for start in range(0, len(batch), 1000):
        await client.delete(*batch[start : start + 1000])


async def postgres_pool(dsn: str) -> Any:
    """An open ``psycopg_pool.AsyncConnectionPool`` of autocommit connections."""
    try:
        from psycopg_pool import AsyncConnectionPool
    except ImportError as exc:
        raise ServerMissing("psycopg_pool is not installed") from exc
    pool = AsyncConnectionPool(
        dsn or POSTGRES_DSN,
        min_size=POOL_SIZE,  # opened now, as a running server would have them
        max_size=POOL_SIZE,
        kwargs={"autocommit": True, "connect_timeout": 5},
        open=False,
    )
    try:
        await pool.open(wait=True, timeout=10)
    except Exception as exc:
        await pool.close()
        raise ServerMissing(f"PostgreSQL does not answer at {dsn or POSTGRES_DSN}: {exc}") from exc
    return pool


async def create_raw_table(pool: Any, table: str, *, by_session: bool = False) -> None:
    """The bare driver's table ``table`` (an identity key, the session, the JSON body); with
    ``by_session``, indexed for reading a session's rows in order."""
    async with pool.connection() as conn:
        await conn.execute(
            f'CREATE TABLE "{table}" (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,'
            " session_id text NOT NULL, body text NOT NULL)"
        )
        if by_session:
            await conn.execute(f'CREATE INDEX "{table}_by_session" ON "{table}" (session_id, id)')


async def drop_postgres_tables(pool: Any, stem: str) -> None:
    """Drop the tables whose names start with ``stem`` (this run's, and only its)."""
    async with pool.connection() as conn:
        rows = await (
            await conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                " AND starts_with(tablename, %s)",
                (stem,),
            )
        ).fetchall()
        for (name,) in rows:
            await conn.execute(f'DROP TABLE IF EXISTS "{name}" CASCADE')
