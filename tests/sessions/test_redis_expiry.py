"""Sessions that expire by their ttl on the Redis store, against the real server with a ttl of
one second: the blobs they named, and their places in the catalog, are released by the sweep a
prune or a delete runs first (and by a listing that meets them); a session written again under
its id after it expired keeps its new blobs, also while a sweep runs; a blob stored again after
it expired is not taken back by the session that named it before. After each, every blob's
references and every session's ledger hold exactly what the stored records name."""

from __future__ import annotations

import hashlib
import os
import random
import re
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
import redis as redis_module

from aniki import Attachment, CorruptStoreError, Message
from aniki.sessions import open_store
from aniki.sessions._catalog import PRUNE_BATCH
from aniki.sessions.redis import RedisSession, _catalog_scripts

from ..servers import redis_url
from .redis_fixtures import Kit, client, fork, keys_of, kit, prefix

__all__ = ["client", "kit", "prefix"]  # fixtures, used by name

pytestmark = pytest.mark.redis

TTL = 1
"""Seconds: short, yet far longer than a write takes on a loaded machine."""
PHOTO = Attachment("image/png", data=os.urandom(2048), name="photo.png")
OTHER = Attachment("image/png", data=os.urandom(2048), name="other.png")
_NAMES = re.compile(rb'"blob":"([0-9a-f]+)"')


def with_photo(text: str, photo: Attachment = PHOTO) -> Message:
    return Message("user", text, attachments=(photo,))


def blob_key(prefix: str, photo: Attachment = PHOTO) -> str:
    return f"{prefix}blob:{hashlib.sha256(photo.data or b'').hexdigest()}"


def expired(client: redis_module.Redis, keys: list[Any]) -> None:
    """Wait until ``keys`` are gone (by their ttl), 5 s at most."""
    deadline = time.monotonic() + 5
    while any(client.exists(key) for key in keys):  # EXISTS expires a key that is due
        assert time.monotonic() < deadline, "the keys never expired"
        time.sleep(0.05)
    # A write files its due time from the server's clock as its script runs, which on
    # Redis 7.2+ may be a moment after the time its expiry counts from.
    time.sleep(0.05)


def session_keys(prefix: str, *ids: str) -> list[bytes]:
    return [key for session_id in ids for key in keys_of(prefix, session_id)]


def audit(client: redis_module.Redis, prefix: str) -> dict[str, dict[str, int]]:
    """Check that each blob's ``r:<id>`` fields and each session's ledger hold exactly what
    the stored records name, and that no blob is left that none names; return blob hash ->
    {session id: how many of its records name it}."""
    named: dict[str, dict[str, int]] = {}
    start = len(prefix) + 1
    for key in client.scan_iter(match=f"{prefix}{{*}}:msgs"):
        session_id = key.decode()[start : -len("}:msgs")]
        for record in client.lrange(key, 0, -1):
            for found in set(_NAMES.findall(record)):
                held = named.setdefault(found.decode(), {})
                held[session_id] = held.get(session_id, 0) + 1
    stored = {}
    for key in client.scan_iter(match=f"{prefix}blob:*"):
        fields = client.hgetall(key)
        assert b"data" in fields, key
        refs = {k.decode()[2:]: int(v) for k, v in fields.items() if k.startswith(b"r:")}
        stored[key.decode()[len(prefix) + 5 :]] = refs
    assert stored == named
    ledgers = {
        key.decode()[start : -len("}:blobs")]: {m.decode() for m in client.smembers(key)}
        for key in client.scan_iter(match=f"{prefix}{{*}}:blobs")
    }
    wanted: dict[str, set[str]] = {}
    for found, holders in named.items():
        for session_id in holders:
            wanted.setdefault(session_id, set()).add(found)
    assert ledgers == wanted
    return named


def catalog_sizes(client: redis_module.Redis, prefix: str, *names: str) -> list[int]:
    return [client.zcard(f"{prefix}catalog:{name}") for name in names]


def short_and_kept(kit: Kit, client: redis_module.Redis, prefix: str) -> None:
    """A session with a ttl naming PHOTO and OTHER, PHOTO kept without expiry by a session
    without one, which is then cleared: once the first expires, only it named PHOTO."""
    kit.opener.driver.add_message(kit.open("kept"), with_photo("mine"))
    short = kit.open("short", ttl=TTL)
    kit.run(short.set_info(owner="ann", tags=["t"]))
    kit.run(short.add_messages([with_photo("look"), with_photo("and", OTHER)]))
    kit.run(kit.open("kept").clear())
    assert client.pttl(blob_key(prefix)) == -1  # a session without a ttl named it
    assert 0 < client.pttl(blob_key(prefix, OTHER)) <= TTL * 1000


# --- what an expired session named -------------------------------------------------------


