"""Workload 2: append throughput of each aniki store against a raw baseline.

Each measurement appends ``appends`` single messages, one durable write each, to a fresh
conversation. The ``raw`` column does the least work that stores the same message: encode a
dict to JSON and write it in one statement. For the local stores (SQLite, files) it is raw
``sqlite3`` in WAL at the same durability (``synchronous`` OFF / NORMAL / FULL), as the issue
sets the target; the file store also gets a row against a bare ``O_APPEND`` write (plus
``fsync`` at ``full``), which shows its own overhead. For Redis and PostgreSQL, whose
durability is the server's, it is the bare driver: ``RPUSH``, a pooled autocommit ``INSERT``.
openai-agents' own sessions are shown where it has one at that setting. Figures are appends
per second. The columns of a row take turns in chunks of 100 appends, so that a disk whose
fsync time swings (a shared machine) treats them alike; a measurement ends after ``appends``
appends per column or two seconds, whichever comes first.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import replace
from typing import Any

from peers import REPLY, USER_MESSAGE, StoreSpec, Unsupported

from workloads._common import Context, Section, median, ratio_at_least

NUMBER = 2
TITLE = "append throughput (appends/s)"

Append = Callable[[int], Awaitable[None]]
BUDGET = 2.0
"""Seconds one measurement (all columns) may take before it stops early."""
CHUNK = 100
"""Appends one column makes before the next column takes its turn."""
_SYNCHRONOUS = {"off": "OFF", "normal": "NORMAL", "full": "FULL"}
_DICTS = ({"role": "user", "content": USER_MESSAGE}, {"role": "assistant", "content": REPLY})


def _encode(i: int) -> str:
    return json.dumps(_DICTS[i % 2], separators=(",", ":"), ensure_ascii=False)


def stores(ctx: Context, repeat: int) -> list[StoreSpec]:
    """The stores measured, each at the durability levels it has (fresh ones per repeat)."""
    made = [
        ctx.store("sqlite", f"append-{d}-{repeat}", durability=d) for d in ("off", "normal", "full")
    ]
    made += [ctx.store("file", f"append-{d}-{repeat}", durability=d) for d in ("normal", "full")]
    return made + [ctx.store(kind, namespace_suffix=f"a{repeat}") for kind in ("redis", "postgres")]


@asynccontextmanager
async def _raw_sqlite(store: StoreSpec) -> Any:
    conn = sqlite3.connect(store.location, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={_SYNCHRONOUS[store.durability]}")
    conn.execute("CREATE TABLE raw (id INTEGER PRIMARY KEY, session_id TEXT, body TEXT)")

    async def append(i: int) -> None:
        conn.execute("INSERT INTO raw (session_id, body) VALUES (?, ?)", ("raw", _encode(i)))

    try:
        yield append
    finally:
        conn.close()


@asynccontextmanager
async def _raw_file(store: StoreSpec) -> Any:
    fd = os.open(os.path.join(store.location, "raw.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    full = store.durability == "full"

    async def append(i: int) -> None:
        os.write(fd, (_encode(i) + "\n").encode())
        if full:
            os.fsync(fd)

    try:
        yield append
    finally:
        os.close(fd)


@asynccontextmanager
async def _raw_redis(store: StoreSpec) -> Any:
    from peers import servers

    client = await servers.redis_client(store.location)
    key = f"{store.namespace}:raw"

    async def append(i: int) -> None:
        await client.rpush(key, _encode(i))

    try:
        yield append
    finally:
        await client.delete(key)
        await client.aclose()


@asynccontextmanager
async def _raw_postgres(store: StoreSpec) -> Any:
    from peers import servers

    pool = await servers.postgres_pool(store.location)
    table = f"{store.namespace}_raw"
    await servers.create_raw_table(pool, table)
    insert = f'INSERT INTO "{table}" (session_id, body) VALUES (%s, %s)'

    async def append(i: int) -> None:
        async with pool.connection() as conn:
            await conn.execute(insert, ("raw", _encode(i)))

    try:
        yield append
    finally:
        await servers.drop_postgres_tables(pool, table)
        await pool.close()


_RAW: dict[str, Callable[[StoreSpec], AbstractAsyncContextManager[Append]]] = {
    "sqlite": _raw_sqlite,
    "file": _raw_file,
    "redis": _raw_redis,
    "postgres": _raw_postgres,
}


def _own(store: StoreSpec, column: str) -> StoreSpec:
    """``store`` with a file or directory of the column's own (frameworks never share files)."""
    if store.kind == "sqlite":
        return replace(store, location=store.location.replace(".db", f"-{column}.db"))
    if store.kind == "file":
        location = os.path.join(store.location, column)
        os.makedirs(location, exist_ok=True)
        return replace(store, location=location)
    return store


