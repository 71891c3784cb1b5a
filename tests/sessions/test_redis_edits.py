"""``fork`` and ``undo`` on RedisSession and AsyncRedisSession, against the real Redis server:
atomic under concurrent appends, seen by other instances, meta and ttl carried over, and
refusals that write nothing. (The conformance suite in test_redis.py checks what every
store's fork and undo do; these check what the Redis scripts add. Resends and bounded waits
are in test_redis_edits_resends.py.)

A fork runs as one script over both sessions' keys, or, for a Redis Cluster client, as two
steps (each session's keys hash to their own slot); ``split`` runs the checks both ways.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis as redis_module

from aniki import (
    CorruptStoreError,
    Message,
    SchemaVersionError,
    ToolCall,
    UserError,
)
from aniki.sessions.redis import RedisSession
from aniki.sessions.redis import _attachments as _redis_attachments

from ..servers import redis_url
from .redis_fixtures import client, contents, dumps, fork, keys_of, prefix, split, store, turn
from .stores import Opener, counting

__all__ = ["client", "prefix", "split", "store"]  # fixtures, used by name

pytestmark = pytest.mark.redis

CLAIM = "aniki.summary.claim"


# --- atomic under concurrent writers ------------------------------------------------------


class Writer(threading.Thread):
    """Appends ``count`` turns to ``session_id``, each as one batch, once :attr:`go` is set."""

    def __init__(self, prefix: str, session_id: str, count: int) -> None:
        super().__init__(daemon=True)
        self.session = RedisSession(session_id, redis_url(), prefix=prefix)
        self.count = count
        self.go = threading.Event()

    def run(self) -> None:
        self.go.wait(10)
        for n in range(self.count):
            self.session.add_messages(turn(n))
        self.session.close()


def test_a_fork_racing_appends_copies_the_history_of_one_instant(
    store: Opener, prefix: str, client: redis_module.Redis, split: bool
) -> None:
    source = store.open("src")
    store.call(source, "add_messages", turn(-1))
    first = store.run(source.get_messages())[0]
    writer = Writer(prefix, "src", 300)
    writer.start()
    writer.go.set()
    children: list[tuple[Any, bool]] = []
    while writer.is_alive() or not children:
        through_first = len(children) % 3 == 2
        upto = first.id if through_first else None
        children.append(
            (fork(store, source, f"copy-{len(children)}", split=split, upto=upto), through_first)
        )
    writer.join(30)
    final = RedisSession("src", client=client, prefix=prefix).get_messages()
    assert contents(final) == contents([*turn(-1), *(m for n in range(300) for m in turn(n))])
    seen = []
    for child, through_first in children:
        copied = RedisSession(child.id, client=client, prefix=prefix).get_messages()
        if through_first:
            assert contents(copied) == ["q-1"] and copied[0].id == first.id
            continue
        assert len(copied) % 2 == 0, "a fork split a batch"
        assert [(m.id, m.content) for m in copied] == [
            (m.id, m.content) for m in final[: len(copied)]
        ]
        seen.append(len(copied))
    assert any(2 < n < len(final) for n in seen), f"no fork overlapped the appends: {seen}"


def test_an_undo_racing_appends_removes_whole_turns_and_loses_nothing(
    store: Opener, prefix: str
) -> None:
    undoer, reader = store.open("race"), store.open("race")
    writer = Writer(prefix, "race", 200)
    writer.start()
    writer.go.set()
    removed: list[list[str]] = []
    while writer.is_alive():
        taken = contents(store.call(undoer, "undo"))
        if taken:
            removed.append(taken)
        store.read(reader)
    writer.join(30)
    final = store.read(store.open("race"))
    assert store.read(undoer) == store.read(reader) == final
    assert all(len(t) == 2 and t[0][1:] == t[1][1:] for t in removed), removed
    assert len(final) % 2 == 0 and all(
        q[1:] == a[1:] for q, a in zip(final[::2], final[1::2], strict=True)
    )
    everything = final + [content for t in removed for content in t]
    assert sorted(everything) == sorted(f"{kind}{n}" for n in range(200) for kind in "qa")
    assert removed, "no undo overlapped the appends"


# --- caches --------------------------------------------------------------------------------


def test_other_instances_see_an_undo_and_the_undoer_keeps_what_it_read(
    store: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    undoer, other = store.open("s"), store.open("s")
    store.call(undoer, "add_messages", [*turn(0), *turn(1), *turn(2)])
    assert len(store.read(other)) == 6
    decoded = counting(monkeypatch, _redis_attachments, "decode_message")
    assert contents(store.call(undoer, "undo")) == ["q2", "a2"]
    assert len(decoded) == 2  # the turn removed, as the undo returns it
    assert store.read(undoer) == ["q0", "a0", "q1", "a1"]
    assert len(decoded) == 2, "the undoing instance read again what it held"
    assert store.read(other) == ["q0", "a0", "q1", "a1"]
    # A fused append-and-read and a plain append from the instance whose cache went stale.
    fused = store.run(other._add_then_get([Message("user", "q3")], None))
    assert contents(fused) == ["q0", "a0", "q1", "a1", "q3"]
    store.add(undoer, "q4")
    assert store.read(other) == store.read(undoer) == ["q0", "a0", "q1", "a1", "q3", "q4"]
    assert store.read(store.open("s"), limit=2) == ["q3", "q4"]


def test_a_fork_hands_the_new_session_what_this_instance_read(
    store: Opener, monkeypatch: pytest.MonkeyPatch, split: bool
) -> None:
    source = store.open("s")
    store.call(source, "add_messages", [*turn(0), *turn(1)])
    stored = store.run(source.get_messages())
    decoded = counting(monkeypatch, _redis_attachments, "decode_message")
    child = fork(store, source, "child", split=split, upto=stored[2].id)
    assert store.read(child) == ["q0", "a0", "q1"]
    assert decoded == []
    store.add(child, "only here")
    assert store.read(store.open("child")) == ["q0", "a0", "q1", "only here"]
    assert store.read(source) == ["q0", "a0", "q1", "a1"]


# --- meta and options ------------------------------------------------------------------------


def test_a_fork_copies_meta_but_the_claim_replaces_the_targets_and_takes_the_ttl(
    store: Opener, prefix: str, client: redis_module.Redis, split: bool
) -> None:
    source = store.open("s", ttl=600)
    store.add(source, "hi")
    values = {"summary": {"covered": 1, "text": "h\u00e9"}, "aniki.cut.window": [3, "x"], CLAIM: 1}
    for key, value in values.items():
        store.call(source, "set_meta", key, value)
    target = store.open("t")
    store.call(target, "set_meta", "stale", True)
    store.call(target, "set_meta", CLAIM, "theirs")
    child = fork(store, source, "t", split=split)
    for reader in (child, store.open("t")):
        assert store.call(reader, "get_meta", "summary") == values["summary"]
        assert store.call(reader, "get_meta", "aniki.cut.window") == [3, "x"]
        assert store.call(reader, "get_meta", CLAIM) is None
        assert store.call(reader, "get_meta", "stale") is None
    assert store.call(source, "get_meta", CLAIM) == 1
    msgs, info, meta, _ = keys_of(prefix, "t")
    assert all(0 < client.pttl(key) <= 600_000 for key in (msgs, info, meta))


def test_a_fork_of_an_empty_session_writes_no_history(
    store: Opener, prefix: str, client: redis_module.Redis, split: bool
) -> None:
    child = fork(store, store.open("nothing"), "empty", split=split)
    assert store.read(child) == []
    assert not any(client.exists(key) for key in keys_of(prefix, "empty"))
    assert store.call(child, "list_sessions") == []


def test_the_new_session_outlives_the_one_it_was_forked_from(store: Opener) -> None:
    source = store.open("s")
    store.add(source, "kept")
    child = fork(store, source, "child", split=False)
    store.run(source.aclose() if store.is_async else source.close())
    assert store.read(child) == ["kept"]


def test_a_fork_through_a_passed_client_shares_it(prefix: str) -> None:
    client = redis_module.Redis.from_url(redis_url())
    try:
        session = RedisSession("s", prefix=prefix, client=client, ttl=60)
        session.add_message(Message("user", "hi"))
        child = session.fork("child")
        assert child._client is client and child._core.ttl_ms == 60_000
        child.close()
        session.close()
        assert client.ping()
    finally:
        client.close()


def test_fork_upto_finds_the_message_with_that_id_not_text_that_looks_like_it(
    store: Opener, split: bool
) -> None:
    odd = 'a"b\\c \u00e9\n\U0001f600'
    call = ToolCall(id=odd, name="f", arguments=f'{{"id": "{odd}"}}')
    history = [
        Message("user", "first", id=odd),
        Message("assistant", tool_calls=(call,), id="x1"),
        Message("tool", odd, tool_call_id=odd, id="x2"),
        Message("user", odd, id="x3"),
    ]
    source = store.open("s")
    store.run(source._replace(history))
    child = fork(store, source, "child", split=split, upto=odd)
    assert store.read(store.open("child")) == ["first"]
    assert store.run(child.get_messages())[0].id == odd
    with pytest.raises(UserError, match="no message with id"):
        fork(store, source, "other", split=split, upto="a")


# --- refusals --------------------------------------------------------------------------------


def test_a_refused_fork_writes_nothing(
    store: Opener, prefix: str, client: redis_module.Redis, split: bool
) -> None:
    source, taken = store.open("s"), store.open("taken")
    store.call(source, "add_messages", turn(0))
    store.call(source, "set_meta", "summary", "s")
    store.add(taken, "theirs")
    store.call(store.open("meta-only"), "set_meta", "k", 1)
    before = dumps(client, prefix, "s", "taken", "meta-only", "new")
    refusals: list[tuple[str, dict[str, Any], type[Exception], str]] = [
        ("taken", {}, UserError, "already holds messages"),
        ("new", {"upto": "no-such-id"}, UserError, "no message with id 'no-such-id'"),
        ("new", {"upto": ""}, UserError, "no message with id ''"),
        ("new", {"upto": 3}, UserError, "upto must be a message id"),
        ("s", {}, UserError, "needs a new session id"),
    ]
    for new_id, options, error, words in refusals:
        with pytest.raises(error, match=words):
            fork(store, source, new_id, split=split, **options)
    assert dumps(client, prefix, "s", "taken", "meta-only", "new") == before
    # Data this aniki cannot read, on either side: refused, named, untouched.
    client.hset(keys_of(prefix, "meta-only")[1], "v", 99)
    with pytest.raises(SchemaVersionError, match="'meta-only' was written with schema version 99"):
        fork(store, source, "meta-only", split=split)
    client.hset(keys_of(prefix, "s")[1], "v", 99)
    with pytest.raises(SchemaVersionError, match="'s' was written with schema version 99"):
        fork(store, store.open("s"), "new", split=split)
    client.hset(keys_of(prefix, "s")[1], "v", 2)
    client.set(keys_of(prefix, "new")[2], b"foreign")
    with pytest.raises(CorruptStoreError, match="prefix"):
        fork(store, source, "new", split=split)
    client.hset(keys_of(prefix, "meta-only")[1], "v", 2)
    client.delete(keys_of(prefix, "new")[2])
    assert dumps(client, prefix, "s", "taken", "meta-only", "new") == before


def test_a_fork_upto_past_an_unreadable_record_is_refused(
    store: Opener, prefix: str, client: redis_module.Redis, split: bool
) -> None:
    source = store.open("s")
    store.add(source, "kept")
    kept = store.run(source.get_messages())[0]
    client.rpush(keys_of(prefix, "s")[0], b'{"id":"' + kept.id.encode() + b'", not json')
    before = dumps(client, prefix, "s", "new")
    with pytest.raises(CorruptStoreError, match=r"record 1 of the Redis key .* is not JSON"):
        fork(store, source, "new", split=split, upto=kept.id)
    assert dumps(client, prefix, "s", "new") == before


def test_a_refused_undo_writes_nothing(
    store: Opener, prefix: str, client: redis_module.Redis
) -> None:
    session = store.open("s")
    store.call(session, "add_messages", [*turn(0), *turn(1)])
    msgs, info, *_ = keys_of(prefix, "s")
    client.rpush(msgs, b"{not json")  # in the turn an undo would remove
    before = dumps(client, prefix, "s")
    with pytest.raises(CorruptStoreError, match=r"record 4 of the Redis key .* is not JSON"):
        store.call(session, "undo")
    assert dumps(client, prefix, "s") == before
    client.rpush(msgs, b'{"role":"user", oops')  # looks like the last user message
    before = dumps(client, prefix, "s")
    with pytest.raises(CorruptStoreError, match="record 5 of the Redis key"):
        store.call(session, "undo")
    assert dumps(client, prefix, "s") == before
    client.ltrim(msgs, 0, 3)
    client.hset(info, "v", 99)
    before = dumps(client, prefix, "s")
    with pytest.raises(SchemaVersionError, match="upgrade aniki"):
        store.call(store.open("s"), "undo")
    assert dumps(client, prefix, "s") == before
    client.hset(info, "v", 2)
    assert contents(store.call(session, "undo")) == ["q1", "a1"]


def test_an_undo_keeps_the_ttl_and_the_meta(
    store: Opener, prefix: str, client: redis_module.Redis
) -> None:
    session = store.open("s", ttl=600)
    store.call(session, "add_messages", [*turn(0), *turn(1)])
    store.call(session, "set_meta", "summary", "kept")
    for key in keys_of(prefix, "s"):
        client.pexpire(key, 1_000)
    assert contents(store.call(session, "undo")) == ["q1", "a1"]
    assert all(client.pttl(key) > 500_000 for key in keys_of(prefix, "s"))
    assert store.call(session, "get_meta", "summary") == "kept"
    assert contents(store.call(session, "undo")) == ["q0", "a0"]
    assert store.read(store.open("s")) == []
    assert store.call(session, "undo") == ()
