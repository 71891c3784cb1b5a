"""The connection pool of an asynchronous PostgreSQL ``open_store``, against the real server:
bounded, lent in turn, a bounded wait, nothing lent twice or lost when a wait is cancelled,
broken and mid-transaction connections replaced, closed as a whole."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import psycopg
import pytest
from psycopg_pool import PoolTimeout

from aniki import Message, StoreUnavailableError
from aniki.sessions import AsyncPostgresSession, PostgresSession, open_store
from aniki.sessions.postgres._pool import AsyncConnections

from ..servers import drop_postgres_tables, postgres_dsn, unique_name

pytestmark = pytest.mark.postgres


def _backends(tag: str) -> int:
    """Server connections whose application_name is ``tag``."""
    with psycopg.connect(postgres_dsn(), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (tag,)
        ).fetchone()
        assert row is not None
        return int(row[0])


def _closed(tag: str, within: float = 10.0) -> bool:
    """Whether the server has no connection tagged ``tag`` left, waiting up to ``within`` s: a
    client's Terminate ends its backend asynchronously, so ``pg_stat_activity`` can lag the
    close by a few milliseconds."""
    deadline = time.monotonic() + within
    while _backends(tag):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _tagged(tag: str) -> str:
    return f"{postgres_dsn()}?application_name={tag}"


@pytest.fixture
def tag() -> str:
    return f"aniki-pool-{uuid.uuid4().hex[:8]}"


async def _pid(conn: psycopg.AsyncConnection[Any]) -> int:
    cursor = await conn.execute("SELECT pg_backend_pid()")
    row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


def test_many_tasks_share_at_most_max_size_connections(tag: str) -> None:
    async def main() -> tuple[int, int]:
        pool = AsyncConnections(_tagged(tag), max_size=3, connect_timeout=True)
        busiest = 0

        async def use() -> None:
            nonlocal busiest
            async with pool.connection(10) as conn:
                await conn.execute("SELECT pg_sleep(0.01)")
                busiest = max(busiest, pool._count)

        await asyncio.gather(*(use() for _ in range(60)))
        during = await asyncio.to_thread(_backends, tag)
        await pool.close()
        return busiest, during

    busiest, during = asyncio.run(main())
    assert busiest == 3
    assert during == 3
    assert _closed(tag)  # closed with the pool


def test_a_wait_ends_after_its_timeout_and_the_connection_is_not_lost(tag: str) -> None:
    async def main() -> None:
        pool = AsyncConnections(_tagged(tag), max_size=1, connect_timeout=True)
        async with pool.connection(10) as held:
            first = await _pid(held)
            started = time.monotonic()
            with pytest.raises(PoolTimeout, match=r"no connection free within 0\.3 s"):
                async with pool.connection(0.3):
                    pass
            assert 0.25 < time.monotonic() - started < 2
            waiting = asyncio.ensure_future(pool.connection(10).__aenter__())
            await asyncio.sleep(0.05)
            waiting.cancel()  # a waiter that gives up: it must not take the connection along
            with pytest.raises(asyncio.CancelledError):
                await waiting
        async with pool.connection(0.5) as again:  # the one connection, lent again at once
            assert await _pid(again) == first
        await pool.close()

    asyncio.run(main())


def test_waiters_are_served_in_the_order_they_came(tag: str) -> None:
    async def main() -> list[int]:
        pool = AsyncConnections(_tagged(tag), max_size=1, connect_timeout=True)
        served: list[int] = []

        async def take(number: int) -> None:
            async with pool.connection(10):
                served.append(number)
                await asyncio.sleep(0.01)

        async with pool.connection(10):
            tasks = [asyncio.create_task(take(n)) for n in range(5)]
            await asyncio.sleep(0.05)
        await asyncio.gather(*tasks)
        await pool.close()
        return served

    assert asyncio.run(main()) == [0, 1, 2, 3, 4]


def test_a_connection_left_in_a_transaction_or_broken_is_replaced(tag: str) -> None:
    async def main() -> None:
        pool = AsyncConnections(_tagged(tag), max_size=1, connect_timeout=True)
        async with pool.connection(10) as conn:
            first = await _pid(conn)
            await conn.execute("BEGIN")
            await conn.execute("CREATE TEMP TABLE left_behind (x int)")
        async with pool.connection(10) as conn:
            second = await _pid(conn)
            assert second != first  # not the one whose transaction was left open
            assert await (await conn.execute("SELECT to_regclass('left_behind')")).fetchone() == (
                None,
            )
            await conn.close()  # broken in use: its place is freed, not lost
        async with pool.connection(10) as conn:
            assert await _pid(conn) not in (first, second)
        await pool.close()

    asyncio.run(main())
    assert _closed(tag)


def test_closing_wakes_the_waiters_with_an_error(tag: str) -> None:
    async def main() -> None:
        pool = AsyncConnections(_tagged(tag), max_size=1, connect_timeout=True)
        async with pool.connection(10):
            waiter = asyncio.ensure_future(pool.connection(10).__aenter__())
            await asyncio.sleep(0.05)
            await pool.close()
            with pytest.raises(psycopg.OperationalError, match="closed"):
                await waiter
        with pytest.raises(psycopg.OperationalError, match="closed"):
            async with pool.connection(1):
                pass

    asyncio.run(main())
    assert _closed(tag)


def test_sessions_of_a_store_read_on_after_the_server_ends_their_connection(tag: str) -> None:
    session_id = f"pool-{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        async with open_store(_tagged(tag), asynchronous=True, max_connections=1) as store:
            session = store.session(session_id)
            await session.add_message(Message("user", "kept"))
            with psycopg.connect(postgres_dsn(), autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE application_name = %s",
                    (tag,),
                )
            await asyncio.sleep(0.1)
            other = store.session(session_id + "-new")  # nothing cached: it must really read
            assert await other.get_messages() == ()
            assert await session.get_messages() == (Message("user", "kept"),)
            await session.clear()

    asyncio.run(main())


def test_a_full_pool_is_a_clear_store_error(tag: str) -> None:
    async def main() -> None:
        async with open_store(_tagged(tag), asynchronous=True, max_connections=1) as store:
            pool = store._shared.resource  # type: ignore[attr-defined]
            async with pool.connection(10):
                session = AsyncPostgresSession(
                    f"pool-{uuid.uuid4().hex[:8]}", pool=pool, timeout=0.3
                )
                started = time.monotonic()
                with pytest.raises(StoreUnavailableError, match="no pooled connection"):
                    await session.get_messages()
                assert time.monotonic() - started < 1.5

    asyncio.run(main())


def test_connecting_to_a_server_that_never_answers_ends_within_the_timeout() -> None:
    from urllib.parse import urlsplit

    from ..reliability.tcp_proxy import TcpProxy

    parts = urlsplit(postgres_dsn())
    with TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5432) as proxy:
        proxy.freeze()  # accepts the connection, forwards nothing: libpq waits for a reply
        user = parts.username or "postgres"
        dsn = f"postgresql://{user}@127.0.0.1:{proxy.port}{parts.path}"

        async def main() -> float:
            pool = AsyncConnections(dsn, max_size=1, connect_timeout=True)
            started = time.monotonic()
            with pytest.raises(PoolTimeout, match=r"could not connect within 0\.5 s"):
                async with pool.connection(0.5):
                    pass
            elapsed = time.monotonic() - started
            # The place the failed connection held was given back: this one tries to connect
            # too, rather than waiting for a connection that will never come back.
            with pytest.raises(PoolTimeout, match="could not connect"):
                async with pool.connection(0.3):
                    pass
            await pool.close()
            return elapsed

        # libpq alone would wait its whole connect_timeout (2 s at least)
        assert asyncio.run(main()) < 1.5


def _prepared(conn: psycopg.Connection[Any], table: str) -> list[str]:
    """The statements prepared on ``conn``'s server session that name ``table``."""
    rows = conn.execute(
        "SELECT statement FROM pg_prepared_statements WHERE statement LIKE %s", (f"%{table}%",)
    ).fetchall()
    return [str(statement) for (statement,) in rows]


