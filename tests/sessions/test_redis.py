"""RedisSession and AsyncRedisSession against the real Redis server (skipped when it is down;
under CI=true a test fails instead): the conformance suite, incremental reads, the ttl, ids
and prefixes. Faults, clients and constructor arguments are in test_redis_faults.py."""

from __future__ import annotations

import functools
import time
from datetime import datetime, timedelta, timezone

import pytest
import redis as redis_module

from aniki import UserError
from aniki.sessions import open_store
from aniki.sessions.redis import AsyncRedisSession, RedisSession
from aniki.sessions.redis import _attachments as _redis_attachments
from aniki.sessions.store import AsyncSessionStore, SessionStore
from aniki.testing.conformance import SessionConformance, SessionFactory

from ..servers import delete_redis_prefix, redis_url, unique_name
from .redis_fixtures import client, keys_of, prefix, store
from .stores import Opener, counting

__all__ = ["client", "prefix", "store"]  # fixtures, used by name

pytestmark = pytest.mark.redis


class TestRedisConformance(SessionConformance):
    assigns_ids = supports_fork_and_undo = supports_info = True
    session_class: type = RedisSession

    def setup_method(self, method: object) -> None:
        super().setup_method(method)
        self.prefix = unique_name("aniki-test") + ":"

    def teardown_method(self, method: object) -> None:
        try:
            super().teardown_method(method)
        finally:
            delete_redis_prefix(self.prefix)

    def session_factory(self) -> SessionFactory:
        return functools.partial(self.session_class, url=redis_url(), prefix=self.prefix)

    def store_factory(self) -> SessionStore | AsyncSessionStore:
        return open_store(redis_url(), prefix=self.prefix)


class TestAsyncRedisConformance(TestRedisConformance):
    session_class = AsyncRedisSession

    def store_factory(self) -> SessionStore | AsyncSessionStore:
        return open_store(redis_url(), asynchronous=True, prefix=self.prefix)


# --- incremental reads ----------------------------------------------------------------


def test_a_limited_read_on_a_fresh_instance_decodes_only_the_tail(
    store: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.add(store.open("s"), *[f"m{i}" for i in range(200)])
    decoded = counting(monkeypatch, _redis_attachments, "decode_message")
    reader = store.open("s")
    assert store.read(reader, limit=3) == ["m197", "m198", "m199"]
    assert len(decoded) == 3
    assert store.read(reader, limit=500) == [f"m{i}" for i in range(200)]
    assert len(store.read(reader)) == 200  # a full read still sees everything
    assert store.read(reader, limit=2) == ["m198", "m199"]


def test_a_cached_reader_decodes_only_new_messages(
    store: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader, writer = store.open("s"), store.open("s")
    store.add(writer, *[f"m{i}" for i in range(50)])
    assert len(store.read(reader)) == 50
    decoded = counting(monkeypatch, _redis_attachments, "decode_message")
    store.add(writer, "new 1", "new 2")
    assert store.read(reader)[-3:] == ["m49", "new 1", "new 2"]
    assert len(decoded) == 2
    assert store.read(reader, limit=1) == ["new 2"]
    assert len(decoded) == 2
    # The writer already holds what it wrote: reading it back decodes nothing.
    assert len(store.read(writer)) == 52
    assert len(decoded) == 2


def test_a_clear_and_refill_by_another_instance_replaces_the_cache(store: Opener) -> None:
    reader, writer = store.open("s"), store.open("s")
    store.add(writer, "a", "b", "c")
    assert store.read(reader) == ["a", "b", "c"]
    store.call(writer, "clear")
    store.add(writer, "x", "y", "z", "w")
    assert store.read(reader) == ["x", "y", "z", "w"]


def test_a_batch_larger_than_one_script_chunk_round_trips(store: Opener) -> None:
    session = store.open("big")
    batch = [{"role": "user", "content": f"{i}"} for i in range(2500)]
    store.call(session, "add_messages", batch)
    assert store.read(store.open("big")) == [str(i) for i in range(2500)]


# --- TTL --------------------------------------------------------------------------------


def test_ttl_applies_to_every_key_and_every_write_refreshes_it(
    store: Opener, prefix: str, client: redis_module.Redis
) -> None:
    session = store.open("t", ttl=timedelta(minutes=5))
    store.add(session, "hi")
    store.call(session, "set_meta", "summary", "short")
    keys = keys_of(prefix, "t")
    for key in keys:
        assert 0 < client.pttl(key) <= 300_000, key
        client.pexpire(key, 1_000)  # as if almost five minutes had passed
    store.add(session, "again")
    assert all(client.pttl(key) > 200_000 for key in keys)
    for key in keys:
        client.pexpire(key, 1_000)
    store.call(session, "set_meta", "summary", "longer")
    assert all(client.pttl(key) > 200_000 for key in keys)


def test_without_ttl_nothing_expires(
    store: Opener, prefix: str, client: redis_module.Redis
) -> None:
    session = store.open("t")
    store.add(session, "hi")
    store.call(session, "set_meta", "k", 1)
    assert [client.pttl(key) for key in keys_of(prefix, "t")] == [-1, -1, -1, -1]


def test_a_session_expires_after_its_ttl(store: Opener) -> None:
    session = store.open("short", ttl=0.2)
    store.add(session, "gone soon")
    store.call(session, "set_meta", "summary", "gone too")
    assert store.read(session) == ["gone soon"]
    time.sleep(0.5)
    fresh = store.open("short")
    assert store.read(fresh) == []
    assert store.read(session) == []  # the cached reader notices too
    assert store.call(fresh, "get_meta", "summary") is None
    assert store.call(fresh, "list_sessions") == []


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), "60", True])
def test_a_bad_ttl_is_refused(ttl: object) -> None:
    with pytest.raises(UserError, match="ttl"):
        RedisSession("x", ttl=ttl)  # type: ignore[arg-type]


