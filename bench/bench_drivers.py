"""Benchmark what one round trip to a server costs the client, per driver.

Many conversations on one event loop spend the process's CPU mostly on their round trips to
the store (a turn makes two: the user's message with the history read after it, then the
reply). This measures that cost alone: ``tasks`` tasks on one loop share ``connections``
connections, and each makes ``trips`` round trips, one after another; the figure is the
process's CPU time (user and kernel; the kernel's share is the sockets' system calls) per
round trip, and the wall time of the batch.

- PostgreSQL: an ``INSERT`` of one row and a ``SELECT`` of the last 20 rows of a task's
  own, alternately, prepared, through psycopg with its ``AsyncConnectionPool`` (aniki's
  driver) and through asyncpg with its pool; and aniki's ``AsyncPostgresSession.add_message``
  through ``open_store`` (one statement).
- Redis: ``EVALSHA`` of a one-line script (``RPUSH``) through redis-py's
  ``execute_command``, and the same command written to a connection taken from the client's
  pool (``send_command``, ``read_response``: redis-py's own connection, without its command
  layer); and aniki's ``AsyncRedisSession.add_message`` (one script).

Needs the servers of the test suite (Redis 127.0.0.1:6379, PostgreSQL 127.0.0.1:5432
database ``test``); everything it writes is removed afterwards.
Run: ``python bench/bench_drivers.py`` (``--quick`` for a short run, ``--smoke`` for the
test suite's run that keeps the script working).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from _stores import POSTGRES_DSN, REDIS_URL

from aniki import Message
from aniki.sessions import open_store

Trip = Callable[[int, int], Awaitable[object]]
"""One round trip of task ``task``, its ``n``-th."""
SCALES = {"smoke": (20, 2), "quick": (200, 10), "full": (200, 30)}
"""Tasks, and round trips per task."""
CONNECTIONS = 20
BODY = '{"role":"user","content":"' + "Tell me about the weather, with details. " * 4 + '"}'


def _cpu() -> tuple[float, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


async def _measure(trip: Trip, tasks: int, trips: int) -> tuple[float, float, float]:
    """CPU µs per round trip (all, kernel) and the batch's wall time (ms)."""

    async def task(number: int) -> None:
        for n in range(trips):
            await trip(number, n)

    await asyncio.gather(*(trip(number, -1) for number in range(tasks)))  # connections open
    user, kernel = _cpu()
    start = time.perf_counter()
    await asyncio.gather(*(task(number) for number in range(tasks)))
    wall = time.perf_counter() - start
    user_after, kernel_after = _cpu()
    count = tasks * trips
    spent = (user_after - user) + (kernel_after - kernel)
    return spent / count * 1e6, (kernel_after - kernel) / count * 1e6, wall * 1e3


async def _postgres(tasks: int, trips: int) -> list[tuple[str, str, tuple[float, float, float]]]:
    import asyncpg
    from psycopg_pool import AsyncConnectionPool

    table = f"bench_drivers_{uuid.uuid4().hex[:8]}"
    insert = f"INSERT INTO {table} (task, body) VALUES ($1, $2)"
    select = f"SELECT body FROM {table} WHERE task = $1 ORDER BY seq DESC LIMIT 20"
    rows: list[tuple[str, str, tuple[float, float, float]]] = []
    setup = await asyncpg.connect(POSTGRES_DSN)
    await setup.execute(
        f"CREATE TABLE {table} (seq bigserial PRIMARY KEY, task int NOT NULL, body text)"
    )
    await setup.execute(f"CREATE INDEX ON {table} (task, seq)")
    try:
        async with AsyncConnectionPool(
            POSTGRES_DSN, min_size=CONNECTIONS, max_size=CONNECTIONS, open=False
        ) as pool:
            await pool.wait()
            psycopg_insert = insert.replace("$1", "%s").replace("$2", "%s")
            psycopg_select = select.replace("$1", "%s")

            async def psycopg_trip(task: int, n: int) -> object:
                async with pool.connection() as conn:
                    if n % 2:
                        cursor = await conn.execute(psycopg_select, (task,), prepare=True)
                        return await cursor.fetchall()
                    return await conn.execute(psycopg_insert, (task, BODY), prepare=True)

            rows.append(
                (
                    "postgres",
                    "psycopg, AsyncConnectionPool",
                    await _measure(psycopg_trip, tasks, trips),
                )
            )
        apool = await asyncpg.create_pool(POSTGRES_DSN, min_size=CONNECTIONS, max_size=CONNECTIONS)
        try:

            async def asyncpg_trip(task: int, n: int) -> object:
                async with apool.acquire() as conn:
                    if n % 2:
                        return await conn.fetch(select, task)
                    return await conn.execute(insert, task, BODY)

            rows.append(
                ("postgres", "asyncpg, its pool", await _measure(asyncpg_trip, tasks, trips))
            )
        finally:
            await apool.close()
        rows.append(
            (
                "postgres",
                "aniki, add_message",
                await _aniki(POSTGRES_DSN, {"table": table + "_aniki"}, tasks, trips),
            )
        )
    finally:
        for suffix in (
            "",
            "_aniki",
            "_aniki_sessions",
            "_aniki_meta",
            "_aniki_schema",
            "_aniki_blobs",
            "_aniki_blob_refs",
        ):
            await setup.execute(f'DROP TABLE IF EXISTS "{table}{suffix}" CASCADE')
        await setup.close()
    return rows


