"""Workload 5's ``raw`` column: the same conversations kept by a bare driver, no framework.

Each turn does what the least chat loop must: store the user's message, read the history
back (every record decoded from JSON, as a model request needs it), wait for the model, store
the reply. Nothing else: no agent, no request building, no ids, no usage. What it costs is
the floor a framework over the same store stands on, on this host: a target below it cannot
be met by any framework.

- memory: a list per conversation;
- sqlite: one ``sqlite3`` connection in WAL at the store's durability, called on the loop's
  thread (each statement is short), one row per message;
- redis: ``RPUSH`` and ``LRANGE`` on a ``redis.asyncio`` client with its pool;
- postgres: a pooled autocommit ``INSERT`` and ``SELECT`` (psycopg, the pool workload 2's
  bare driver uses).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from peers import REPLY, StoreSpec

Write = Callable[[str, str], Awaitable[None]]
Read = Callable[[str], Awaitable[list[Any]]]


def _record(role: str, text: str) -> str:
    return json.dumps({"role": role, "content": text}, separators=(",", ":"), ensure_ascii=False)


class BareChat:
    """One conversation over the bare driver's ``write`` and ``read``."""

    def __init__(self, conversation: str, write: Write, read: Read, delay: float) -> None:
        self.conversation = conversation
        self.write = write
        self.read = read
        self.delay = delay
        self.reply = _record("assistant", REPLY)

    async def turn(self, text: str) -> int:
        """One turn; how many history messages the model would have been sent."""
        await self.write(self.conversation, _record("user", text))
        history = await self.read(self.conversation)
        if self.delay:
            await asyncio.sleep(self.delay)
        await self.write(self.conversation, self.reply)
        return len(history)


@asynccontextmanager
async def _memory(store: StoreSpec) -> AsyncIterator[tuple[Write, Read]]:
    kept: dict[str, list[str]] = {}

    async def write(conversation: str, record: str) -> None:
        kept.setdefault(conversation, []).append(record)

    async def read(conversation: str) -> list[Any]:
        return [json.loads(record) for record in kept.get(conversation, ())]

    yield write, read


@asynccontextmanager
async def _sqlite(store: StoreSpec) -> AsyncIterator[tuple[Write, Read]]:
    conn = sqlite3.connect(store.location.replace(".db", "-raw.db"), isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={store.durability}")  # off, normal or full
    conn.execute(
        "CREATE TABLE IF NOT EXISTS raw (id INTEGER PRIMARY KEY, session_id TEXT, body TEXT)"
    )
    conn.execute("CREATE INDEX IF NOT EXISTS raw_by_session ON raw (session_id, id)")

    async def write(conversation: str, record: str) -> None:
        conn.execute("INSERT INTO raw (session_id, body) VALUES (?, ?)", (conversation, record))

    async def read(conversation: str) -> list[Any]:
        rows = conn.execute(
            "SELECT body FROM raw WHERE session_id = ? ORDER BY id", (conversation,)
        ).fetchall()
        return [json.loads(body) for (body,) in rows]

    try:
        yield write, read
    finally:
        conn.close()


@asynccontextmanager
async def _redis(store: StoreSpec) -> AsyncIterator[tuple[Write, Read]]:
    from peers import servers

    client = await servers.redis_client(store.location)
    prefix = f"{store.namespace}:raw:"

    async def write(conversation: str, record: str) -> None:
        await client.rpush(prefix + conversation, record)

    async def read(conversation: str) -> list[Any]:
        return [json.loads(record) for record in await client.lrange(prefix + conversation, 0, -1)]

    try:
        yield write, read
    finally:
        await servers.drop_redis_keys(client, prefix)
        await client.aclose()


@asynccontextmanager
async def _postgres(store: StoreSpec) -> AsyncIterator[tuple[Write, Read]]:
    from peers import servers

    pool = await servers.postgres_pool(store.location)
    table = f"{store.namespace}_raw"
    await servers.create_raw_table(pool, table, by_session=True)
    insert = f'INSERT INTO "{table}" (session_id, body) VALUES (%s, %s)'
    select = f'SELECT body FROM "{table}" WHERE session_id = %s ORDER BY id'

    async def write(conversation: str, record: str) -> None:
        async with pool.connection() as conn:
            await conn.execute(insert, (conversation, record))

    async def read(conversation: str) -> list[Any]:
        async with pool.connection() as conn:
            rows = await (await conn.execute(select, (conversation,))).fetchall()
        return [json.loads(body) for (body,) in rows]

    try:
        yield write, read
    finally:
        await servers.drop_postgres_tables(pool, table)
        await pool.close()


_DRIVERS = {"memory": _memory, "sqlite": _sqlite, "redis": _redis, "postgres": _postgres}


@asynccontextmanager
async def bare_chats(store: StoreSpec) -> AsyncIterator[Callable[[str, float], BareChat]]:
    """Make a :class:`BareChat` per conversation (``name``, model ``delay``) on ``store``'s
    bare driver, open until the block ends."""
    async with _DRIVERS[store.kind](store) as (write, read):

        def chat(conversation: str, delay: float) -> BareChat:
            return BareChat(conversation, write, read, delay)

        yield chat
