"""Benchmark the server-backed session stores: Redis and PostgreSQL, sync and async.

1. Append throughput: ``add_message`` (one atomic write each) beside the raw driver doing the
   least it could for the same data (Redis: one RPUSH; PostgreSQL: one INSERT and commit).
2. Per-turn cost of a long conversation: each turn appends 2 messages and reads the history
   with ``get_messages()``, as the Runner does. The cost of the read alone and of the whole turn
   near turn 1 and turn 1,000 shows whether a turn gets slower as the history grows.

Needs the servers of the test suite (Redis 127.0.0.1:6379, PostgreSQL 127.0.0.1:5432 database
``test``); every key and table it makes is removed afterwards.
Run: ``python bench/bench_servers.py`` (``--quick`` for a short run).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import redis

from aniki import Message
from aniki.sessions._codec import encode_message
from aniki.sessions.postgres import AsyncPostgresSession, PostgresSession
from aniki.sessions.redis import AsyncRedisSession, RedisSession

REDIS_URL = "redis://127.0.0.1:6379/0"
POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/test"
TAG = uuid.uuid4().hex[:8]
PREFIX = f"aniki-bench-{TAG}:"
TABLE = f"aniki_bench_{TAG}"


def _message(index: int) -> Message:
    return Message(role="user", content=f"message {index}: " + "lorem ipsum " * 8)


async def _call(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def _close(session: Any) -> None:
    closer = getattr(session, "aclose", None) or session.close
    await _call(closer())


async def appends(make: Callable[[str], Any], count: int) -> float:
    """Messages per second of ``add_message`` on a fresh session."""
    session = make(f"append-{uuid.uuid4().hex[:6]}")
    messages = [_message(i) for i in range(count)]
    await _call(session.add_message(messages[0]))  # connect and create tables first
    start = time.perf_counter()
    for message in messages[1:]:
        await _call(session.add_message(message))
    rate = (count - 1) / (time.perf_counter() - start)
    await _close(session)
    return rate


def raw_redis(count: int) -> float:
    client = redis.Redis.from_url(REDIS_URL)
    key, bodies = f"{PREFIX}raw", [encode_message(_message(i)) for i in range(count)]
    start = time.perf_counter()
    for body in bodies:
        client.rpush(key, body)
    rate = count / (time.perf_counter() - start)
    client.delete(key)
    client.close()
    return rate


def raw_postgres(count: int) -> float:
    bodies = [encode_message(_message(i)) for i in range(count)]
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        table = f"{TABLE}_raw"
        conn.execute(
            f'CREATE TABLE "{table}" (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,'
            " session_id text NOT NULL, message text NOT NULL)"
        )
        start = time.perf_counter()
        for body in bodies:
            with conn.transaction():
                conn.execute(
                    f'INSERT INTO "{table}" (session_id, message) VALUES (%s, %s)', ("raw", body)
                )
        rate = count / (time.perf_counter() - start)
        conn.execute(f'DROP TABLE "{table}"')
    return rate


async def per_turn(make: Callable[[str], Any], turns: int, marks: list[int]) -> dict[int, Any]:
    """Median microseconds of the read and of the whole turn around each mark."""
    session = make(f"turns-{uuid.uuid4().hex[:6]}")
    reads: list[float] = []
    totals: list[float] = []
    for turn in range(1, turns + 1):
        start = time.perf_counter()
        await _call(session.add_message(Message(role="user", content=f"question {turn}")))
        await _call(session.add_message(Message(role="assistant", content=f"answer {turn}")))
        before_read = time.perf_counter()
        history = await _call(session.get_messages())
        end = time.perf_counter()
        reads.append(end - before_read)
        totals.append(end - start)
        assert len(history) == 2 * turn
    cold = make(session.id)
    start = time.perf_counter()
    await _call(cold.get_messages())
    cold_us = (time.perf_counter() - start) * 1e6
    await _close(cold)
    await _call(session.clear())
    await _close(session)

    def around(costs: list[float], mark: int) -> float:
        return statistics.median(costs[max(0, mark - 6) : mark + 5]) * 1e6

    result: dict[int, Any] = {m: (around(reads, m), around(totals, m)) for m in marks}
    result[-1] = cold_us
    return result


def cleanup() -> None:
    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(match=f"{PREFIX}*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        for suffix in ("", "_sessions", "_meta", "_schema"):
            conn.execute(f'DROP TABLE IF EXISTS "{TABLE}{suffix}"')


async def best_of(runs: int, measure: Callable[[], Any]) -> float:
    """The best of ``runs`` measurements: the machine's other work only ever slows one down."""
    return max([await _call(measure()) for _ in range(runs)])


async def run(count: int, turns: int, runs: int) -> None:
    stores: dict[str, Callable[[str], Any]] = {
        "RedisSession": lambda i: RedisSession(i, REDIS_URL, prefix=PREFIX),
        "AsyncRedisSession": lambda i: AsyncRedisSession(i, REDIS_URL, prefix=PREFIX),
        "PostgresSession": lambda i: PostgresSession(i, POSTGRES_DSN, table=TABLE),
        "AsyncPostgresSession": lambda i: AsyncPostgresSession(i, POSTGRES_DSN, table=TABLE),
    }
    print(f"== append throughput (add_message, messages/s, best of {runs} x {count}) ==")
    print(f"{'raw redis-py RPUSH':<22} {await best_of(runs, lambda: raw_redis(count)):>9,.0f}")
    raw_pg = await best_of(runs, lambda: raw_postgres(count))
    print(f"{'raw psycopg INSERT':<22} {raw_pg:>9,.0f}  (one transaction each)")
    for name, make in stores.items():
        rate = await best_of(runs, lambda make=make: appends(make, count))
        print(f"{name:<22} {rate:>9,.0f}")

    marks = [1, 1000]
    print(f"\n== per-turn cost (median us; a turn = 2 appends + get_messages()), {turns} turns ==")
    for name, make in stores.items():
        costs = await per_turn(make, turns, [m for m in marks if m <= turns])
        shown = "   ".join(
            f"turn {mark:>4}: read {costs[mark][0]:6.0f}  turn {costs[mark][1]:6.0f}"
            for mark in marks
            if mark in costs
        )
        print(f"{name:<22} {shown}   (new instance reading all: {costs[-1]:,.0f} us)")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer messages, one run")
    args = parser.parse_args()
    count, runs = (300, 1) if args.quick else (2000, 3)
    try:
        asyncio.run(run(count, 1000, runs))
    finally:
        cleanup()


if __name__ == "__main__":
    main()
