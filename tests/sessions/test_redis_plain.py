"""The plain append of the Redis store (``_plain``), against the real server: which appends take
it, and that it leaves what the general append script leaves: the info, the catalog's sets,
the expiry of every key and of the blobs named before, the ledger of a session whose records
expired, the resend guard and the turn guard."""

from __future__ import annotations

import hashlib
import os
from typing import Any

import pytest
import redis as redis_module

from aniki import Attachment, Message
from aniki.sessions._guard import HistoryMoved, TurnGuard, guarding
from aniki.sessions.redis import _core as _redis_core
from aniki.sessions.redis import _plain
from aniki.sessions.redis import _scripts as _redis_scripts
from aniki.sessions.redis._attachments import records_and_blobs

from .redis_fixtures import Kit, client, keys_of, kit, prefix

__all__ = ["client", "kit", "prefix"]  # fixtures, used by name

pytestmark = pytest.mark.redis

PHOTO = Attachment("image/png", data=os.urandom(512), name="photo.png")


def blob_key(prefix: str) -> str:
    return f"{prefix}blob:{hashlib.sha256(PHOTO.data or b'').hexdigest()}"


def test_text_takes_the_plain_script_and_attachments_the_general_one(kit: Kit) -> None:
    session = kit.open("s")
    kit.opener.add(session, "hi")
    kit.opener.driver.add_message(session, Message("user", "look", attachments=(PHOTO,)))
    kit.opener.add(session, "and?")
    assert kit.scripts(_plain.PLAIN_APPEND) == 2
    assert kit.scripts(_redis_scripts.APPEND) == 1
    assert kit.opener.read(kit.open("s")) == ["hi", "look", "and?"]


def _state(client: redis_module.Redis, prefix: str, session_id: str) -> dict[str, Any]:
    """What an append leaves, without its times and tokens."""
    msgs, info, meta, batches = keys_of(prefix, session_id)
    fields = client.hgetall(info)
    catalog = f"{prefix}catalog:"
    timeless = {k: v for k, v in fields.items() if k not in (b"gen", b"updated_at", b"created_at")}
    return {
        "records": [r.split(b',"id"')[0] for r in client.lrange(msgs, 0, -1)],
        "info": timeless,
        "times": fields[b"updated_at"] >= fields[b"created_at"],
        "sets": [
            client.zscore(catalog + name, session_id) == float(fields[b"updated_at"])
            for name in ("all", "owner:ann", "tag:t")
        ],
        "expiry": client.zscore(catalog + "expiry", session_id) is not None,
        "ttls": [0 < client.pttl(key) <= 60_000 for key in (msgs, info, meta, batches)],
        "tokens": client.zcard(batches),
    }


def seeded(client: redis_module.Redis, prefix: str, session_id: str) -> _redis_core.RedisCore:
    """The core of a session with a ttl whose meta and info (an owner, a tag) are set, so that
    an append keeps their expiry and the catalog's sets in step."""
    client.hset(keys_of(prefix, session_id)[2], "k", '"v"')  # meta, for its ttl
    client.hset(keys_of(prefix, session_id)[1], mapping={"owner": "ann", "tags": '["t"]'})
    return _redis_core.RedisCore(session_id, store="test", prefix=prefix, ttl=60)


def test_the_plain_script_leaves_what_the_general_one_leaves(
    prefix: str, client: redis_module.Redis
) -> None:
    for session_id in ("plain", "general"):
        core = seeded(client, prefix, session_id)
        for n in range(3):
            messages = [Message("user", f"q{n}"), Message("assistant", f"a{n}")]
            step = next(core.append(messages))
            assert isinstance(step, _redis_core.Eval) and step.script is _plain.PLAIN_APPEND
            if session_id == "general":  # the same batch through the general script
                batch = records_and_blobs(messages, apart=True)
                step = _redis_core.Eval(_redis_scripts.APPEND, step.keys, core._append_args(batch))
            reply = client.eval(step.script.source, len(step.keys), *step.keys, *step.args)
            assert reply[0] == 0 and reply[1] == 2 * n + 2
    assert _state(client, prefix, "plain") == _state(client, prefix, "general")
    assert _state(client, prefix, "plain")["sets"] == [True, True, True]
    assert all(_state(client, prefix, "plain")["ttls"])


def test_a_plain_append_refreshes_the_expiry_of_the_blobs_named_before(
    kit: Kit, prefix: str, client: redis_module.Redis
) -> None:
    session = kit.open("s", ttl=60)
    kit.opener.driver.add_message(session, Message("user", "look", attachments=(PHOTO,)))
    client.pexpire(blob_key(prefix), 1_000)
    client.pexpire(keys_of(prefix, "s")[0], 1_000)
    kit.opener.add(session, "and?")
    assert kit.scripts(_plain.PLAIN_APPEND) == 1
    assert client.pttl(blob_key(prefix)) > 50_000
    msgs, info, _, batches = keys_of(prefix, "s")  # no meta was written
    assert all(client.pttl(key) > 50_000 for key in (msgs, info, batches))
    assert client.hget(blob_key(prefix), "r:s") == b"1"


def test_a_plain_append_after_the_records_expired_releases_what_they_named(
    kit: Kit, prefix: str, client: redis_module.Redis
) -> None:
    session = kit.open("s")
    kit.opener.driver.add_message(session, Message("user", "look", attachments=(PHOTO,)))
    client.delete(*keys_of(prefix, "s"))  # as the ttl would: the ledger outlives them
    assert client.sismember(f"{prefix}{{s}}:blobs", blob_key(prefix)[len(prefix) + 5 :])
    kit.opener.add(kit.open("s"), "again")
    assert kit.scripts(_plain.PLAIN_APPEND) == 1
    assert not client.exists(blob_key(prefix), f"{prefix}{{s}}:blobs")
    assert kit.opener.read(kit.open("s")) == ["again"]
    assert [(info.id, info.message_count) for info in kit.list()] == [("s", 1)]


def test_a_plain_append_under_a_moved_turn_guard_writes_nothing(
    kit: Kit, prefix: str, client: redis_module.Redis
) -> None:
    session = kit.open("s")
    with guarding(TurnGuard()):
        kit.opener.add(session, "question")
        kit.opener.add(session, "answer")  # the gen is the one the first write found
        kit.run(kit.open("s").clear())
        kit.opener.add(kit.open("s"), "new start")  # another instance, unguarded: a new gen
        before = {key: client.dump(key) for key in keys_of(prefix, "s")}
        with pytest.raises(HistoryMoved):
            kit.opener.add(session, "late reply")
    assert {key: client.dump(key) for key in keys_of(prefix, "s")} == before
    assert kit.opener.read(kit.open("s")) == ["new start"]
    assert kit.scripts(_plain.PLAIN_APPEND) == 4


def test_a_resent_plain_append_reports_the_count_and_gen_it_made(
    prefix: str, client: redis_module.Redis
) -> None:
    core = _redis_core.RedisCore("r", store="test", prefix=prefix, ttl=None)
    step = next(core.append([Message("user", "once")]))
    assert isinstance(step, _redis_core.Eval)
    first = client.eval(step.script.source, len(step.keys), *step.keys, *step.args)
    again = client.eval(step.script.source, len(step.keys), *step.keys, *step.args)
    assert first == again == [0, 1, client.hget(keys_of(prefix, "r")[1], "gen")]
    assert client.llen(keys_of(prefix, "r")[0]) == 1