@pytest.mark.parametrize("sweep", ["prune", "delete", "listing"])
def test_what_an_expired_session_named_is_released(
    kit: Kit, prefix: str, client: redis_module.Redis, sweep: str
) -> None:
    short_and_kept(kit, client, prefix)
    expired(client, [*session_keys(prefix, "short"), blob_key(prefix, OTHER)])
    # Expiry alone leaves the blob only it named, its ledger and its places in the catalog.
    assert client.hgetall(blob_key(prefix)).keys() == {b"data", b"r:short"}
    assert catalog_sizes(client, prefix, "all", "owner:ann", "tag:t", "expiry") == [1, 1, 1, 1]
    if sweep == "prune":
        assert kit.run(kit.store.prune(older_than=timedelta(days=1))) == 0  # went by its ttl
    elif sweep == "delete":
        assert kit.run(kit.store.delete_sessions(owner="ann")) == 0
    else:
        assert kit.list() == []
    assert not client.exists(blob_key(prefix), f"{prefix}{{short}}:blobs")
    assert catalog_sizes(client, prefix, "all", "owner:ann", "tag:t", "expiry") == [0, 0, 0, 0]
    assert not client.exists(f"{prefix}catalog:labels")
    assert audit(client, prefix) == {}


def test_the_sweep_goes_a_batch_per_script(
    kit: Kit, prefix: str, client: redis_module.Redis
) -> None:
    total = PRUNE_BATCH + PRUNE_BATCH // 2
    kit.opener.driver.add_message(kit.open("kept"), with_photo("mine"))
    for n in range(total):
        kit.opener.driver.add_message(kit.open(f"s{n}", ttl=TTL), with_photo(f"look {n}"))
    kit.run(kit.open("kept").clear())
    assert len(client.hgetall(blob_key(prefix))) == 1 + total
    expired(client, session_keys(prefix, *(f"s{n}" for n in range(total))))
    kit.steps.clear()
    assert kit.run(kit.store.prune(older_than=timedelta(days=1))) == 0
    assert kit.scripts(_catalog_scripts.SWEEP) == 2  # a full batch, then the half
    assert not client.exists(blob_key(prefix))
    assert catalog_sizes(client, prefix, "all", "expiry") == [0, 0]


def test_a_session_still_alive_is_rescored_not_swept(
    kit: Kit, prefix: str, client: redis_module.Redis
) -> None:
    session = kit.open("alive", ttl=60)
    kit.opener.driver.add_message(session, with_photo("look"))
    expiry = f"{prefix}catalog:expiry"
    due = client.zscore(expiry, "alive")
    assert due is not None and 0 < due - time.time() * 1000 <= 60_000
    client.zadd(expiry, {"alive": 0})  # as if it had been due long ago
    assert kit.run(kit.store.prune(older_than=timedelta(days=1))) == 0
    rescored = client.zscore(expiry, "alive")
    assert rescored is not None and abs(rescored - due) < 5_000
    assert kit.opener.driver.get_messages(kit.open("alive"))[0].attachments == (PHOTO,)
    assert audit(client, prefix) == {blob_key(prefix)[len(prefix) + 5 :]: {"alive": 1}}
    kit.run(session.clear())
    assert client.zscore(expiry, "alive") is None and audit(client, prefix) == {}


# --- the same id again ---------------------------------------------------------------------


def write_again(kit: Kit, how: str) -> None:
    """A first write of ``short`` after it expired."""
    again = kit.open("short")
    if how == "append":
        kit.opener.driver.add_message(again, with_photo("again"))
    elif how == "set_meta":
        kit.run(again.set_meta("summary", "new"))
    elif how == "set_info":
        kit.run(again.set_info(title="back"))
    else:
        source = kit.open("source")
        kit.opener.driver.add_message(source, with_photo("to copy", OTHER))
        fork(kit.opener, source, "short", split=False)


@pytest.mark.parametrize("how", ["append", "set_meta", "set_info", "fork"])
def test_a_session_written_again_after_it_expired_keeps_its_new_blobs(
    kit: Kit, prefix: str, client: redis_module.Redis, how: str
) -> None:
    short_and_kept(kit, client, prefix)
    expired(client, session_keys(prefix, "short"))
    write_again(kit, how)
    # The write released what the ended life named before taking references of its own.
    assert client.hget(blob_key(prefix), "r:short") == (b"1" if how == "append" else None)
    kit.opener.driver.add_message(kit.open("short"), with_photo("and again"))
    assert kit.run(kit.store.prune(older_than=timedelta(days=1))) == 0
    messages = kit.opener.driver.get_messages(kit.open("short"))
    assert messages[-1].attachments == (PHOTO,)
    named = audit(client, prefix)
    assert named[blob_key(prefix)[len(prefix) + 5 :]] == {"short": 2 if how == "append" else 1}
    assert [info.id for info in kit.list()] == ["short", "source"][: 2 if how == "fork" else 1]


