"""RedisSession and AsyncRedisSession against the real Redis server: keys of another program,
newer or unreadable data, unreachable servers and refused credentials, passed clients, and
bad arguments to the constructors."""

from __future__ import annotations

import re
import sys
import uuid
from datetime import timedelta

import pytest
import redis as redis_module

from aniki import CorruptStoreError, Message, SchemaVersionError, StoreUnavailableError, UserError
from aniki.sessions._catalog import Listing
from aniki.sessions.redis import AsyncRedisSession, RedisSession
from aniki.sessions.redis import _core as _redis_core

from ..servers import redis_url, unique_name
from .redis_fixtures import client, keys_of, prefix, store
from .stores import Opener

__all__ = ["client", "prefix", "store"]  # fixtures, used by name

pytestmark = pytest.mark.redis


# --- faults -----------------------------------------------------------------------------


def test_keys_holding_foreign_data_raise_corrupt_store_and_stay_untouched(
    store: Opener, prefix: str, client: redis_module.Redis
) -> None:
    msgs, info, *_ = keys_of(prefix, "taken")
    client.set(msgs, b"not a list")
    session = store.open("taken")
    for method, args in [
        ("add_message", ({"role": "user", "content": "x"},)),
        ("get_messages", ()),
        ("clear", ()),
        ("set_meta", ("k", 1)),
    ]:
        with pytest.raises(CorruptStoreError, match="prefix"):
            store.call(session, method, *args)
    assert client.get(msgs) == b"not a list"
    assert not client.exists(info)


@pytest.mark.parametrize("taken", [0, 1, 3], ids=["msgs", "info", "batches"])
def test_an_append_over_any_foreign_key_writes_nothing(
    store: Opener, prefix: str, client: redis_module.Redis, taken: int
) -> None:
    session = store.open("mixed")
    store.add(session, "kept")
    keys = keys_of(prefix, "mixed")
    before = {key: client.dump(key) for key in keys}
    client.delete(keys[taken])
    client.set(keys[taken], b"foreign")
    before[keys[taken]] = client.dump(keys[taken])
    with pytest.raises(CorruptStoreError, match=re.escape(keys[taken].decode())):
        store.add(store.open("mixed"), "refused")
    assert {key: client.dump(key) for key in keys} == before


def test_a_newer_schema_is_refused_and_left_untouched(
    store: Opener, prefix: str, client: redis_module.Redis
) -> None:
    session = store.open("future")
    store.add(session, "kept")
    msgs, info, *_ = keys_of(prefix, "future")
    client.hset(info, "v", 99)
    before = client.lrange(msgs, 0, -1)
    assert len(before) == 1 and b'"content":"kept"' in before[0]
    fresh = store.open("future")
    for method, args in [
        ("get_messages", ()),
        ("add_message", ({"role": "user", "content": "x"},)),
        ("clear", ()),
        ("set_meta", ("k", 1)),
        ("get_meta", ("k",)),
    ]:
        with pytest.raises(SchemaVersionError, match="upgrade aniki"):
            store.call(fresh, method, *args)
    assert client.lrange(msgs, 0, -1) == before


def test_a_corrupt_record_raises_corrupt_store(
    store: Opener, prefix: str, client: redis_module.Redis
) -> None:
    session = store.open("bad")
    store.add(session, "fine")
    client.rpush(keys_of(prefix, "bad")[0], b"{not json")
    with pytest.raises(CorruptStoreError, match="cannot be read"):
        store.read(store.open("bad"))


def test_a_closed_port_raises_store_unavailable_with_the_password_hidden(store: Opener) -> None:
    session = store.open("x", url="redis://:s3cret-pw@127.0.0.1:1/0")
    with pytest.raises(StoreUnavailableError) as caught:
        store.add(session, "hi")
    text = str(caught.value)
    assert "cannot reach Redis" in text
    assert "s3cret-pw" not in text
    assert "redis://:***@127.0.0.1:1/0" in text
    assert isinstance(caught.value.__cause__, redis_module.ConnectionError)


def test_an_unknown_database_number_raises_store_unavailable(store: Opener) -> None:
    session = store.open("x", url=redis_url().rsplit("/", 1)[0] + "/12345")
    with pytest.raises(StoreUnavailableError, match="no database"):
        store.read(session)


