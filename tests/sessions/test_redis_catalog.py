"""The Redis store's catalog against the real server: listing by sorted sets (checked against
the reference rule, ties and pages included), sessions that expire, the upgrade of a prefix
the previous layout wrote, prunes in batches, a prune racing appends, and refusals. (The
conformance suite in test_redis.py checks what every store's info and listing do; the sets
each write keeps are checked in test_redis_catalog_upkeep.py.)"""

from __future__ import annotations

import itertools
import random
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest
import redis as redis_module

from aniki import CorruptStoreError, Message, UserError
from aniki.sessions import open_store
from aniki.sessions._catalog import PRUNE_BATCH, Listing, check_listing, select
from aniki.sessions.base import SessionInfo
from aniki.sessions.redis import RedisSession, _catalog_scripts
from aniki.sessions.redis import _catalog as _redis_catalog
from aniki.sessions.redis import _core as _redis_core

from ..servers import redis_url
from .redis_fixtures import Kit, client, keys_of, kit, prefix

__all__ = ["client", "kit", "prefix"]  # fixtures, used by name

pytestmark = pytest.mark.redis


class Clock:
    """A clock for the scripts whose readings repeat (three writes per microsecond), so that
    sessions tie on updated_at."""

    def __init__(self) -> None:
        self._ticks = itertools.count()
        self.start = time.time_ns() // 1000

    def micros(self) -> int:
        return self.start + next(self._ticks) // 3

    def time_ns(self) -> int:
        return self.micros() * 1000


def freeze(monkeypatch: pytest.MonkeyPatch, clock: Clock) -> None:
    monkeypatch.setattr(_redis_catalog, "now_micros", clock.micros)
    monkeypatch.setattr(_redis_core, "time", clock)


# --- listing -------------------------------------------------------------------------------