def test_an_append_and_a_read_are_prepared_at_their_first_use_on_a_connection() -> None:
    from psycopg_pool import ConnectionPool

    table = unique_name("aniki_prepare")
    try:
        with ConnectionPool(postgres_dsn(), min_size=1, max_size=1, open=True) as pool:
            session = PostgresSession("s", table=table, pool=pool)
            session.add_message(Message(role="user", content="hi"))
            session.add_messages(
                [Message(role="assistant", content="a"), Message(role="user", content="b")]
            )
            fresh = PostgresSession("s", table=table, pool=pool)
            assert [m.content for m in fresh.get_messages()] == ["hi", "a", "b"]
            with pool.connection() as conn:
                prepared = _prepared(conn, table)
        # Each once, not after psycopg's default five uses: the single append, the batch
        # append and the read.
        assert sum("INSERT INTO" in text for text in prepared) == 2
        assert sum(text.startswith("SELECT s.generation") for text in prepared) == 1
    finally:
        drop_postgres_tables(table)


async def test_a_pool_that_turned_preparing_off_prepares_nothing() -> None:
    from psycopg_pool import AsyncConnectionPool

    table = unique_name("aniki_prepare")
    options = {"prepare_threshold": None}
    try:
        async with AsyncConnectionPool(
            postgres_dsn(), min_size=1, max_size=1, kwargs=options, open=False
        ) as pool:
            session = AsyncPostgresSession("s", table=table, pool=pool)
            for n in range(8):
                await session.add_message(Message(role="user", content=str(n)))
            fresh = AsyncPostgresSession("s", table=table, pool=pool)
            assert [m.content for m in await fresh.get_messages()] == [str(n) for n in range(8)]
            async with pool.connection() as conn:
                cursor = await conn.execute(
                    "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
                    (f"%{table}%",),
                )
                assert await cursor.fetchone() == (0,)
    finally:
        drop_postgres_tables(table)
