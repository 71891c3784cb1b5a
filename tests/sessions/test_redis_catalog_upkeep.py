"""Every write of a Redis session keeps its info hash and the prefix's catalog in step, in
the same script: after each kind of write (append, batch, the fused append and read, the
append after a named message, set_info, undo, fork in one script and in two, replace, clear),
the sorted sets and the labels hold exactly what the info hashes say, scored by updated_at,
and the count is the list's length. A meta write leaves the catalog alone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis as redis_module

from aniki import Message
from aniki.sessions.redis import AsyncRedisSession, RedisSession

from ..servers import redis_url
from .redis_fixtures import client, keys_of, prefix
from .stores import Opener

__all__ = ["client", "prefix"]  # fixtures, used by name

pytestmark = pytest.mark.redis


@pytest.fixture(params=[RedisSession, AsyncRedisSession], ids=["sync", "async"])
def store(request: pytest.FixtureRequest, prefix: str) -> Iterator[Opener]:
    opener = Opener(request.param, url=redis_url(), prefix=prefix)
    yield opener
    opener.close()


def catalog(client: redis_module.Redis, prefix: str) -> dict[str, Any]:
    """The catalog as stored: each set's members and scores, and the labels."""
    start = f"{prefix}catalog:"
    found: dict[str, Any] = {}
    for key in client.scan_iter(match=start.replace("*", "\\*") + "*"):
        name = key.decode()[len(start) :]
        if name == "labels":
            found[name] = {k.decode(): v.decode() for k, v in client.hgetall(key).items()}
        elif name != "layout":
            found[name] = {
                m.decode(): int(s) for m, s in client.zrange(key, 0, -1, withscores=True)
            }
    return found


def expected(client: redis_module.Redis, prefix: str, *ids: str) -> dict[str, Any]:
    """The catalog the info hashes of ``ids`` call for (their counts checked on the way)."""
    want: dict[str, Any] = {}
    for session_id in ids:
        msgs, info, *_ = keys_of(prefix, session_id)
        fields = {k.decode(): v.decode() for k, v in client.hgetall(info).items()}
        if "updated_at" not in fields:
            continue
        assert int(fields["count"]) == client.llen(msgs), session_id
        assert int(fields["created_at"]) <= int(fields["updated_at"])
        score = int(fields["updated_at"])
        names = ["all"]
        if "owner" in fields:
            names.append("owner:" + fields["owner"])
        tags = json.loads(fields.get("tags", "[]"))
        names += ["tag:" + tag for tag in tags]
        for name in names:
            want.setdefault(name, {})[session_id] = score
        if "owner" in fields or tags:
            label = fields.get("owner", "") + "\0" + fields.get("tags", "")
            want.setdefault("labels", {})[session_id] = label
    return want


@pytest.mark.parametrize("split", [False, True], ids=["one-script-fork", "two-step-fork"])
def test_every_write_keeps_the_catalog_in_step(
    store: Opener, prefix: str, client: redis_module.Redis, split: bool
) -> None:
    session = store.open("s")
    ids = ("s", "child")

    def check() -> dict[str, Any]:
        found = catalog(client, prefix)
        assert found == expected(client, prefix, *ids)
        return found

    writes: list[tuple[str, Any]] = [
        ("set_info", lambda: session.set_info(title="T", owner="ann", tags=["x", "y\u00e9"])),
        ("append", lambda: session.add_message(Message("user", "q1"))),
        ("batch", lambda: session.add_messages([Message("assistant", "a1")] * 2)),
        ("fused", lambda: session._add_then_get([Message("user", "q2")], 2)),
        ("after", lambda: session._add_after([Message("assistant", "a2")], last_id())),
        ("relabel", lambda: session.set_info(owner="bo", tags=["y\u00e9"])),
        ("undo", lambda: session.undo()),
    ]

    def last_id() -> str:
        return store.driver.get_messages(session)[-1].id or ""

    before = check()
    for name, write in writes:
        store.run(write())
        after = check()
        assert after["all"]["s"] >= before.get("all", {}).get("s", 0), name
        before = after
    assert set(before) == {"all", "owner:bo", "tag:y\u00e9", "labels"}  # left ann and x
    session._split = split
    child = store.run(session.fork("child"))
    store._opened.append(child)
    found = check()
    assert found["owner:bo"].keys() == {"s", "child"}
    store.run(session._replace([Message("user", "only")]))  # the info goes with the history
    found = check()
    assert found["all"].keys() == {"s", "child"} and found["owner:bo"].keys() == {"child"}
    store.call(child, "clear")
    assert check() == {"all": {"s": found["all"]["s"]}}
    store.call(session, "set_meta", "summary", "x")
    assert check() == {"all": {"s": found["all"]["s"]}}  # derived state is not a write
    store.run(session.set_info(owner="ann"))
    store.run(session.set_info(owner=None, tags=()))
    assert check().keys() == {"all"}


def test_set_info_refreshes_the_ttl_of_every_key(
    store: Opener, prefix: str, client: redis_module.Redis
) -> None:
    session = store.open("t", ttl=60)
    store.add(session, "hi")
    store.call(session, "set_meta", "k", 1)
    for key in keys_of(prefix, "t"):
        client.pexpire(key, 1_000)
    store.run(session.set_info(title="kept alive"))
    assert all(client.pttl(key) > 50_000 for key in keys_of(prefix, "t"))
    assert client.pttl(f"{prefix}catalog:all") == -1  # the sets never expire: a listing prunes