def test_messages_that_outlive_their_info_hash_keep_their_blobs(
    kit: Kit, prefix: str, client: redis_module.Redis
) -> None:
    # An instance with a ttl writes only the info; one without writes the messages, which
    # then carry no expiry: the info hash expires alone, the records still name PHOTO.
    kit.run(kit.open("s", ttl=TTL).set_info(title="mixed"))
    kit.opener.driver.add_message(kit.open("s"), with_photo("look"))
    msgs, info, *_ = keys_of(prefix, "s")
    expired(client, [info])
    assert client.exists(msgs)
    kit.run(kit.open("s").set_meta("summary", "later"))
    kit.opener.driver.add_message(kit.open("s"), with_photo("more", OTHER))
    assert kit.run(kit.store.prune(older_than=timedelta(days=1))) == 0
    stored = kit.opener.driver.get_messages(kit.open("s"))
    assert [m.attachments for m in stored] == [(PHOTO,), (OTHER,)]
    assert set(audit(client, prefix)) == {
        blob_key(prefix)[len(prefix) + 5 :],
        blob_key(prefix, OTHER)[len(prefix) + 5 :],
    }


def test_a_blob_stored_again_after_it_expired_is_not_taken_back(
    kit: Kit, prefix: str, client: redis_module.Redis
) -> None:
    kit.opener.driver.add_message(kit.open("short", ttl=TTL), with_photo("look"))
    expired(client, [*session_keys(prefix, "short"), blob_key(prefix)])
    assert client.sismember(f"{prefix}{{short}}:blobs", blob_key(prefix)[len(prefix) + 5 :])
    kit.opener.driver.add_message(kit.open("other"), with_photo("mine now"))
    assert kit.run(kit.store.prune(older_than=timedelta(days=1))) == 0
    assert kit.opener.driver.get_messages(kit.open("other"))[0].attachments == (PHOTO,)
    assert audit(client, prefix) == {blob_key(prefix)[len(prefix) + 5 :]: {"other": 1}}


def test_sessions_written_again_while_sweeps_run_keep_their_blobs(
    prefix: str, client: redis_module.Redis
) -> None:
    total = 2 * PRUNE_BATCH + PRUNE_BATCH // 2
    RedisSession("kept", prefix=prefix, client=client).add_message(with_photo("mine"))
    for n in range(total):
        session = RedisSession(f"s{n}", prefix=prefix, client=client, ttl=TTL)
        session.add_message(with_photo(f"look {n}"))
    RedisSession("kept", prefix=prefix, client=client).clear()
    expired(client, session_keys(prefix, *(f"s{n}" for n in range(total))))
    again = random.Random(7).sample(range(total), total // 2)
    go = threading.Event()

    def write(ids: list[int]) -> None:
        with open_store(redis_url(), prefix=prefix) as own:
            go.wait(10)
            for n in ids:
                own.session(f"s{n}").add_messages([with_photo(f"back {n}")])

    writers = [threading.Thread(target=write, args=(again[i::2],)) for i in range(2)]
    for writer in writers:
        writer.start()
    with open_store(redis_url(), prefix=prefix) as sweeper:
        go.set()
        while any(writer.is_alive() for writer in writers):
            assert sweeper.prune(older_than=timedelta(days=1)) == 0
        for writer in writers:
            writer.join()
        assert sweeper.prune(older_than=timedelta(days=1)) == 0
        assert {info.id for info in sweeper.list_sessions()} == {f"s{n}" for n in again}
    named = audit(client, prefix)
    assert named[blob_key(prefix)[len(prefix) + 5 :]] == {f"s{n}": 1 for n in again}


# --- keys of another program ---------------------------------------------------------------


def test_a_foreign_ledger_refuses_the_append_and_writes_nothing(
    kit: Kit, prefix: str, client: redis_module.Redis
) -> None:
    client.set(f"{prefix}{{s}}:blobs", "not aniki's")
    with pytest.raises(CorruptStoreError, match=r"\{s\}:blobs"):
        kit.opener.driver.add_message(kit.open("s"), with_photo("refused"))
    assert not any(client.exists(key) for key in keys_of(prefix, "s"))
    assert not client.exists(blob_key(prefix))


def test_a_foreign_expiry_set_fails_the_sweep_not_the_writes(
    kit: Kit, prefix: str, client: redis_module.Redis
) -> None:
    client.set(f"{prefix}catalog:expiry", "not aniki's")
    kit.opener.driver.add_message(kit.open("s", ttl=60), with_photo("kept"))
    with pytest.raises(CorruptStoreError, match="catalog:expiry"):
        kit.run(kit.store.prune(older_than=timedelta(days=1)))
    assert kit.opener.driver.get_messages(kit.open("s"))[0].attachments == (PHOTO,)
