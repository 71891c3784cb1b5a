"""``fork`` and ``undo`` on RedisSession and AsyncRedisSession against the real Redis server,
when the connection fails them: a resend of the same script is applied once, a reply lost
after the write is not applied twice, and a hung server is given up on after the timeout."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis as redis_module

from aniki import StoreUnavailableError
from aniki.sessions.redis import RedisSession
from aniki.sessions.redis import _core as _redis_core
from aniki.sessions.redis import _edit_scripts as _redis_scripts
from aniki.sessions.redis import _edits as _redis_edits

from ..reliability.tcp_proxy import TcpProxy
from ..servers import redis_url
from .redis_fixtures import client, contents, fork, prefix, store, turn
from .stores import Opener

__all__ = ["client", "prefix", "store"]  # fixtures, used by name

pytestmark = pytest.mark.redis


# --- resends and bounded waits -------------------------------------------------------------


def test_a_resent_undo_or_fork_is_applied_once(prefix: str, client: redis_module.Redis) -> None:
    """redis-py resends a command whose reply was lost: the same script, same token, twice."""
    source = _redis_core.RedisCore("s", store="test", prefix=prefix, ttl=None)
    with RedisSession("s", redis_url(), prefix=prefix) as session:
        session.add_messages([*turn(0), *turn(1)])

    def twice(step: Any) -> list[Any]:
        assert isinstance(step, _redis_core.Eval)
        return [
            client.eval(step.script.source, len(step.keys), *step.keys, *step.args) for _ in "12"
        ]

    first, again = twice(next(_redis_edits.undo(source)))
    assert [int(first[0]), int(again[0])] == [0, 1]
    target = _redis_core.RedisCore("t", store="test", prefix=prefix, ttl=None)
    first, again = twice(next(_redis_edits.fork(source, target, None, split=False)))
    assert [int(first[0]), int(again[0])] == [0, 1]
    steps = _redis_edits.fork(
        source, _redis_core.RedisCore("u", store="test", prefix=prefix, ttl=None), None, split=True
    )
    read = next(steps)
    assert isinstance(read, _redis_core.Eval) and read.script is _redis_scripts.FORK_SOURCE
    write = steps.send(client.eval(read.script.source, len(read.keys), *read.keys, *read.args))
    assert isinstance(write, _redis_core.Eval) and write.script is _redis_scripts.FORK_TARGET
    first, again = twice(write)
    assert [int(first[0]), int(again[0])] == [0, 1]
    for session_id in ("s", "t", "u"):
        with RedisSession(session_id, redis_url(), prefix=prefix) as reader:
            assert contents(reader.get_messages()) == ["q0", "a0"]


def through(proxy: TcpProxy) -> str:
    return f"redis://127.0.0.1:{proxy.port}{urlsplit(redis_url()).path or '/0'}"


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    parts = urlsplit(redis_url())
    with TcpProxy(parts.hostname or "127.0.0.1", parts.port or 6379) as running:
        yield running


def test_a_reply_lost_after_an_undo_or_a_fork_is_not_applied_twice(
    store: Opener, proxy: TcpProxy
) -> None:
    session = store.open("lost", url=through(proxy))
    store.call(session, "add_messages", [*turn(0), *turn(1), *turn(2)])
    proxy.drop_next_reply()
    with pytest.raises(StoreUnavailableError, match="removed \\(once\\)"):
        store.call(session, "undo")
    assert proxy.dropped == 1
    assert store.read(session) == ["q0", "a0", "q1", "a1"]
    proxy.drop_next_reply()
    child = fork(store, session, "lost-child", split=False)
    assert proxy.dropped == 2
    assert store.read(child) == store.read(store.open("lost-child")) == ["q0", "a0", "q1", "a1"]
    assert contents(store.call(session, "undo")) == ["q1", "a1"]


@pytest.mark.parametrize("operation", ["undo", "fork", "fork in two steps"])
def test_a_hung_server_bounds_fork_and_undo_by_the_timeout(
    store: Opener, proxy: TcpProxy, operation: str
) -> None:
    session = store.open("hung", url=through(proxy), timeout=0.5)
    store.add(session, "kept")
    proxy.freeze()
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError, match="timeout="):
        if operation == "undo":
            store.call(session, "undo")
        else:
            fork(store, session, "hung-child", split=operation != "fork")
    assert time.monotonic() - started < 0.5 + 1.5
    proxy.thaw()
    # A write that gave up may still land once the server answers again: the undo, whole.
    expected = ([], ["kept"]) if operation == "undo" else (["kept"],)
    assert store.read(session) in expected