async def _open(
    ctx: Context, stack: AsyncExitStack, store: StoreSpec, column: str, repeat: int
) -> Append:
    """The column's appender on its own copy of ``store``, closed with ``stack``."""
    store = _own(store, column)
    if column == "bare":  # the file store against a bare write
        return await stack.enter_async_context(_raw_file(store))
    if column == "raw":
        if store.kind == "file":
            store = replace(store, kind="sqlite", location=os.path.join(store.location, "raw.db"))
        return await stack.enter_async_context(_RAW[store.kind](store))
    peer = next(p for p in ctx.peers if p.name == column)
    if column == "openai-agents" and store.kind == "sqlite" and store.durability != "full":
        raise Unsupported("its SQLiteSession always commits with synchronous=FULL")
    backend = await stack.enter_async_context(peer.open(store))
    return backend.appender(f"append-{repeat}")


async def _rates(appenders: dict[str, Append], count: int) -> dict[str, float]:
    """Appends per second of each column. The columns take turns in chunks of :data:`CHUNK`,
    so a disk that slows down for a while slows every column alike; a measurement stops
    after ``count`` appends per column or :data:`BUDGET` seconds."""
    for append in appenders.values():
        await append(0)  # opens connections, creates tables: not part of the steady state
    spent = dict.fromkeys(appenders, 0.0)
    done = 0
    deadline = time.perf_counter() + BUDGET
    while done < count and (done == 0 or time.perf_counter() < deadline):
        chunk = min(CHUNK, count - done)
        for column, append in appenders.items():
            start = time.perf_counter()
            for i in range(done + 1, done + chunk + 1):
                await append(i)
            spent[column] += time.perf_counter() - start
        done += chunk
    return {column: done / seconds for column, seconds in spent.items()}


async def _measure(
    ctx: Context, section: Section, store: StoreSpec, repeat: int, skipped: set[tuple[str, str]]
) -> dict[str, float]:
    columns = [p.name for p in ctx.peers] + ["raw"] + (["bare"] if store.kind == "file" else [])
    async with AsyncExitStack() as stack:
        appenders: dict[str, Append] = {}
        for column in columns:
            if (store.label, column) in skipped:
                continue
            try:
                appenders[column] = await _open(ctx, stack, store, column, repeat)
            except Unsupported as exc:
                skipped.add((store.label, column))
                section.skip(column, exc, store.label)
                if column == "aniki":
                    return {}
        return await _rates(appenders, ctx.scale.appends)


async def run(ctx: Context) -> Section:
    section = Section(NUMBER, f"{TITLE}, up to {ctx.scale.appends} single-message appends")
    target = ratio_at_least("raw", 0.8, "aniki/raw >= 0.8")
    samples: dict[str, dict[str, list[float]]] = {}
    skipped: set[tuple[str, str]] = set()
    for repeat in range(ctx.scale.repeats):
        for store in stores(ctx, repeat):
            if (store.label, "aniki") in skipped:
                continue
            for column, rate in (await _measure(ctx, section, store, repeat, skipped)).items():
                samples.setdefault(store.label, {}).setdefault(column, []).append(rate)
    for label, by_column in samples.items():
        baseline = "raw sqlite3" if label.startswith(("sqlite", "file")) else "bare driver"
        row = section.row(f"{label} vs {baseline}", "/s", target)
        for column, values in by_column.items():
            if column != "bare":
                row.values[column] = median(values)
        if "bare" in by_column:
            bare = section.row(f"{label} vs a bare O_APPEND write", "/s")
            bare.values = {"aniki": row.values["aniki"], "raw": median(by_column["bare"])}
        ctx.log(f"  2: {label}: " + ", ".join(f"{k} {v:,.0f}" for k, v in row.values.items()))
    return section
