"""Every store, opened the same way for the reliability tests, with a look at its raw data.

A :class:`Store` drives a sync or an async session class through plain calls (the sessions
tests' ``Opener``), knows how the store lists its sessions, can check that nothing was
written outside the store's own place, and can read the bytes the store really holds.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aniki import Message
from aniki.sessions import (
    AsyncFileSession,
    AsyncSQLiteSession,
    FileSession,
    FileStore,
    InMemorySession,
    SQLiteSession,
    SQLiteStore,
)
from aniki.sessions.redis._core import RedisCore

from ..servers import postgres_dsn, redis_url, unique_name
from ..sessions.stores import Opener

KINDS = [
    "memory",
    "sqlite",
    "sqlite-async",
    "file",
    "file-async",
    "redis-sync",
    "redis-async",
    "postgres-sync",
    "postgres-async",
]
FILE_NAME = re.compile(r"[a-z0-9_%~-]+\.(jsonl|meta\.json)\Z")


@dataclass
class Store:
    """One store under test, driven the same way whether it is sync or async."""

    kind: str
    opener: Opener
    examples: int
    """Hypothesis examples for this store (fewer for servers)."""
    raw: Callable[[], bytes]
    """Everything the store holds, as bytes (ciphertext where it should be)."""
    list_ids: Callable[[], set[str]] | None = None
    """The ids of the sessions holding messages, as the store lists them."""
    contained: Callable[[], None] = lambda: None
    """Fails if anything was written outside the store's own place."""
    cleanup: Callable[[], None] = lambda: None

    @property
    def shared(self) -> bool:
        return self.kind != "memory"

    def read(self, session: Any) -> list[Message]:
        return self.opener.driver.get_messages(session)

    def make(self, session_id: str) -> Any:
        """A new instance for ``session_id``; the caller closes it."""
        return self.opener.cls(session_id, **self.opener.options)

    @contextmanager
    def session(self, session_id: str) -> Iterator[Any]:
        """A new instance for ``session_id``, closed afterwards (servers allow few connections)."""
        made = self.make(session_id)
        try:
            yield made
        finally:
            self.opener.driver.release(made)

    def read_fresh(self, session_id: str) -> list[Message]:
        """The history as a new instance reads it."""
        with self.session(session_id) as fresh:
            return self.read(fresh)


def files_in(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file())


def only_files_under(root: Path, place: Path) -> None:
    """Nothing in ``root`` but ``place``, the directories leading to it, and files in it."""
    directories = {place, *(parent for parent in place.parents if root in parent.parents)}
    index = place / ".index"  # a file store's listing index, files and folders of its own
    for path in root.rglob("*"):
        if path == index or index in path.parents:
            continue
        if path.is_dir():
            assert path in directories, f"{path.relative_to(root)} is not the store's"
        else:
            assert path.parent == place, f"{path.relative_to(root)} is outside the store"


def make_store(kind: str, tmp_path: Path) -> Store:
    """The store ``kind`` (one of :data:`KINDS`), in ``tmp_path`` or under a fresh name."""
    if kind == "memory":
        opener = Opener(InMemorySession)

        def memory_raw() -> bytes:
            # The process is the store: what its sessions hold is what is "at rest".
            held = [opener.driver.get_messages(s) for s in opener._opened]
            return repr(held).encode("utf-8", "surrogatepass")

        return Store(kind, opener, examples=40, raw=memory_raw)
    if kind in ("sqlite", "sqlite-async"):
        path = tmp_path / "store.db"
        lite = SQLiteSession if kind == "sqlite" else AsyncSQLiteSession

        def sqlite_files() -> None:
            allowed = {"store.db", "store.db-wal", "store.db-shm"}
            assert {p.name for p in tmp_path.iterdir()} <= allowed

        return Store(
            kind,
            Opener(lite, path=path),
            examples=25,
            raw=lambda: files_in(tmp_path),
            list_ids=lambda: {info.id for info in SQLiteStore(path).list_sessions()},
            contained=sqlite_files,
        )
    if kind in ("file", "file-async"):
        files = FileSession if kind == "file" else AsyncFileSession
        # Deep inside tmp_path: an id that climbed out would land in tmp_path or above it.
        directory = tmp_path / "deep" / "down" / "sessions"

        def file_names() -> None:
            only_files_under(tmp_path, directory)
            for path in directory.iterdir():
                assert path.name == ".index" or FILE_NAME.match(path.name), path.name

        return Store(
            kind,
            Opener(files, directory=directory),
            examples=25,
            raw=lambda: files_in(tmp_path),
            list_ids=lambda: {info.id for info in FileStore(directory).list_sessions()},
            contained=file_names,
        )
    if kind.startswith("redis"):
        return _redis_store(kind)
    return _postgres_store(kind)


