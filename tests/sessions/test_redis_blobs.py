"""Attachments on the Redis store, kept apart from their records once per content, against
the real server (sync and async): round trips, one blob for many sends, references released
by undo, clear, replace, prune and delete, reads that fetch only the blobs they return, an
inline record of the previous layout, a missing blob, expiry, and a Redis Cluster's inline
fallback."""

from __future__ import annotations

import base64
import hashlib
import os
from datetime import timedelta
from typing import Any

import pytest
import redis as redis_module

from aniki import Attachment, CorruptStoreError, Message
from aniki._stamps import stamp
from aniki.sessions._codec import encode_message
from aniki.sessions.redis import RedisSession
from aniki.sessions.redis import _core as _redis_core

from ..servers import redis_url
from .redis_fixtures import Kit, client, keys_of, kit, prefix

__all__ = ["client", "kit", "prefix"]  # fixtures, used by name

pytestmark = pytest.mark.redis

IMAGE = os.urandom(200 * 1024)
PHOTO = Attachment("image/png", data=IMAGE, name="photo.png")
PHOTO_HASH = hashlib.sha256(IMAGE).hexdigest()


def with_photo(text: str, photo: Attachment = PHOTO) -> Message:
    return Message("user", text, attachments=(photo,))


def blobs(client: redis_module.Redis, prefix: str) -> dict[str, int]:
    """Each blob key under ``prefix`` (its hash) with its reference count: the records naming
    it, summed over the sessions (a field ``r:<id>`` each)."""
    start = f"{prefix}blob:"
    return {
        key.decode()[len(start) :]: sum(
            int(count) for field, count in client.hgetall(key).items() if field[:2] == b"r:"
        )
        for key in client.scan_iter(match=start + "*")
    }


def size(client: redis_module.Redis, prefix: str) -> int:
    """The bytes Redis holds for every key under ``prefix``."""
    return sum(client.memory_usage(key) or 0 for key in client.scan_iter(match=f"{prefix}*"))


def read(kit: Kit, session_id: str, limit: int | None = None) -> list[Message]:
    messages: list[Message] = kit.opener.driver.get_messages(kit.open(session_id), limit)
    return messages


# --- round trips and dedup -----------------------------------------------------------------


def test_an_attachment_round_trips_with_its_name_and_type(kit: Kit) -> None:
    pdf = Attachment("application/pdf", data=b"%PDF-1.4 tiny", name="r\u00e9sum\u00e9.pdf")
    link = Attachment("image/jpeg", url="https://example.com/cat.jpg")
    kit.run(
        kit.open("s").add_messages(
            [Message("user", "two", attachments=(PHOTO, pdf, link)), Message("assistant", "ok")]
        )
    )
    (first, _) = read(kit, "s")
    assert first.attachments == (PHOTO, pdf, link)
    assert read(kit, "s", limit=2)[0].attachments == (PHOTO, pdf, link)


def test_ten_sends_of_one_image_store_it_once(
    kit: Kit, prefix: str, client: redis_module.Redis
) -> None:
    once, ten = prefix + "once:", prefix + "ten:"
    kit.opener.driver.add_message(kit.open("s", prefix=once), with_photo("look"))
    single = size(client, once)
    session = kit.open("s", prefix=ten)
    for n in range(10):
        kit.opener.driver.add_message(session, with_photo(f"look {n}"))
    assert size(client, ten) <= 1.2 * single, (size(client, ten), single)
    assert list(blobs(client, ten).values()) == [10]
    stored = kit.opener.driver.get_messages(kit.open("s", prefix=ten))
    assert [m.attachments[0].data == IMAGE for m in stored] == [True] * 10


def test_a_read_fetches_only_the_blobs_of_what_it_returns(kit: Kit, prefix: str) -> None:
    other = Attachment("image/png", data=os.urandom(1000))
    writer = kit.open("s")
    kit.run(writer.add_messages([with_photo("old", other), Message("assistant", "a")]))
    kit.run(writer.add_messages([with_photo("new"), Message("assistant", "b")]))
    kit.run(writer.add_messages([Message("user", "plain"), Message("assistant", "c")]))
    kit.steps.clear()
    assert [m.content for m in read(kit, "s", limit=2)] == ["plain", "c"]
    assert not any(isinstance(step, _redis_core.Pipeline) for step in kit.steps)
    kit.steps.clear()
    assert read(kit, "s", limit=4)[0].attachments == (PHOTO,)
    fetches = [step for step in kit.steps if isinstance(step, _redis_core.Pipeline)]
    assert len(fetches) == 1 and len(fetches[0].commands) == 1  # that one blob, nothing more
    assert fetches[0].commands[0][1].endswith(PHOTO_HASH.encode())


# --- references ----------------------------------------------------------------------------


def test_a_blob_goes_with_the_last_session_naming_it(
    kit: Kit, prefix: str, client: redis_module.Redis
) -> None:
    for session_id, owner in (("a", "ann"), ("b", "bo")):
        session = kit.open(session_id)
        kit.run(session.set_info(owner=owner))
        kit.opener.driver.add_message(session, with_photo("look"))
    assert blobs(client, prefix) == {PHOTO_HASH: 2}
    assert kit.run(kit.store.delete_sessions(owner="ann")) == 1
    assert blobs(client, prefix) == {PHOTO_HASH: 1}
    assert read(kit, "b")[0].attachments == (PHOTO,)
    assert kit.run(kit.store.prune(older_than=timedelta(microseconds=1))) == 1
    assert blobs(client, prefix) == {}