# --- ids, prefixes, listing -------------------------------------------------------------

HOSTILE = ["*", "?", "[", "[a-z]", "a*", "\\", "../../x", "'; DROP TABLE x; --", "{}", "}:info"]


def test_glob_and_brace_ids_stay_apart_and_list_exactly(store: Opener) -> None:
    ids = ["a", "ab", "b", *HOSTILE]
    for index, session_id in enumerate(ids):
        store.add(store.open(session_id), *[f"{session_id}#{n}" for n in range(index % 3 + 1)])
    store.call(store.open("*"), "clear")
    store.call(store.open("?"), "clear")
    for index, session_id in enumerate(ids):
        expected = (
            [] if session_id in ("*", "?") else [f"{session_id}#{n}" for n in range(index % 3 + 1)]
        )
        assert store.read(store.open(session_id)) == expected, session_id
    listed = store.call(store.open("any"), "list_sessions")
    counts = {info.id: info.message_count for info in listed}
    assert counts == {
        session_id: index % 3 + 1
        for index, session_id in enumerate(ids)
        if session_id not in ("*", "?")
    }


def test_nul_and_very_long_ids_are_refused_clearly(store: Opener) -> None:
    for bad in ["nul\x00id", "x" * 10_000, ""]:
        with pytest.raises(UserError, match="session id"):
            store.open(bad)


def test_a_prefix_with_glob_characters_lists_only_its_own_sessions(
    store: Opener, prefix: str
) -> None:
    glob_prefix, other_prefix = prefix + "\u00e9*:", prefix + "\u00e9x:"
    try:
        store.add(store.open("mine", prefix=glob_prefix), "1")
        store.add(store.open("theirs", prefix=other_prefix), "2")
        listed = store.call(store.open("any", prefix=glob_prefix), "list_sessions")
        assert [info.id for info in listed] == ["mine"]
    finally:
        delete_redis_prefix(glob_prefix)
        delete_redis_prefix(other_prefix)


def test_list_sessions_reports_counts_and_last_update(store: Opener) -> None:
    before = datetime.now(timezone.utc) - timedelta(seconds=5)
    store.add(store.open("older"), "1", "2")
    store.add(store.open("newer"), "1")
    meta_only = store.open("meta only")
    store.call(meta_only, "set_meta", "k", "v")
    listed = store.call(store.open("any"), "list_sessions")
    assert [(info.id, info.message_count) for info in listed] == [("newer", 1), ("older", 2)]
    assert all(info.updated_at is not None and info.updated_at >= before for info in listed)