def test_a_wrong_password_for_a_user_raises_store_unavailable(
    store: Opener, client: redis_module.Redis
) -> None:
    user = f"aniki-test-{uuid.uuid4().hex[:8]}"
    client.acl_setuser(
        user, enabled=True, passwords=["+right-password"], keys="*", commands=["+@all"]
    )
    try:
        host = redis_url().split("://", 1)[1]
        session = store.open("x", url=f"redis://{user}:wrong-password@{host}")
        with pytest.raises(StoreUnavailableError, match="refused the credentials") as caught:
            store.add(session, "hi")
        assert "wrong-password" not in str(caught.value)
        assert isinstance(caught.value.__cause__, redis_module.AuthenticationError)
        good = store.open("x", url=f"redis://{user}:right-password@{host}")
        store.add(good, "hi")
        assert store.read(good) == ["hi"]
    finally:
        client.acl_deluser(user)


def test_a_password_sent_to_a_server_without_one(store: Opener) -> None:
    # The default user of a Redis without a password accepts any password with the current
    # protocol (RESP3 HELLO); the legacy AUTH command refuses it, and that error is clear.
    host = redis_url().split("://", 1)[1]
    accepted = store.open("x", url=f"redis://:anything@{host}")
    store.add(accepted, "hi")
    assert store.read(accepted) == ["hi"]
    legacy = store.open("x", url=f"redis://:anything@{host}?protocol=2")
    with pytest.raises(StoreUnavailableError, match="refused the credentials") as caught:
        store.read(legacy)
    assert "anything" not in str(caught.value)


def test_an_invalid_url_is_refused_clearly() -> None:
    with pytest.raises(UserError, match=r"invalid Redis URL 'http://:\*\*\*@host'"):
        RedisSession("x", "http://:pw@host")


def test_a_missing_redis_package_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(UserError, match=r"pip install 'aniki-sdk\[redis\]'"):
        RedisSession("x")
    with pytest.raises(UserError, match=r"pip install 'aniki-sdk\[redis\]'"):
        AsyncRedisSession("x")


# --- clients ------------------------------------------------------------------------------


def test_a_passed_client_is_used_and_left_open(prefix: str) -> None:
    client = redis_module.Redis.from_url(redis_url(), decode_responses=True)
    try:
        with RedisSession("c", prefix=prefix, client=client) as session:
            session.add_message({"role": "user", "content": "h\u00e9"})
            session.set_meta("k", [1])
            assert [m.content for m in session.get_messages()] == ["h\u00e9"]
            assert session.get_meta("k") == [1]
            assert [i.id for i in session.list_sessions()] == ["c"]
            assert "127.0.0.1" in repr(session)
        assert client.ping()
    finally:
        client.close()


async def test_an_async_passed_client_is_used_and_left_open(prefix: str) -> None:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(redis_url())
    try:
        async with AsyncRedisSession("c", prefix=prefix, client=client) as session:
            await session.add_message({"role": "user", "content": "hi"})
            assert [m.content for m in await session.get_messages()] == ["hi"]
        assert await client.ping()
    finally:
        await client.aclose()


def test_the_upgrade_scan_pattern_escapes_glob_characters_of_the_prefix() -> None:
    # A listing scans nothing, but the one-time filing of a prefix the previous layout wrote.
    core = _redis_core.RedisCore("x", store="test", prefix="a*?[b]\\:", ttl=None)
    flow = core.list_sessions(Listing())
    step = next(flow)
    assert isinstance(step, _redis_core.Eval) and step.keys[0] == b"a*?[b]\\:catalog:all"
    step = flow.send([-6])  # the layout marker is absent: file the old sessions first
    assert isinstance(step, _redis_core.Pipeline)
    assert step.commands[0][3] == b"a\\*\\?\\[b\\]\\\\:{*}:info"


def test_an_append_resent_by_the_client_is_stored_once(
    prefix: str, client: redis_module.Redis
) -> None:
    # redis-py resends a command whose reply was lost (timeout, dropped connection).
    core = _redis_core.RedisCore("resent", store="test", prefix=prefix, ttl=None)
    other = RedisSession("resent", redis_url(), prefix=prefix)
    step = next(core.append([Message(role="user", content="once")]))
    assert isinstance(step, _redis_core.Eval)
    for _ in range(2):
        client.eval(step.script.source, len(step.keys), *step.keys, *step.args)
        other.add_message({"role": "user", "content": "from another writer"})
    assert [m.content for m in other.get_messages()] == [
        "once",
        "from another writer",
        "from another writer",
    ]
    other.close()


# --- bad input to the constructors --------------------------------------------------------


