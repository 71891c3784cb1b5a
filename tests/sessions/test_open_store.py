"""``open_store``: one pool or client per store, the same warm session per id, bounded,
closed as a whole; on every scheme, sync and async, against the real servers."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from aniki import Message, UserError
from aniki.sessions import AsyncSessionStore, SessionStore, open_session, open_store

from ..servers import postgres_dsn, redis_url

SCHEMES = ["memory", "sqlite", "file", "redis", "postgres"]


@pytest.fixture(params=SCHEMES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    scheme = request.param
    if scheme == "memory":
        return "memory:"
    if scheme == "sqlite":
        return f"sqlite:///{tmp_path / 'chats.db'}"
    if scheme == "file":
        return f"file://{tmp_path / 'chats'}"
    if scheme == "redis":
        return redis_url()
    return postgres_dsn()


@pytest.fixture
def ids() -> list[str]:
    """Session ids no other test uses (each test clears them on the shared servers)."""
    return [f"open-store-{uuid.uuid4().hex[:10]}-{n}" for n in range(3)]


def _clear(url: str, ids: list[str]) -> None:
    if url.startswith(("redis", "postgres")):
        with open_store(url) as store:
            for session_id in ids:
                store.session(session_id).clear()


def test_a_store_hands_out_one_warm_session_per_id(url: str, ids: list[str]) -> None:
    try:
        with open_store(url) as store:
            assert isinstance(store, SessionStore)
            first = store.session(ids[0])
            first.add_message(Message("user", "hi"))
            again = store.session(ids[0])
            assert again is first  # the same object: the history it read stays read
            assert again.get_messages() == (Message("user", "hi"),)
            store.session(ids[1]).add_messages([Message("user", "a"), Message("user", "b")])
            if not url.startswith("memory"):
                listed = {info.id: info.message_count for info in store.list_sessions()}
                assert listed[ids[0]] == 1 and listed[ids[1]] == 2
                # what another opener of the same store wrote is there
                assert len(open_session(url, ids[1]).get_messages()) == 2
        with pytest.raises(UserError, match="is closed"):
            store.session(ids[0])
        with pytest.raises(UserError, match="is closed"):
            store.list_sessions()
    finally:
        _clear(url, ids)


def test_an_async_store_hands_out_async_twins(url: str, ids: list[str]) -> None:
    async def main() -> None:
        async with open_store(url, asynchronous=True) as store:
            assert isinstance(store, AsyncSessionStore)
            session = store.session(ids[0])
            await session.add_message(Message("user", "hi"))
            assert store.session(ids[0]) is session
            tasks = [store.session(ids[1]).add_message(Message("user", str(n))) for n in range(20)]
            await asyncio.gather(*tasks)
            assert len(await store.session(ids[1]).get_messages()) == 20
            if not url.startswith("memory"):
                listed = {info.id: info.message_count for info in await store.list_sessions()}
                assert listed[ids[0]] == 1 and listed[ids[1]] == 20
        with pytest.raises(UserError, match="is closed"):
            store.session(ids[0])

    try:
        asyncio.run(main())
    finally:
        _clear(url, ids)


def test_a_handed_out_session_sees_what_another_process_appended(url: str, ids: list[str]) -> None:
    if url.startswith("memory"):
        pytest.skip("memory: sessions live inside one process")
    code = (
        "import sys; from aniki.sessions import open_store\n"
        "with open_store(sys.argv[1]) as store:\n"
        "    store.session(sys.argv[2]).add_message({'role': 'user', 'content': 'elsewhere'})\n"
    )
    try:
        with open_store(url) as store:
            session = store.session(ids[0])
            session.add_message(Message("user", "here"))
            assert len(session.get_messages()) == 1
            subprocess.run([sys.executable, "-c", code, url, ids[0]], check=True, timeout=60)
            assert [m.content for m in store.session(ids[0]).get_messages()] == [
                "here",
                "elsewhere",
            ]
    finally:
        _clear(url, ids)


def test_only_the_most_recently_used_sessions_are_kept(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'c.db'}", max_cached=2) as store:
        first = store.session("a")
        store.session("b")
        assert store.session("a") is first  # used again: now the most recent
        store.session("c")  # "b" is dropped
        assert store.session("a") is first
        second_b = store.session("b")
        second_b.add_message(Message("user", "x"))
        assert store.session("b") is second_b
        assert "2 sessions kept" in repr(store)
    with open_store("memory:", max_cached=1) as memory:  # memory keeps every session: its data
        memory.session("a").add_message(Message("user", "kept"))
        memory.session("b")
        assert memory.session("a").get_messages() == (Message("user", "kept"),)


def _redis_clients() -> int:
    import redis

    client = redis.Redis.from_url(redis_url())
    try:
        return int(client.info("clients")["connected_clients"])
    finally:
        client.close()


def test_two_hundred_redis_sessions_share_one_connection(ids: list[str]) -> None:
    before = _redis_clients()
    try:
        with open_store(redis_url()) as store:
            for n in range(200):
                store.session(f"{ids[0]}-{n % 5}").get_messages()
            store.session(ids[0]).add_message(Message("user", "hi"))
            during = _redis_clients()
        assert during - before <= 1, (before, during)
    finally:
        _clear(redis_url(), [f"{ids[0]}-{n}" for n in range(5)] + ids)


def _postgres_connections() -> int:
    import psycopg

    with psycopg.connect(postgres_dsn(), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        ).fetchone()
        assert row is not None
        return int(row[0]) - 1  # not this one


def test_two_hundred_postgres_sessions_share_one_pool(ids: list[str]) -> None:
    async def main() -> int:
        async with open_store(postgres_dsn(), asynchronous=True, max_connections=3) as store:
            await asyncio.gather(
                *(store.session(f"{ids[0]}-{n % 20}").get_messages() for n in range(200))
            )
            return _postgres_connections()

    before = _postgres_connections()
    try:
        during = asyncio.run(main())
        assert during - before <= 3, (before, during)
    finally:
        _clear(postgres_dsn(), [f"{ids[0]}-{n}" for n in range(20)])


def test_an_async_postgres_store_is_opened_before_use() -> None:
    store = open_store(postgres_dsn(), asynchronous=True)
    with pytest.raises(UserError, match="async with open_store"):
        store.session("x")

    async def main() -> None:
        await store.open()
        assert await store.session("open-store-never-written").get_messages() == ()
        await store.aclose()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"max_cached": 0}, "max_cached must be a whole number"),
        ({"max_cached": True}, "max_cached must be a whole number"),
        ({"max_connections": "3"}, "max_connections must be a whole number"),
    ],
)
def test_bad_settings_are_user_errors(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(UserError, match=words):
        open_store("memory:", **kwargs)


@pytest.mark.parametrize(
    "bad",
    [
        "postgresql://u:Zq9secret@[::1/db",
        "redis://:Zq9secret@127.0.0.1:6379/0?bogus=1",
        "sqlite://chats.db",
        "nosuch://x",
    ],
)
def test_a_bad_url_is_a_user_error_without_the_password(bad: str) -> None:
    for asynchronous in (False, True):
        with pytest.raises(UserError) as info:
            open_store(bad, asynchronous=asynchronous)
        assert "Zq9" not in str(info.value) and "Zq9" not in repr(info.value)


def _redis_bytes_sent() -> int:
    import redis

    client = redis.Redis.from_url(redis_url())
    try:
        return int(client.info("stats")["total_net_output_bytes"])
    finally:
        client.close()


def test_a_request_for_a_known_id_reads_only_what_is_new(ids: list[str]) -> None:
    """What the server sends for a request's read: a new session object per request reads
    the whole history; one the store hands out reads only the new messages."""
    history = [Message("user", f"message {n} " + "x" * 100) for n in range(2000)]
    try:
        with open_store(redis_url()) as store:
            store.session(ids[0]).add_messages(history)
            cold_start = _redis_bytes_sent()
            fresh = open_session(redis_url(), ids[0])  # a new object per request
            assert len(fresh.get_messages()) == 2000
            fresh.close()
            cold = _redis_bytes_sent() - cold_start
            warm: list[int] = []
            for turn in range(3):
                start = _redis_bytes_sent()
                session = store.session(ids[0])  # a new request
                session.add_message(Message("user", f"turn {turn}"))
                assert len(session.get_messages()) == 2001 + turn
                warm.append(_redis_bytes_sent() - start)
        assert max(warm) * 20 < cold, (cold, warm)
    finally:
        _clear(redis_url(), ids)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_store_passes_its_table_or_prefix_to_every_session(
    asynchronous: bool, ids: list[str]
) -> None:
    import psycopg
    import redis

    table = f"open_store_{uuid.uuid4().hex[:8]}"
    prefix = f"open-store-{uuid.uuid4().hex[:8]}:"

    async def write_async(url: str, **options: str) -> list[str]:
        async with open_store(url, asynchronous=True, **options) as store:
            await store.session(ids[0]).add_message(Message("user", "hi"))
            return [info.id for info in await store.list_sessions()]

    def write(url: str, **options: str) -> list[str]:
        if asynchronous:
            return asyncio.run(write_async(url, **options))
        with open_store(url, **options) as store:
            store.session(ids[0]).add_message(Message("user", "hi"))
            return [info.id for info in store.list_sessions()]

    try:
        assert write(postgres_dsn(), table=table) == [ids[0]]
        assert write(redis_url(), prefix=prefix) == [ids[0]]
        with psycopg.connect(postgres_dsn(), autocommit=True) as conn:
            row = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()
            assert row == (1,)
        client = redis.Redis.from_url(redis_url())
        assert client.keys(f"{prefix}*"), "nothing under the store's prefix"
    finally:
        with psycopg.connect(postgres_dsn(), autocommit=True) as conn:
            for suffix in ("", "_sessions", "_meta", "_schema"):
                conn.execute(f'DROP TABLE IF EXISTS "{table}{suffix}"')
        client = redis.Redis.from_url(redis_url())
        for key in client.scan_iter(f"{prefix}*"):
            client.delete(key)
        client.close()


@pytest.mark.parametrize(
    ("url", "options", "words"),
    [
        ("sqlite:///{tmp}/x.db", {"table": "t"}, "table= applies to a postgresql: store"),
        ("redis://127.0.0.1:6379/0", {"table": "t"}, "table= applies to a postgresql: store"),
        ("postgresql://u:pw9secret@127.0.0.1/db", {"prefix": "p:"}, "prefix= applies to a redis:"),
        ("postgresql://127.0.0.1/db", {"table": "no such; table"}, "invalid table name"),
    ],
)
def test_a_table_or_prefix_for_another_kind_of_store_is_refused(
    url: str, options: dict[str, str], words: str, tmp_path: Path
) -> None:
    with pytest.raises(UserError, match=words) as info:
        open_store(url.format(tmp=tmp_path), **options)  # type: ignore[arg-type]
    assert "pw9secret" not in str(info.value)
    assert not (tmp_path / "x.db").exists()
