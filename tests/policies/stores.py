"""Every store the policies are tested over, opened the same way, sync or async."""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from aniki import Message, MessageLike
from aniki.messages import to_message
from aniki.sessions import InMemorySession
from tests.servers import (
    delete_redis_prefix,
    drop_postgres_tables,
    postgres_dsn,
    redis_url,
    unique_name,
)


async def resolve(value: Any) -> Any:
    """``await value`` when it is awaitable: drives sync and async sessions alike."""
    return await value if inspect.isawaitable(value) else value


class PlainSession:
    """Exactly the protocol's four members: no ``limit``, no ``add_messages``, no meta."""

    def __init__(self, id: str) -> None:
        self.id = id
        self._messages: list[Message] = []

    def add_message(self, message: MessageLike) -> None:
        self._messages.append(to_message(message))

    def get_messages(self) -> Sequence[Message]:
        return tuple(self._messages)

    def clear(self) -> None:
        self._messages.clear()


class AsyncMemorySession:
    """An async store over an in-memory one (limit and meta included)."""

    def __init__(self, id: str) -> None:
        self._inner = InMemorySession(id)

    @property
    def id(self) -> str:
        return self._inner.id

    async def add_message(self, message: MessageLike) -> None:
        self._inner.add_message(message)

    async def add_messages(self, messages: Sequence[MessageLike]) -> None:
        self._inner.add_messages(messages)

    async def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        return self._inner.get_messages(limit)

    async def clear(self) -> None:
        self._inner.clear()

    async def get_meta(self, key: str) -> Any:
        return self._inner.get_meta(key)

    async def set_meta(self, key: str, value: Any) -> None:
        self._inner.set_meta(key, value)


def _module(name: str) -> None:
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not in this build")


@dataclass
class Store:
    """Opens sessions of one kind; the same id opens the same history when ``persistent``."""

    kind: str
    opener: Callable[[str], Any]
    persistent: bool
    has_meta: bool
    cleanup: Callable[[], None] = lambda: None
    opened: list[Any] = field(default_factory=list)

    def open(self, id: str) -> Any:
        session = self.opener(id)
        self.opened.append(session)
        return session

    async def close(self) -> None:
        for session in self.opened:
            for name in ("aclose", "close"):
                closer = getattr(session, name, None)
                if closer is not None:
                    await resolve(closer())
                    break
        self.cleanup()


KINDS = [
    "memory",
    "async_memory",
    "plain",
    "sqlite",
    "async_sqlite",
    "file",
    "async_file",
    "redis",
    "async_redis",
    "postgres",
    "async_postgres",
]
"""Every kind of store, in the order the tests run over them."""


def make_store(kind: str, tmp_path: Path) -> Store:
    """The opener for ``kind``; skips (or fails in CI) when its server is not running."""
    if kind == "memory":
        return Store(kind, InMemorySession, persistent=False, has_meta=True)
    if kind == "async_memory":
        return Store(kind, AsyncMemorySession, persistent=False, has_meta=True)
    if kind == "plain":
        return Store(kind, PlainSession, persistent=False, has_meta=False)
    if kind in ("sqlite", "async_sqlite"):
        from aniki.sessions.sqlite import AsyncSQLiteSession, SQLiteSession

        db = tmp_path / "policies.db"
        lite = SQLiteSession if kind == "sqlite" else AsyncSQLiteSession
        return Store(kind, lambda id: lite(id, db), persistent=True, has_meta=True)
    if kind in ("file", "async_file"):
        _module("aniki.sessions.file")
        from aniki.sessions.file import AsyncFileSession, FileSession

        folder = tmp_path / "sessions"
        files = FileSession if kind == "file" else AsyncFileSession
        return Store(kind, lambda id: files(id, folder), persistent=True, has_meta=True)
    if kind in ("redis", "async_redis"):
        _module("redis")
        from aniki.sessions.redis import AsyncRedisSession, RedisSession

        url, prefix = redis_url(), unique_name("policies") + ":"
        cls = RedisSession if kind == "redis" else AsyncRedisSession
        return Store(
            kind,
            lambda id: cls(id, url, prefix=prefix),
            persistent=True,
            has_meta=True,
            cleanup=lambda: delete_redis_prefix(prefix),
        )
    if kind in ("postgres", "async_postgres"):
        _module("psycopg")
        from aniki.sessions.postgres import AsyncPostgresSession, PostgresSession

        dsn, table = postgres_dsn(), unique_name("policies")
        pg = PostgresSession if kind == "postgres" else AsyncPostgresSession
        return Store(
            kind,
            lambda id: pg(id, dsn, table=table),
            persistent=True,
            has_meta=True,
            cleanup=lambda: drop_postgres_tables(table),
        )
    raise AssertionError(kind)
