"""aniki's own connection for the asyncio Redis sessions (``aniki.sessions.redis._wire``),
against the real server: one connection carries a burst of sessions, each getting its own
reply; a killed connection is opened again and nothing is written twice; a reply whose caller
gave up is dropped without shifting the next; the connection signs in and picks the database
as the client's own would; a client it cannot copy keeps redis-py; a client's reply timeout
bounds a call to a server that never answers; closing a store closes the connection."""

from __future__ import annotations

import asyncio
import gc
import uuid
from collections.abc import AsyncIterator

import pytest
import redis as redis_module
import redis.asyncio as aioredis
from redis.credentials import UsernamePasswordCredentialProvider

from aniki import Message
from aniki.errors import StoreUnavailableError
from aniki.sessions import open_store
from aniki.sessions.redis import AsyncRedisSession, _batch
from aniki.sessions.redis._wire import wire_settings

from ..servers import redis_url
from .redis_fixtures import client, prefix

__all__ = ["client", "prefix"]  # fixtures, used by name

pytestmark = pytest.mark.redis


@pytest.fixture
def name() -> str:
    """A client name no other test's connections carry."""
    return f"aniki-wire-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def named(name: str) -> AsyncIterator[aioredis.Redis]:
    """A client whose connections, aniki's included, carry ``name``."""
    made = aioredis.Redis.from_url(f"{redis_url()}?client_name={name}")
    yield made
    await _batch.close_batcher(made)
    await made.aclose()


def _connections(control: redis_module.Redis, name: str) -> list[dict[str, object]]:
    return [c for c in control.client_list() if c.get("name") == name]


async def _left(control: redis_module.Redis, name: str) -> list[dict[str, object]]:
    """The connections named ``name`` once the server has seen closed ones go (2 s at most)."""
    for _ in range(100):
        found = _connections(control, name)
        if not found:
            break
        await asyncio.sleep(0.02)
    return found


def _sessions(client: aioredis.Redis, prefix: str, count: int) -> list[AsyncRedisSession]:
    return [AsyncRedisSession(f"c{n}", client=client, prefix=prefix) for n in range(count)]


async def test_one_connection_carries_a_burst_and_each_session_gets_its_reply(
    named: aioredis.Redis, name: str, prefix: str, client: redis_module.Redis
) -> None:
    sessions = _sessions(named, prefix, 200)
    for turn in range(3):
        await asyncio.gather(*(s.add_message(Message("user", f"{s.id}:{turn}")) for s in sessions))
    assert len(_connections(client, name)) == 1  # not one per session, nor the pool's
    histories = await asyncio.gather(*(s.get_messages() for s in _sessions(named, prefix, 200)))
    for session, history in zip(sessions, histories, strict=True):
        assert [m.content for m in history] == [f"{session.id}:{t}" for t in range(3)]


async def test_a_killed_connection_is_opened_again_and_nothing_is_written_twice(
    named: aioredis.Redis, name: str, prefix: str, client: redis_module.Redis
) -> None:
    sessions = _sessions(named, prefix, 20)
    await asyncio.gather(*(s.add_message(Message("user", "before")) for s in sessions))
    (ours,) = _connections(client, name)
    client.client_kill_filter(_id=ours["id"])
    await asyncio.gather(*(s.add_message(Message("user", "after")) for s in sessions))
    (again,) = _connections(client, name)
    assert again["id"] != ours["id"]
    for session in _sessions(named, prefix, 20):
        assert [m.content for m in await session.get_messages()] == ["before", "after"]


async def test_a_reply_whose_caller_gave_up_is_dropped_and_the_next_keeps_its_own(
    named: aioredis.Redis, prefix: str
) -> None:
    batcher = _batch.batcher(named)
    await batcher.send("PING")  # the connection is open
    waiting = asyncio.create_task(batcher.send("BLPOP", f"{prefix}none", 0.3))
    await asyncio.sleep(0.05)
    waiting.cancel()  # its reply (none, after 0.3 s) still comes, first
    assert await batcher.send("ECHO", "mine") == b"mine"
    assert await batcher.send("ECHO", "next") == b"next"
    with pytest.raises(asyncio.CancelledError):
        await waiting