def _redis_store(kind: str) -> Store:
    import redis

    from aniki.sessions import AsyncRedisSession, RedisSession

    from ..servers import delete_redis_prefix

    prefix = unique_name("aniki-reliability") + ":"
    escaped = "".join("\\" + c if c in "*?[]\\" else c for c in prefix)
    cls = RedisSession if kind == "redis-sync" else AsyncRedisSession
    lister = RedisSession("any", redis_url(), prefix=prefix)
    client = redis.Redis.from_url(redis_url())

    def keys() -> set[bytes]:
        return set(client.scan_iter(match=escaped + "*", count=1000))

    def raw() -> bytes:
        data = []
        for key in sorted(keys()):
            kind_of = client.type(key)
            if kind_of == b"list":
                data += client.lrange(key, 0, -1)
            elif kind_of == b"hash":
                data += [k + v for k, v in client.hgetall(key).items()]
        return b"".join(data)

    def contained() -> None:
        ids = {info.id for info in lister.list_sessions()}
        allowed = {key for i in ids for key in RedisCore(i, store="", prefix=prefix, ttl=None).keys}
        allowed |= {f"{prefix}catalog:{name}".encode() for name in ("all", "layout")}  # the index
        assert keys() <= allowed

    def cleanup() -> None:
        lister.close()
        client.close()
        delete_redis_prefix(prefix)

    return Store(
        kind,
        Opener(cls, url=redis_url(), prefix=prefix),
        examples=8,
        raw=raw,
        list_ids=lambda: {info.id for info in lister.list_sessions()},
        contained=contained,
        cleanup=cleanup,
    )


def _postgres_store(kind: str) -> Store:
    import psycopg
    from psycopg import sql

    from aniki.sessions import AsyncPostgresSession, PostgresSession

    from ..servers import drop_postgres_tables

    table = unique_name("reliability")
    cls = PostgresSession if kind == "postgres-sync" else AsyncPostgresSession
    lister = PostgresSession("any", postgres_dsn(), table=table)

    def query(statement: sql.Composable, *args: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(postgres_dsn(), autocommit=True) as conn:
            return conn.execute(statement, args).fetchall()

    def raw() -> bytes:
        rows = query(sql.SQL("SELECT message FROM {}").format(sql.Identifier(table)))
        rows += query(sql.SQL("SELECT value FROM {}").format(sql.Identifier(table + "_meta")))
        return "".join(text for (text,) in rows).encode("utf-8")

    def contained() -> None:
        statement = sql.SQL("SELECT tablename FROM pg_tables WHERE tablename LIKE %s")
        names = {name for (name,) in query(statement, table + "%")}
        assert names == {
            table + s for s in ("", "_sessions", "_meta", "_schema", "_blobs", "_blob_refs")
        }

    def cleanup() -> None:
        lister.close()
        drop_postgres_tables(table)

    return Store(
        kind,
        Opener(cls, dsn=postgres_dsn(), table=table),
        examples=8,
        raw=raw,
        list_ids=lambda: {info.id for info in lister.list_sessions()},
        contained=contained,
        cleanup=cleanup,
    )


@contextmanager
def opened(kind: str, tmp_path: Path) -> Iterator[Store]:
    """:func:`make_store`, closed and cleaned up afterwards; skips when a server is down."""
    if kind.startswith("redis"):
        redis_url()
    if kind.startswith("postgres"):
        postgres_dsn()
    store = make_store(kind, tmp_path)
    try:
        yield store
    finally:
        try:
            store.opener.close()
        finally:
            store.cleanup()