def test_undo_clear_replace_and_fork_count_their_references(
    kit: Kit, prefix: str, client: redis_module.Redis
) -> None:
    session = kit.open("s")
    kit.run(session.add_messages([with_photo("one"), Message("assistant", "1")]))
    kit.run(session.add_messages([with_photo("two"), Message("assistant", "2")]))
    assert blobs(client, prefix) == {PHOTO_HASH: 2}
    undone = kit.run(session.undo())
    assert undone[0].attachments == (PHOTO,)  # the bytes come back with the turn
    assert blobs(client, prefix) == {PHOTO_HASH: 1}
    child = kit.run(session.fork("child"))
    kit.opener._opened.append(child)
    assert blobs(client, prefix) == {PHOTO_HASH: 2}
    kit.run(session._replace([Message("user", "text only")]))
    assert blobs(client, prefix) == {PHOTO_HASH: 1}
    assert read(kit, "child")[0].attachments == (PHOTO,)
    kit.run(session._replace([with_photo("again")]))
    assert blobs(client, prefix) == {PHOTO_HASH: 2}
    kit.run(child.clear())
    kit.run(session.undo())
    assert blobs(client, prefix) == {}
    assert not client.exists(f"{prefix}{{s}}:blobs")  # the ledger goes with the last blob


def test_a_resent_append_counts_its_blob_once(prefix: str, client: redis_module.Redis) -> None:
    core = _redis_core.RedisCore("resent", store="test", prefix=prefix, ttl=None)
    step = next(core.append(stamp([with_photo("once")])))
    assert isinstance(step, _redis_core.Eval)
    for _ in range(2):  # as redis-py resends a command whose reply was lost
        client.eval(step.script.source, len(step.keys), *step.keys, *step.args)
    assert blobs(client, prefix) == {PHOTO_HASH: 1}


# --- the previous layout, damage, clients, expiry ------------------------------------------


def test_an_inline_record_of_the_previous_layout_still_reads(
    kit: Kit, prefix: str, client: redis_module.Redis
) -> None:
    (message,) = stamp([with_photo("inline")])
    record = encode_message(message)
    assert base64.b64encode(IMAGE).decode()[:40] in record
    client.rpush(keys_of(prefix, "old")[0], record)
    assert read(kit, "old")[0].attachments == (PHOTO,)


def test_a_missing_blob_is_a_corrupt_store_that_shows_no_bytes(
    kit: Kit, prefix: str, client: redis_module.Redis
) -> None:
    secret = Attachment("image/png", data=b"SECRET-BYTES-" * 10)
    kit.opener.driver.add_message(kit.open("s"), with_photo("look", secret))
    for key in client.scan_iter(match=f"{prefix}blob:*"):
        client.delete(key)
    with pytest.raises(CorruptStoreError, match="missing from the store") as caught:
        read(kit, "s")
    text = str(caught.value)
    assert prefix in text and "SECRET" not in text and "U0VDUkVU" not in text


def test_a_client_that_decodes_responses_reads_attachments(prefix: str) -> None:
    client = redis_module.Redis.from_url(redis_url(), decode_responses=True)
    try:
        with RedisSession("s", prefix=prefix, client=client) as session:
            session.add_message(with_photo("look"))
        with RedisSession("s", prefix=prefix, client=client) as session:
            assert session.get_messages()[0].attachments == (PHOTO,)
            assert session.undo()[0].attachments == (PHOTO,)
    finally:
        client.close()


def test_a_blob_lives_as_long_as_the_sessions_naming_it(
    kit: Kit, prefix: str, client: redis_module.Redis
) -> None:
    key = f"{prefix}blob:{PHOTO_HASH}"
    short = kit.open("short", ttl=60)
    kit.opener.driver.add_message(short, with_photo("look"))
    assert 0 < client.pttl(key) <= 60_000
    client.pexpire(key, 1_000)
    kit.opener.add(short, "later")  # a write of the session keeps its blobs alive
    assert client.pttl(key) > 50_000
    kit.opener.driver.add_message(kit.open("kept"), with_photo("mine too"))
    assert client.pttl(key) == -1  # a session without expiry names it now


def test_on_a_cluster_attachments_stay_inline(prefix: str, client: redis_module.Redis) -> None:
    core = _redis_core.RedisCore("c", store="test", prefix=prefix, ttl=None, indexed=False)
    step: Any = next(core.append(stamp([with_photo("inline")])))
    client.eval(step.script.source, len(step.keys), *step.keys, *step.args)
    assert blobs(client, prefix) == {}
    with RedisSession("c", redis_url(), prefix=prefix) as session:
        assert session.get_messages()[0].attachments == (PHOTO,)


def test_a_foreign_blob_key_refuses_the_append_and_writes_nothing(
    kit: Kit, prefix: str, client: redis_module.Redis
) -> None:
    client.set(f"{prefix}blob:{PHOTO_HASH}", "not aniki's")
    with pytest.raises(CorruptStoreError, match="blob:"):
        kit.opener.driver.add_message(kit.open("s"), with_photo("refused"))
    assert not any(client.exists(key) for key in keys_of(prefix, "s"))
