"""Commands of many asyncio Redis sessions sent together (``aniki.sessions.redis._batch``),
against the real server, over aniki's own connection and over redis-py's: a burst goes out
together (in pipelines, or in one write) and every session gets its own reply; a command sent
alone goes out alone; an error, ``NOSCRIPT`` included, reaches only the session that sent it;
a call cancelled before its group left is not sent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from aniki import Message
from aniki.errors import CorruptStoreError
from aniki.sessions.redis import AsyncRedisSession, _batch, _wire

from ..servers import redis_url
from .redis_fixtures import prefix

__all__ = ["prefix"]  # fixtures, used by name

pytestmark = pytest.mark.redis


@pytest.fixture(params=["wire", "redis-py"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How the commands go: aniki's own connection, or redis-py's pool and pipelines (what a
    client over TLS, or with a credential provider, uses)."""
    if request.param == "redis-py":
        monkeypatch.setattr(_batch, "wire_settings", lambda client: None)
    return str(request.param)


@pytest.fixture
async def shared(transport: str) -> AsyncIterator[aioredis.Redis]:
    """One client, as a web server's sessions share it."""
    client = aioredis.Redis.from_url(redis_url())
    yield client
    await _batch.close_batcher(client)
    await client.aclose()


def counter(client: aioredis.Redis, monkeypatch: pytest.MonkeyPatch) -> CountedPool | CountedWire:
    """What counts the commands sent, for the transport in use."""
    if _batch.batcher(client)._settings is None:
        return CountedPool(client, monkeypatch)
    return CountedWire(monkeypatch)


class CountedWire:
    """aniki's connection's writes of held commands, by the number each carried, and its
    commands written alone."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.pipelines: list[int] = []
        self.alone = 0
        send, flush = _wire.Wire.send, _wire.Wire._flush

        def counted_send(wire: _wire.Wire, command: tuple[Any, ...]) -> Any:
            if not wire._waiting and not wire._held:
                self.alone += 1
            return send(wire, command)

        def counted_flush(wire: _wire.Wire) -> None:
            going = sum(1 for _, future in wire._held if not future.done())
            if going:
                self.pipelines.append(going)
            flush(wire)

        monkeypatch.setattr(_wire.Wire, "send", counted_send)
        monkeypatch.setattr(_wire.Wire, "_flush", counted_flush)


class CountedPool:
    """The client's pipelines, by the number of commands each carried, and its commands
    sent alone."""

    def __init__(self, client: aioredis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
        self.pipelines: list[int] = []
        self.alone = 0
        make, send = client.pipeline, client.execute_command

        def pipeline(*args: Any, **kwargs: Any) -> Any:
            made = make(*args, **kwargs)
            execute = made.execute

            async def counted(*args: Any, **kwargs: Any) -> Any:
                self.pipelines.append(len(made.command_stack))
                return await execute(*args, **kwargs)

            made.execute = counted  # type: ignore[method-assign]
            return made

        async def alone(*args: Any, **kwargs: Any) -> Any:
            self.alone += 1
            return await send(*args, **kwargs)

        monkeypatch.setattr(client, "pipeline", pipeline)
        monkeypatch.setattr(client, "execute_command", alone)


def _sessions(client: aioredis.Redis, prefix: str, count: int) -> list[AsyncRedisSession]:
    return [AsyncRedisSession(f"c{n}", client=client, prefix=prefix) for n in range(count)]


async def test_a_burst_goes_out_in_pipelines_and_each_session_gets_its_reply(
    shared: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions = _sessions(shared, prefix, 300)
    counted = counter(shared, monkeypatch)
    for turn in range(3):
        await asyncio.gather(*(s.add_message(Message("user", f"{s.id}:{turn}")) for s in sessions))
    assert sum(counted.pipelines) + counted.alone == 900  # every command sent once
    assert counted.alone <= 3 + 3  # the first of each burst; the rest together
    if isinstance(counted, CountedPool):
        assert max(counted.pipelines) <= _batch.LIMIT and len(counted.pipelines) >= 9
    else:  # one write per turn of the loop, whatever its size
        assert 3 <= len(counted.pipelines) <= 6 and max(counted.pipelines) >= 290
    fresh = _sessions(shared, prefix, 300)
    histories = await asyncio.gather(*(s.get_messages() for s in fresh))
    for session, history in zip(fresh, histories, strict=True):
        assert [m.content for m in history] == [f"{session.id}:{t}" for t in range(3)]


async def test_a_command_sent_alone_goes_out_alone(
    shared: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    session, other = _sessions(shared, prefix, 2)
    counted = counter(shared, monkeypatch)
    for n in range(20):
        await session.add_message(Message("user", f"{n}"))
    await other.add_message(Message("user", "x"))
    assert counted.pipelines == [] and counted.alone == 21
    assert len(await session.get_messages()) == 20


async def test_an_error_reaches_only_the_session_that_sent_it(
    shared: aioredis.Redis, prefix: str
) -> None:
    sessions = _sessions(shared, prefix, 40)
    await shared.set(f"{prefix}{{c7}}:msgs", "not a list")  # c7's store is damaged
    results = await asyncio.gather(
        *(s.add_message(Message("user", s.id)) for s in sessions), return_exceptions=True
    )
    failed = {s.id: r for s, r in zip(sessions, results, strict=True) if r is not None}
    assert list(failed) == ["c7"] and isinstance(failed["c7"], CorruptStoreError)
    assert "c7" in str(failed["c7"])
    for session in sessions:
        if session.id != "c7":
            assert [m.content for m in await session.get_messages()] == [session.id]


async def test_a_burst_after_the_scripts_were_flushed_loads_them_again(
    shared: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions = _sessions(shared, prefix, 30)
    await asyncio.gather(*(s.add_message(Message("user", "a")) for s in sessions))
    await shared.script_flush()  # as a restarted server: every EVALSHA answers NOSCRIPT
    counted = counter(shared, monkeypatch)
    await asyncio.gather(*(s.add_message(Message("assistant", "b")) for s in sessions))
    assert counted.pipelines  # NOSCRIPT came back inside a pipeline, to each session
    for session in _sessions(shared, prefix, 30):
        assert [m.content for m in await session.get_messages()] == ["a", "b"]


async def test_a_call_cancelled_before_its_pipeline_left_is_not_sent(
    shared: aioredis.Redis, prefix: str
) -> None:
    batcher = _batch.batcher(shared)
    key = f"{prefix}list"
    busy = asyncio.create_task(batcher.send("BLPOP", f"{prefix}none", 0.2))  # in flight
    await asyncio.sleep(0.05)
    held = asyncio.create_task(batcher.send("RPUSH", key, "x"))
    sent = asyncio.create_task(batcher.send("RPUSH", key, "y"))
    await asyncio.sleep(0)  # both held now; their pipeline leaves on the loop's next turn
    held.cancel()
    assert await sent == 1  # "y" alone: "x" was taken out unsent
    with pytest.raises(asyncio.CancelledError):
        await held
    assert await shared.lrange(key, 0, -1) == [b"y"]
    assert await busy is None


async def test_each_event_loop_has_its_own_batcher(shared: aioredis.Redis) -> None:
    first = _batch.batcher(shared)
    assert _batch.batcher(shared) is first
    other = await asyncio.to_thread(asyncio.run, _made_on_a_loop_of_its_own(shared))
    assert other is not first and other.loop is not first.loop


async def _made_on_a_loop_of_its_own(client: aioredis.Redis) -> _batch.Batcher:
    return _batch.batcher(client)