def test_listing_follows_the_reference_rule_through_ties_and_pages(
    kit: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    freeze(monkeypatch, Clock())
    rng = random.Random(29)
    sessions = []
    for n in range(40):
        session = kit.open(f"s{rng.randrange(1000):03d}-{n}")
        owner = rng.choice([None, "ann", "bo", "a:b{c}*"])
        tags = rng.sample(["red", "blue", "gr\u00fcn"], rng.randrange(4))
        kit.run(session.set_info(owner=owner, tags=tags, title=f"t{n}"))
        if rng.random() < 0.6:
            kit.opener.add(session, f"m{n}")
        sessions.append(session)
    truth = [kit.info(session) for session in sessions]
    assert len({info.updated_at for info in truth}) < len(truth)  # some tie
    middle = sorted(info.updated_at for info in truth if info.updated_at)[len(truth) // 2]
    for owner, tag, after, limit in itertools.product(
        [None, "ann", "a:b{c}*", "nobody"],
        [None, "blue", "gr\u00fcn"],
        [None, middle],
        [1, 3, None],
    ):
        query = {"owner": owner, "tag": tag, "updated_after": after}
        expected = select(truth, check_listing(**query))
        assert kit.list(**query) == expected, query
        pages, cursor = [], None
        while True:
            page = kit.list(**query, limit=limit or 1000, cursor=cursor)
            pages += page
            if len(page) < (limit or 1000):
                break
            cursor = page[-1]
        assert pages == expected, (query, limit)


def test_a_page_is_one_script_whatever_the_store_holds(kit: Kit) -> None:
    for n in range(60):
        kit.opener.add(kit.open(f"s{n:02d}"), "hi")
    kit.list(limit=1)  # files the prefix (nothing to file: it was never written by the old layout)
    kit.steps.clear()
    page = kit.list(limit=5)
    assert [info.id for info in page] == [f"s{n:02d}" for n in range(59, 54, -1)]
    assert len(kit.steps) == 1 and kit.scripts(_catalog_scripts.LIST) == 1
    assert not any(isinstance(step, _redis_core.Pipeline) for step in kit.steps)  # no SCAN


def test_a_cursor_newer_than_updated_after_lists_nothing_older(kit: Kit) -> None:
    for n in range(3):
        kit.opener.add(kit.open(f"s{n}"), "hi")
        time.sleep(0.01)
    first, second, third = kit.list()
    assert kit.list(updated_after=second.updated_at, cursor=third) == []
    assert kit.list(updated_after=third.updated_at, cursor=first) == [second]


# --- expiry --------------------------------------------------------------------------------


def test_an_expired_session_leaves_the_listing_and_every_set(
    kit: Kit, prefix: str, client: redis_module.Redis
) -> None:
    short = kit.open("short", ttl=0.3)
    kit.run(short.set_info(owner="ann", tags=["red", "blue"]))
    kit.opener.add(short, "soon gone")
    kept = kit.open("kept")
    kit.run(kept.set_info(owner="ann", tags=["red"]))
    assert [info.id for info in kit.list(owner="ann")] == ["kept", "short"]
    assert 0 < client.pttl(keys_of(prefix, "short")[1]) <= 300  # the info hash expires too
    time.sleep(0.6)
    assert [info.id for info in kit.list(owner="ann")] == ["kept"]
    assert [info.id for info in kit.list(tag="red")] == ["kept"]
    catalog = f"{prefix}catalog:"
    for key in ("all", "owner:ann", "tag:red", "tag:blue", "expiry"):
        assert client.zscore(catalog + key, "short") is None, key
    assert client.hget(catalog + "labels", "short") is None
    assert kit.info(kit.open("short")) == SessionInfo("short", 0, None)


def test_prune_drops_expired_sessions_without_counting_them(
    kit: Kit, prefix: str, client: redis_module.Redis
) -> None:
    kit.run(kit.open("short", ttl=0.2).set_info(owner="ann", tags=["t"]))
    kit.opener.add(kit.open("old"), "old")
    time.sleep(0.5)
    assert kit.run(kit.store.prune(older_than=timedelta(milliseconds=100))) == 1
    catalog = f"{prefix}catalog:"
    assert client.zcard(catalog + "all") == 0 and client.zcard(catalog + "owner:ann") == 0
    assert client.zcard(catalog + "tag:t") == 0 and client.hlen(catalog + "labels") == 0


# --- upgrade -------------------------------------------------------------------------------


def _old_layout(client: redis_module.Redis, prefix: str, session_id: str, times: list[str]) -> None:
    """A session as the previous aniki wrote it: records, and v, gen and updated (seconds)."""
    msgs, info, *_ = keys_of(prefix, session_id)
    for n, at in enumerate(times):
        record = f'{{"role":"user","content":"{session_id} {n}","id":"m{n}","created_at":"{at}"}}'
        client.rpush(msgs, record)
    updated = datetime.fromisoformat(times[-1]).timestamp() + 0.5
    client.hset(info, mapping={"v": 2, "gen": f"gen-{session_id}", "updated": repr(updated)})


def test_a_prefix_the_previous_layout_wrote_is_listed_after_the_upgrade(
    kit: Kit, prefix: str, client: redis_module.Redis
) -> None:
    _old_layout(
        client, prefix, "a", ["2026-01-02T03:04:05.123456+00:00", "2026-01-03T00:00:00+00:00"]
    )
    _old_layout(client, prefix, "b", ["2026-02-01T10:00:00+01:00"])
    _old_layout(client, prefix, "c", ["2025-12-31T23:59:59.000001+00:00"] * 3)
    client.hset(keys_of(prefix, "meta only")[1], "v", 2)
    client.hset(keys_of(prefix, "meta only")[2], "k", '"v"')
    utc = timezone.utc
    expected_a = SessionInfo(
        "a",
        2,
        datetime(2026, 1, 3, 0, 0, 0, 500000, tzinfo=utc),
        created_at=datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=utc),
    )
    assert kit.info(kit.open("a")) == expected_a  # read before any filing, from the messages
    kit.opener.add(kit.open("c"), "new")  # a write before the filing: c is filed by it
    kit.steps.clear()
    listed = kit.list()
    assert [(info.id, info.message_count) for info in listed] == [("c", 4), ("b", 1), ("a", 2)]
    assert listed[2] == expected_a
    assert listed[1].created_at == datetime(2026, 2, 1, 9, 0, tzinfo=utc)
    assert listed[0].created_at == datetime(2025, 12, 31, 23, 59, 59, 1, tzinfo=utc)
    assert listed[0].updated_at is not None and listed[0].updated_at > listed[1].updated_at
    # One filing script per page of the SCAN that found some of the prefix's sessions (the
    # three may share a page or not, as the server's other keys fall).
    scans = sum(
        1
        for step in kit.steps
        if isinstance(step, _redis_core.Pipeline) and step.commands[0][0] == "SCAN"
    )
    assert 1 <= kit.scripts(_catalog_scripts.BACKFILL) <= scans
    assert client.get(f"{prefix}catalog:layout") == b"1"
    kit.steps.clear()
    assert kit.list() == listed
    assert not any(isinstance(step, _redis_core.Pipeline) for step in kit.steps)  # scanned once
    assert [m.content for m in kit.opener.driver.get_messages(kit.open("a"))] == ["a 0", "a 1"]


def test_a_prune_files_the_old_layout_first(
    kit: Kit, prefix: str, client: redis_module.Redis
) -> None:
    _old_layout(client, prefix, "old", ["2020-01-01T00:00:00+00:00"])
    kit.opener.add(kit.open("new"), "fresh")
    assert kit.run(kit.store.prune(older_than=timedelta(days=30))) == 1
    assert not any(client.exists(key) for key in keys_of(prefix, "old"))
    assert [info.id for info in kit.list()] == ["new"]


# --- prune and delete ----------------------------------------------------------------------


def test_prune_and_delete_run_in_batches(kit: Kit, prefix: str, client: redis_module.Redis) -> None:
    total = 2 * PRUNE_BATCH + PRUNE_BATCH // 2
    for n in range(total):
        session = kit.open(f"p{n}")
        kit.run(session.set_info(owner="pruned" if n % 2 else "deleted", tags=["x"]))
        kit.opener.add(session, "hi")
        kit.run(session.set_meta("summary", {"n": n}))
        kit.run(session.close() if not kit.is_async else session.aclose())
    kit.opener.add(kit.open("fresh"), "kept")
    kit.list(limit=1)
    time.sleep(0.05)
    kit.steps.clear()
    assert kit.run(kit.store.delete_sessions(owner="deleted")) == (total + 1) // 2
    assert kit.scripts(_catalog_scripts.PRUNE) == 2  # 125: a full batch, then 25
    kit.steps.clear()
    cutoff = timedelta(milliseconds=40)
    kit.opener.add(kit.open("fresh"), "again")  # written after the cut-off: kept
    assert kit.run(kit.store.prune(older_than=cutoff, owner="pruned")) == total // 2
    assert kit.scripts(_catalog_scripts.PRUNE) == 2
    left = {key.decode() for key in client.scan_iter(match=f"{prefix}*")}
    catalog = f"{prefix}catalog:"
    fresh = {key.decode() for key in keys_of(prefix, "fresh") if client.exists(key)}
    assert left == {*fresh, catalog + "all", catalog + "layout"}
    assert [info.id for info in kit.list()] == ["fresh"]


def test_three_batches_for_two_and_a_half(kit: Kit, prefix: str) -> None:
    for n in range(250):
        kit.opener.add(kit.open(f"p{n}"), "hi")
    time.sleep(0.05)
    kit.list(limit=1)
    kit.steps.clear()
    assert kit.run(kit.store.prune(older_than=timedelta(milliseconds=20))) == 250
    assert kit.scripts(_catalog_scripts.PRUNE) == 3
    assert kit.list() == []


def test_appends_racing_a_prune_leave_each_session_whole_or_gone(
    prefix: str, client: redis_module.Redis
) -> None:
    store = open_store(redis_url(), prefix=prefix)
    originals = 2 * PRUNE_BATCH + 30
    for n in range(originals):
        session = store.session(f"s{n}")
        session.add_messages([Message("user", f"s{n} q"), Message("assistant", f"s{n} a")])
        session.set_meta("summary", f"s{n}")  # type: ignore[attr-defined]
    time.sleep(0.05)
    go, stop = threading.Event(), threading.Event()

    def write(seed: int) -> None:
        rng = random.Random(seed)
        with open_store(redis_url(), prefix=prefix) as own:
            go.wait()
            while not stop.is_set():
                target = own.session(f"s{rng.randrange(originals)}")
                target.add_messages([Message("user", "late q"), Message("assistant", "late a")])

    writers = [threading.Thread(target=write, args=(seed,)) for seed in range(3)]
    for writer in writers:
        writer.start()
    go.set()
    time.sleep(0.02)
    removed = store.prune(older_than=timedelta(milliseconds=30))
    stop.set()
    for writer in writers:
        writer.join()
    listed = {info.id: info for info in store.list_sessions()}
    gone = 0
    for n in range(originals):
        session_id = f"s{n}"
        fresh = RedisSession(session_id, redis_url(), prefix=prefix)
        contents = [m.content for m in fresh.get_messages()]
        info = fresh.info()
        whole = contents[:2] == [f"{session_id} q", f"{session_id} a"]
        assert contents[2 if whole else 0 :] == ["late q", "late a"] * (
            (len(contents) - 2 * whole) // 2
        )
        assert (fresh.get_meta("summary") == session_id) is whole, session_id
        gone += not whole
        assert info.message_count == len(contents)
        assert (session_id in listed) is bool(contents)
        if contents:
            assert listed[session_id] == info
        fresh.close()
    assert removed == gone > 0
    store.close()


# --- refusals ------------------------------------------------------------------------------


def test_on_a_cluster_the_info_is_kept_and_listing_is_refused(
    prefix: str, client: redis_module.Redis
) -> None:
    core = _redis_core.RedisCore("c", store="test", prefix=prefix, ttl=None, indexed=False)
    assert core.write_keys == core.keys  # a script may not reach the catalog's slot there
    step = next(
        core.append([Message("user", "hi", id="m1", created_at=datetime.now(timezone.utc))])
    )
    assert isinstance(step, _redis_core.Eval)
    client.eval(step.script.source, len(step.keys), *step.keys, *step.args)
    assert client.hget(keys_of(prefix, "c")[1], "count") == b"1"
    assert not client.exists(f"{prefix}catalog:all")
    for flow in (core.list_sessions(Listing()), core.delete_sessions("x")):
        with pytest.raises(UserError, match="Redis Cluster"):
            next(flow)


@pytest.mark.parametrize("key", ["all", "owner:ann"])
def test_a_foreign_catalog_key_refuses_a_write_that_writes_nothing(
    kit: Kit, prefix: str, client: redis_module.Redis, key: str
) -> None:
    session = kit.open("s")
    kit.run(session.set_info(owner="ann"))
    before = {k: client.dump(k) for k in keys_of(prefix, "s")}
    client.delete(f"{prefix}catalog:{key}")
    client.set(f"{prefix}catalog:{key}", "foreign")
    with pytest.raises(CorruptStoreError, match=f"catalog:{key}"):
        kit.opener.add(session, "refused")
    assert {k: client.dump(k) for k in keys_of(prefix, "s")} == before
    with pytest.raises(CorruptStoreError, match=f"catalog:{key}"):
        kit.list(**({} if key == "all" else {"owner": "ann"}))