async def _redis(tasks: int, trips: int) -> list[tuple[str, str, tuple[float, float, float]]]:
    import redis.asyncio

    prefix = f"bench-drivers-{uuid.uuid4().hex[:8]}:"
    pool = redis.asyncio.BlockingConnectionPool.from_url(REDIS_URL, max_connections=CONNECTIONS)
    client = redis.asyncio.Redis(connection_pool=pool)
    sha = await client.script_load("return redis.call('RPUSH', KEYS[1], ARGV[1])")
    rows: list[tuple[str, str, tuple[float, float, float]]] = []
    try:

        async def command_trip(task: int, n: int) -> object:
            return await client.execute_command(
                "EVALSHA", sha, 1, f"{prefix}{task}", BODY, NEVER_DECODE=True
            )

        async def connection_trip(task: int, n: int) -> object:
            conn = await pool.get_connection()
            try:
                await conn.send_command("EVALSHA", sha, 1, f"{prefix}{task}", BODY)
                return await conn.read_response(disable_decoding=True)
            finally:
                await pool.release(conn)

        rows.append(
            ("redis", "redis-py, execute_command", await _measure(command_trip, tasks, trips))
        )
        rows.append(
            (
                "redis",
                "redis-py, a pooled connection",
                await _measure(connection_trip, tasks, trips),
            )
        )
        rows.append(
            (
                "redis",
                "aniki, add_message",
                await _aniki(REDIS_URL, {"prefix": prefix}, tasks, trips),
            )
        )
    finally:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
        for start in range(0, len(keys), 500):
            await client.delete(*keys[start : start + 500])
        await client.aclose()
    return rows


async def _aniki(
    url: str, options: dict[str, Any], tasks: int, trips: int
) -> tuple[float, float, float]:
    store = await open_store(url, asynchronous=True, max_connections=CONNECTIONS, **options).open()
    sessions = [store.session(f"task-{number}") for number in range(tasks)]
    try:
        message = Message("user", "Tell me about the weather, with details. " * 4)

        async def trip(task: int, n: int) -> object:
            return await sessions[task].add_message(message)

        return await _measure(trip, tasks, trips)
    finally:
        for session in sessions:
            await session.clear()
        await store.aclose()


async def main(scale: str) -> None:
    tasks, trips = SCALES[scale]
    print(f"{tasks} tasks on one event loop, {CONNECTIONS} connections, {trips} round trips each\n")
    print("| server | client | CPU per round trip (us) | of it in the kernel (us) | wall (ms) |")
    print("|---|---|---|---|---|")
    for server, client, (cpu, kernel, wall) in [
        *await _postgres(tasks, trips),
        *await _redis(tasks, trips),
    ]:
        print(f"| {server} | {client} | {cpu:.0f} | {kernel:.0f} | {wall:.0f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run")
    parser.add_argument("--smoke", action="store_true", help="the test suite's tiny run")
    arguments = parser.parse_args()
    asyncio.run(main("smoke" if arguments.smoke else "quick" if arguments.quick else "full"))