@pytest.mark.parametrize("cls", [RedisSession, AsyncRedisSession], ids=["sync", "async"])
@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"url": 123}, "url must be a Redis URL string"),
        ({"url": b"redis://localhost"}, "url must be a Redis URL string"),
        ({"url": "redis://:pw-9@[::1"}, "invalid Redis URL"),
        ({"url": "localhost:6379"}, "invalid Redis URL"),
        ({"ttl": float("inf")}, "ttl must be a positive, finite number"),
        ({"ttl": float("nan")}, "ttl must be a positive, finite number"),
        ({"ttl": -5}, "ttl must be a positive, finite number"),
        ({"ttl": 1e300}, "ttl must be a positive, finite number"),
        ({"ttl": timedelta(seconds=-1)}, "ttl must be a positive, finite number"),
        ({"timeout": -1}, "timeout must be"),
        ({"timeout": 0}, "timeout must be"),
        ({"timeout": float("nan")}, "timeout must be"),
        ({"timeout": float("inf")}, "timeout must be"),
        ({"timeout": "5"}, "timeout must be"),
        ({"timeout": True}, "timeout must be"),
        ({"prefix": 3}, "prefix must be a string"),
        ({"client": "redis://localhost"}, "client must be a redis"),
    ],
)
def test_bad_constructor_arguments_are_user_errors(
    cls: type, options: dict[str, object], words: str
) -> None:
    with pytest.raises(UserError, match=words) as info:
        cls("x", **options)
    assert "pw-9" not in str(info.value)
    assert info.value.__cause__ is None


def test_a_passed_client_takes_no_timeout() -> None:
    client = redis_module.Redis()
    with pytest.raises(UserError, match="socket_timeout"):
        RedisSession("x", client=client, timeout=3)
    with pytest.raises(UserError, match="client must be"):
        AsyncRedisSession("x", client=client)  # a sync client for the async class
    client.close()


def test_an_async_session_refuses_a_second_live_event_loop(prefix: str) -> None:
    import asyncio
    import threading

    session = AsyncRedisSession("loops", redis_url(), prefix=prefix)
    first = asyncio.new_event_loop()
    first.run_until_complete(session.add_message({"role": "user", "content": "one"}))
    errors: list[BaseException] = []

    def elsewhere() -> None:
        try:
            asyncio.run(session.get_messages())
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=elsewhere)
    worker.start()
    worker.join()
    assert len(errors) == 1 and isinstance(errors[0], UserError), errors
    assert "one AsyncRedisSession per event loop" in str(errors[0])
    # Once the first loop is closed, the next one takes over with a client of its own.
    first.run_until_complete(session._client.aclose())
    first.close()
    assert [m.content for m in asyncio.run(session.get_messages())] == ["one"]
    asyncio.run(session.aclose())


@pytest.mark.parametrize("cls", [RedisSession, AsyncRedisSession])
def test_an_unknown_url_option_is_refused_when_the_session_is_built(cls: type, prefix: str) -> None:
    """redis-py passes URL options on to its connections unchecked, which raised a raw
    TypeError on the first call; refused at construction, password hidden."""
    base = redis_url().replace("redis://", "redis://:Zq9secret@", 1)
    with pytest.raises(UserError, match=r"unknown option\(s\) \['bogus'\]") as info:
        cls("s", f"{base}?bogus=1")
    assert "Zq9" not in str(info.value) and ":***@" in str(info.value)
    kept = RedisSession("s", f"{redis_url()}?client_name=aniki-t&health_check_interval=5",
                        prefix=prefix)  # fmt: skip
    kept.add_message(Message("user", "hi"))
    assert [m.content for m in kept.get_messages()] == ["hi"]
    kept.close()


def test_opening_connections_reads_no_package_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    """redis-py 7+ reads its version from the installed package for every connection unless
    told it: 1-2 ms of parsing on the event loop per connection, 30 ms of loop lag for 50
    conversations starting together. aniki tells it once."""
    import asyncio
    import importlib.metadata

    prefix = unique_name("metadata") + ":"
    sessions = [AsyncRedisSession(f"s{n}", redis_url(), prefix=prefix) for n in range(5)]
    looked_up: list[str] = []
    real = importlib.metadata.version

    def version(name: str) -> str:
        looked_up.append(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)

    async def main() -> None:
        await asyncio.gather(*(session.get_messages() for session in sessions))
        for session in sessions:
            await session.aclose()

    asyncio.run(main())  # five clients, five connections opened
    assert looked_up == []