async def test_signs_in_and_picks_the_database_as_the_client_would(
    prefix: str, client: redis_module.Redis, name: str
) -> None:
    user = f"aniki-test-{uuid.uuid4().hex[:8]}"
    client.acl_setuser(user, enabled=True, passwords=["+s3cret-pw"], keys="*", commands=["+@all"])
    host = redis_url().split("://", 1)[1].split("/", 1)[0]
    other = redis_module.Redis.from_url(f"redis://{host}/7")
    try:
        session = AsyncRedisSession(
            "x", f"redis://{user}:s3cret-pw@{host}/7?client_name={name}", prefix=prefix
        )
        await session.add_message(Message("user", "hi"))
        (ours,) = _connections(client, name)
        assert ours["user"] == user and str(ours["db"]) == "7"
        assert other.exists(f"{prefix}{{x}}:msgs") and not client.exists(f"{prefix}{{x}}:msgs")
        await session.aclose()
        assert await _left(client, name) == []
        wrong = AsyncRedisSession("x", f"redis://{user}:wrong-pw@{host}/7", prefix=prefix)
        with pytest.raises(StoreUnavailableError, match="refused the credentials") as caught:
            await wrong.get_messages()
        assert "wrong-pw" not in str(caught.value) and "wrong-pw" not in repr(caught.value)
        await wrong.aclose()
    finally:
        for key in other.scan_iter(f"{prefix}*"):
            other.delete(key)
        other.close()
        client.acl_deluser(user)


def test_settings_it_cannot_copy_keep_redis_py() -> None:
    plain = wire_settings(aioredis.Redis.from_url("redis://u:pw@127.0.0.1:6390/3"))
    assert plain is not None and (plain.host, plain.port, plain.db) == ("127.0.0.1", 6390, 3)
    assert "pw" not in repr(plain)
    unix = wire_settings(aioredis.Redis.from_url("unix:///tmp/redis.sock?db=2"))
    assert unix is not None and (unix.host, unix.path, unix.db) == (None, "/tmp/redis.sock", 2)
    provider = UsernamePasswordCredentialProvider("u", "pw")
    for other in (
        aioredis.Redis.from_url("rediss://127.0.0.1:6390/0"),
        aioredis.Redis(credential_provider=provider),
        aioredis.Redis(encoding="latin-1"),
        object(),
    ):
        assert wire_settings(other) is None


async def test_a_passed_clients_reply_timeout_bounds_a_call_to_a_silent_server() -> None:
    accepted: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # reads nothing, answers nothing

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    mute = aioredis.Redis(host="127.0.0.1", port=port, socket_timeout=0.2)
    session = AsyncRedisSession("x", client=mute, prefix="aniki-test:")
    try:
        with pytest.raises(StoreUnavailableError, match="did not answer in time"):
            await asyncio.wait_for(session.add_message(Message("user", "hi")), 10)
        assert accepted  # it was our connection that waited
    finally:
        await _batch.close_batcher(mute)
        await mute.aclose()
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_a_call_whose_deadline_passed_in_silence_closes_the_connection() -> None:
    closed = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.read(65536):  # takes the commands, answers none
            pass
        closed.set()
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    session = AsyncRedisSession("x", f"redis://127.0.0.1:{port}/0", timeout=0.6)
    try:
        with pytest.raises(StoreUnavailableError, match="did not answer in time"):
            await session.add_message(Message("user", "hi"))
        # Nothing came back in 0.6 s: the connection is dropped, the next call opens another.
        await asyncio.wait_for(closed.wait(), 5)
    finally:
        await session.aclose()
        server.close()
        await server.wait_closed()


async def test_a_client_dropped_unclosed_takes_the_connection_with_it(
    name: str, prefix: str, client: redis_module.Redis
) -> None:
    dropped = aioredis.Redis.from_url(f"{redis_url()}?client_name={name}")
    session = AsyncRedisSession("x", client=dropped, prefix=prefix)
    await session.add_message(Message("user", "hi"))
    assert len(_connections(client, name)) == 1
    del session, dropped
    gc.collect()
    assert await _left(client, name) == []


async def test_closing_a_store_closes_the_connection(
    name: str, prefix: str, client: redis_module.Redis
) -> None:
    store = open_store(f"{redis_url()}?client_name={name}", asynchronous=True, prefix=prefix)
    await asyncio.gather(
        *(store.session(f"s{n}").add_message(Message("user", "hi")) for n in range(30))
    )
    assert len(_connections(client, name)) == 1
    await store.aclose()
    assert await _left(client, name) == []
