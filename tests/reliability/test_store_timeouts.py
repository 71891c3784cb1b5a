"""A server that hangs: every Redis and PostgreSQL call gives up within its ``timeout=`` and
raises ``StoreUnavailableError`` naming that setting; nothing acknowledged is lost.

A :class:`~tests.reliability.tcp_proxy.TcpProxy` in front of the shared server is frozen: it
keeps the connections open and accepts new ones, but forwards nothing (a hung server, or a
network that stopped delivering). The real servers are never stopped.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from aniki import Message, StoreUnavailableError
from aniki.sessions import (
    AsyncPostgresSession,
    AsyncRedisSession,
    PostgresSession,
    RedisSession,
)

from ..servers import postgres_dsn, redis_url
from ..sessions.stores import Opener
from .tcp_proxy import TcpProxy
from .test_store_faults import postgres_through, prefix, redis_through, table, target

__all__ = ["prefix", "table"]  # fixtures, used by name

SLACK = 1.5  # seconds a call may take beyond its timeout (thread and loop scheduling)
CONNECT = 2.0  # libpq counts connect_timeout in whole seconds, at least 2

Operation = Callable[[Opener, Any], Any]

OPERATIONS: dict[str, Operation] = {
    "get_messages": lambda o, s: o.read(s),
    "add_messages": lambda o, s: o.call(s, "add_messages", [Message(role="user", content="x")]),
    "get_meta": lambda o, s: o.call(s, "get_meta", "k"),
    "set_meta": lambda o, s: o.call(s, "set_meta", "k", 2),
    "clear": lambda o, s: o.call(s, "clear"),
    "_add_then_get": lambda o, s: o.call(
        s, "_add_then_get", [Message(role="user", content="y")], 5
    ),
    "list_sessions": lambda o, s: o.call(s, "list_sessions"),
}


def assert_gives_up(
    name: str, operation: Operation, opener: Opener, session: Any, bound: float
) -> None:
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError, match="timeout=") as info:
        operation(opener, session)
    elapsed = time.monotonic() - started
    assert elapsed < bound + SLACK, f"{name} gave up after {elapsed:.2f} s, bound {bound} s"
    assert info.value.__cause__ is not None


def hang_every_operation(opener: Opener, proxy: TcpProxy, timeout: float, connect: float) -> None:
    """Each operation on a connection that was working a moment before, then a read and a
    write on a fresh instance that must connect to the hung server (``connect``: the bound
    on connecting); the data stays intact throughout."""
    session = opener.open("s")
    opener.add(session, "kept")
    opener.call(session, "set_meta", "k", 1)
    for name, operation in OPERATIONS.items():
        proxy.thaw()
        opener.read(session)  # the connection is open and in use
        proxy.freeze()
        assert_gives_up(name, operation, opener, session, timeout)
    for name in ("get_messages", "add_messages"):
        assert_gives_up(name, OPERATIONS[name], opener, opener.open("s"), connect)
    proxy.thaw()
    # The calls that gave up were writes that may or may not have landed; what was there
    # before the first clear is gone only by that clear, and the same object works again.
    assert set(opener.read(session)) <= {"kept", "x", "y"}
    opener.add(session, "after")
    assert opener.read(session)[-1] == "after"


@pytest.fixture
def redis_proxy() -> Iterator[TcpProxy]:
    with TcpProxy(*target(redis_url(), 6379)) as proxy:
        yield proxy


@pytest.fixture
def postgres_proxy() -> Iterator[TcpProxy]:
    with TcpProxy(*target(postgres_dsn(), 5432)) as proxy:
        yield proxy


def class_id(cls: type) -> str:
    return "async" if cls.__name__.startswith("Async") else "sync"


@pytest.mark.redis
@pytest.mark.parametrize("cls", [RedisSession, AsyncRedisSession], ids=class_id)
def test_redis_calls_give_up_within_their_timeout(
    cls: type, prefix: str, redis_proxy: TcpProxy
) -> None:
    opener = Opener(cls, url=redis_through(redis_proxy), prefix=prefix, timeout=1.0)
    try:
        hang_every_operation(opener, redis_proxy, 1.0, 1.0)
    finally:
        redis_proxy.thaw()
        opener.close()


def postgres_url(proxy: TcpProxy) -> str:
    return postgres_through(proxy).split("?")[0]  # no connect_timeout: timeout= sets it


@pytest.mark.postgres
@pytest.mark.parametrize("cls", [PostgresSession, AsyncPostgresSession], ids=class_id)
def test_postgres_calls_give_up_within_their_timeout(
    cls: type, table: str, postgres_proxy: TcpProxy
) -> None:
    opener = Opener(cls, dsn=postgres_url(postgres_proxy), table=table, timeout=1.0)
    try:
        hang_every_operation(opener, postgres_proxy, 1.0, CONNECT)
    finally:
        postgres_proxy.thaw()
        opener.close()


@pytest.mark.postgres
def test_pooled_postgres_calls_give_up_within_their_timeout(
    table: str, postgres_proxy: TcpProxy
) -> None:
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(postgres_url(postgres_proxy), min_size=1, max_size=2, open=True)
    opener = Opener(PostgresSession, pool=pool, table=table, timeout=1.0)
    try:
        hang_every_operation(opener, postgres_proxy, 1.0, CONNECT)
    finally:
        postgres_proxy.thaw()
        opener.close()
        pool.close()


@pytest.mark.postgres
def test_async_pooled_postgres_calls_give_up_within_their_timeout(
    table: str, postgres_proxy: TcpProxy
) -> None:
    from psycopg_pool import AsyncConnectionPool

    opener = Opener(AsyncPostgresSession, table=table, timeout=1.0)
    pool = AsyncConnectionPool(postgres_url(postgres_proxy), min_size=1, max_size=2, open=False)
    opener.run(pool.open())
    opener.options["pool"] = pool
    try:
        hang_every_operation(opener, postgres_proxy, 1.0, CONNECT)
    finally:
        postgres_proxy.thaw()
        try:
            opener.run(pool.close())
        finally:
            opener.close()


@pytest.mark.postgres
def test_a_pool_with_no_free_connection_names_the_timeout(table: str) -> None:
    from psycopg_pool import ConnectionPool

    with ConnectionPool(postgres_dsn(), min_size=1, max_size=1, open=True) as pool:
        session = PostgresSession(str(uuid.uuid4()), pool=pool, table=table, timeout=1.0)
        session.get_messages()
        with pool.connection():  # the pool's only connection is taken
            started = time.monotonic()
            with pytest.raises(StoreUnavailableError, match="timeout="):
                session.get_messages()
            assert time.monotonic() - started < 1.0 + SLACK
