"""The plain append-and-read of the Redis store (``_plain.PLAIN_APPEND_READ``: a run's every
write), against the real server: which calls take it, and that it returns and leaves what the
general ``APPEND_READ`` does, with other writers, a clear elsewhere, a tail, a resend and a
moved turn guard."""

from __future__ import annotations

from typing import Any

import pytest
import redis as redis_module

from aniki import Message
from aniki.sessions._guard import HistoryMoved, TurnGuard, guarding
from aniki.sessions.redis import _core as _redis_core
from aniki.sessions.redis import _plain
from aniki.sessions.redis import _scripts as _redis_scripts
from aniki.sessions.redis._attachments import records_and_blobs

from .redis_fixtures import Kit, client, keys_of, kit, prefix
from .test_redis_plain import PHOTO, _state, seeded

__all__ = ["client", "kit", "prefix"]  # fixtures, used by name

pytestmark = pytest.mark.redis


def add_then_get(kit: Kit, session: Any, *texts: str, limit: int | None = None) -> list[str]:
    """The session's fused append-and-read (a run's write) of user messages ``texts``."""
    history = kit.opener.run(session._add_then_get([Message("user", t) for t in texts], limit))
    return [message.content for message in history]


def test_a_runs_writes_take_the_plain_script_and_attachments_the_general_one(kit: Kit) -> None:
    session = kit.open("s")
    assert add_then_get(kit, session, "q1") == ["q1"]
    assert add_then_get(kit, session, "a1") == ["q1", "a1"]
    photo = [Message("user", "look", attachments=(PHOTO,))]
    assert [m.content for m in kit.opener.run(session._add_then_get(photo))] == ["q1", "a1", "look"]
    assert kit.scripts(_plain.PLAIN_APPEND_READ) == 2
    assert kit.scripts(_redis_scripts.APPEND_READ) == 1
    assert kit.opener.read(kit.open("s")) == ["q1", "a1", "look"]


def test_it_reads_what_others_appended_and_starts_over_after_a_clear_elsewhere(kit: Kit) -> None:
    mine, other = kit.open("s"), kit.open("s")
    assert add_then_get(kit, mine, "q1") == ["q1"]
    kit.opener.add(other, "x1", "x2")
    assert add_then_get(kit, mine, "q2") == ["q1", "x1", "x2", "q2"]
    kit.run(other.clear())
    kit.opener.add(other, "fresh")
    assert add_then_get(kit, mine, "q3") == ["fresh", "q3"]
    assert kit.opener.read(mine) == ["fresh", "q3"]  # its cache holds what the script returned
    assert kit.scripts(_plain.PLAIN_APPEND_READ) == 3


def test_a_new_instance_with_a_limit_fetches_only_the_tail(kit: Kit) -> None:
    kit.opener.add(kit.open("s"), *(f"m{n}" for n in range(10)))
    assert add_then_get(kit, kit.open("s"), "new", limit=3) == ["m8", "m9", "new"]
    (step,) = (s for s in kit.steps if getattr(s, "script", None) is _plain.PLAIN_APPEND_READ)
    assert step.args[7] == 3  # the tail size: the script read three records, not eleven


def test_the_plain_script_returns_and_leaves_what_the_general_one_does(
    prefix: str, client: redis_module.Redis
) -> None:
    replies: dict[str, list[Any]] = {}
    for session_id in ("plain", "general"):
        core = seeded(client, prefix, session_id)
        for n in range(3):
            messages = [Message("user", f"q{n}"), Message("assistant", f"a{n}")]
            # The cache as a reader of the first turn leaves it, then the tail of a new one.
            between = [("", 0, 0), (None, 2, 0), ("", 0, 3)][n]
            step = next(core._append_read(messages, 3 if n == 2 else None, None))
            assert isinstance(step, _redis_core.Eval) and step.script is _plain.PLAIN_APPEND_READ
            gen = client.hget(keys_of(prefix, session_id)[1], "gen")
            cached = (gen.decode() if between[0] is None else between[0], *between[1:])
            args = list(step.args)
            args[5:8] = cached
            if session_id == "general":  # the same batch and cache through the general script
                batch = records_and_blobs(messages, apart=True)
                step = _redis_core.Eval(
                    _redis_scripts.APPEND_READ, step.keys, core._append_args(batch, *cached)
                )
                args = list(step.args)
            reply = client.eval(step.script.source, len(step.keys), *step.keys, *args)
            replies.setdefault(session_id, []).append(
                [reply[0], reply[1], reply[3], [r.split(b',"id"')[0] for r in reply[4]]]
            )
    assert replies["plain"] == replies["general"]
    assert [reply[1:3] for reply in replies["plain"]] == [[2, 0], [4, 2], [6, 0]]
    assert [len(reply[3]) for reply in replies["plain"]] == [0, 0, 3]
    assert _state(client, prefix, "plain") == _state(client, prefix, "general")
    assert all(_state(client, prefix, "plain")["ttls"])


def test_a_resent_batch_is_not_applied_again_and_is_read_apart(
    prefix: str, client: redis_module.Redis
) -> None:
    core = _redis_core.RedisCore("r", store="test", prefix=prefix, ttl=None)
    step = next(core._append_read([Message("user", "once")], None, None))
    assert isinstance(step, _redis_core.Eval)
    first = client.eval(step.script.source, len(step.keys), *step.keys, *step.args)
    again = client.eval(step.script.source, len(step.keys), *step.keys, *step.args)
    gen = client.hget(keys_of(prefix, "r")[1], "gen")
    assert first == [0, 1, gen, 0, []]
    assert again == [0, 1, gen, -1, []]  # start -1: the caller reads the history apart
    assert client.llen(keys_of(prefix, "r")[0]) == 1


def test_under_a_moved_turn_guard_it_writes_nothing(
    kit: Kit, prefix: str, client: redis_module.Redis
) -> None:
    session = kit.open("s")
    with guarding(TurnGuard()):
        add_then_get(kit, session, "question")
        add_then_get(kit, session, "answer")  # the gen is the one the first write found
        kit.run(kit.open("s").clear())
        kit.opener.add(kit.open("s"), "new start")  # another instance, unguarded: a new gen
        before = {key: client.dump(key) for key in keys_of(prefix, "s")}
        with pytest.raises(HistoryMoved):
            add_then_get(kit, session, "late reply")
    assert {key: client.dump(key) for key in keys_of(prefix, "s")} == before
    assert kit.opener.read(kit.open("s")) == ["new start"]
    assert kit.scripts(_plain.PLAIN_APPEND_READ) == 3
