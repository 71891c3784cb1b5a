"""Where the test servers are: each helper returns the address, or skips when it is down.

Under CI (``CI=true``) a server that is down fails the test instead: CI must run every test.
Override the addresses with ``ANIKI_TEST_REDIS_URL`` / ``ANIKI_TEST_POSTGRES_DSN`` (loopback).
"""

from __future__ import annotations

import functools
import os
import uuid
from typing import NoReturn

import pytest

REDIS_URL = os.environ.get("ANIKI_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get(
    "ANIKI_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
)


def _unreachable(message: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} (CI=true: the servers must be running; .ci/run starts them)")
    pytest.skip(message)


@functools.cache
def _redis_problem() -> str | None:
    try:
        import redis

        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


@functools.cache
def _postgres_problem() -> str | None:
    try:
        import psycopg

        with psycopg.connect(POSTGRES_DSN, connect_timeout=2) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return f"{type(exc).__name__}: {' '.join(str(exc).split())}"
    return None


def redis_url() -> str:
    """The test Redis server's URL; skips (fails under CI) when it does not answer."""
    problem = _redis_problem()
    if problem:
        _unreachable(f"Redis is not reachable at {REDIS_URL}: {problem}")
    return REDIS_URL


def postgres_dsn() -> str:
    """The test PostgreSQL DSN; skips (fails under CI) when the server does not answer."""
    problem = _postgres_problem()
    if problem:
        _unreachable(f"PostgreSQL is not reachable at {POSTGRES_DSN}: {problem}")
    return POSTGRES_DSN


def unique_name(stem: str) -> str:
    """A name no other test (or test run) uses: for key prefixes and table names."""
    return f"{stem}_{uuid.uuid4().hex[:12]}"


def delete_redis_prefix(prefix: str) -> None:
    """Delete every key under ``prefix`` (glob characters in it are escaped)."""
    import redis

    if _redis_problem():
        return

    escaped = "".join("\\" + c if c in "*?[]\\" else c for c in prefix)
    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(match=escaped + "*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def drop_postgres_tables(table: str) -> None:
    """Drop the tables a PostgreSQL store named ``table`` creates."""
    import psycopg
    from psycopg import sql

    if _postgres_problem():
        return

    *schema, base = table.split(".")
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        for suffix in ("", "_sessions", "_meta", "_schema", "_blob_refs", "_blobs"):
            name = sql.Identifier(*schema, base + suffix)
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(name))
