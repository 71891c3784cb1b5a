"""AsyncSQLiteSession and AsyncFileSession: the sync stores' semantics, awaited, off the loop.

Locks are held here as another process would hold them: a second SQLite connection inside
``BEGIN IMMEDIATE``, or ``flock`` through a second open file description.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import random
import sqlite3
import threading
import time
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from aniki import Agent, Message, Runner, StoreUnavailableError, UserError, ValidationError
from aniki._threads import LANES
from aniki.sessions import (
    AsyncFileSession,
    AsyncInMemorySession,
    AsyncSQLiteSession,
    EncryptedSession,
    FileSession,
    SQLiteSession,
    SummarizingSession,
    TokenBudgetSession,
    WindowedSession,
)
from aniki.sessions._session_io import blocks
from aniki.sessions.file import _file as file_module
from aniki.sessions.file import _io as file_io
from aniki.sessions.file import _meta as file_meta
from aniki.sessions.policies._summary import SUMMARY_KEY
from aniki.sessions.sqlite import _db as _sqlite_db
from aniki.sessions.sqlite import session as _sqlite_session
from aniki.testing import MockProvider
from aniki.tokens import EstimatingCounter

KINDS = ["sqlite", "file"]
LOCK_TIME = 1.0


def user(text: str) -> Message:
    return Message(role="user", content=text)


def texts(messages: Any) -> list[str]:
    return [m.content for m in messages]


def twin(kind: str, tmp_path: Path, id: str = "s", **options: Any) -> Any:
    if kind == "sqlite":
        return AsyncSQLiteSession(id, tmp_path / "store.db", **options)
    return AsyncFileSession(id, tmp_path / "sessions", **options)


def sync(kind: str, tmp_path: Path, id: str = "s", **options: Any) -> Any:
    if kind == "sqlite":
        return SQLiteSession(id, tmp_path / "store.db", **options)
    return FileSession(id, tmp_path / "sessions", **options)


@contextmanager
def held(kind: str, session: Any, seconds: float) -> Iterator[threading.Event]:
    """Hold the session's write lock now, and let it go after ``seconds`` (from a thread);
    the event is set once it is free again."""
    freed = threading.Event()
    if kind == "sqlite":
        conn = sqlite3.connect(session.path, isolation_level=None, check_same_thread=False)
        conn.execute("BEGIN IMMEDIATE")

        def release() -> None:
            conn.execute("COMMIT")
            conn.close()
            freed.set()
    else:
        fd = os.open(session.path, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_EX)

        def release() -> None:
            os.close(fd)
            freed.set()

    timer = threading.Timer(seconds, release)
    timer.start()
    try:
        yield freed
    finally:
        timer.join()


async def longest_gap(work: Awaitable[Any]) -> tuple[Any, float, float]:
    """Run ``work`` while a probe task ticks every 5 ms; (its outcome, the longest gap
    between two ticks, how long it took). The outcome is the exception when it raised."""
    gaps: list[float] = []
    stop = asyncio.Event()

    async def probe() -> None:
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.005)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticking = asyncio.create_task(probe())
    await asyncio.sleep(0.02)
    started = time.monotonic()
    try:
        outcome: Any = await work
    except Exception as exc:
        outcome = exc
    took = time.monotonic() - started
    stop.set()
    await ticking
    return outcome, max(gaps), took


# --- the store's semantics ------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_round_trips_limits_meta_and_swap(kind: str, tmp_path: Path) -> None:
    async with twin(kind, tmp_path) as session:
        await session.add_message({"role": "user", "content": "one"})
        await session.add_messages([user("two"), Message(role="assistant", content="three")])
        await session.add_messages([])
        assert texts(await session.get_messages()) == ["one", "two", "three"]
        assert texts(await session.get_messages(limit=2)) == ["two", "three"]
        assert await session.get_messages(limit=0) == ()
        assert await session.get_messages(limit=-1) == ()

        await session.set_meta("k", {"b": [1, 2], "a": "x"})
        assert await session.get_meta("k") == {"a": "x", "b": [1, 2]}
        assert await session.get_meta("absent") is None
        assert await session._swap_meta("k", {"a": "x", "b": [1, 2]}, 2) is True
        assert await session._swap_meta("k", {"a": "x"}, 3) is False
        assert await session.get_meta("k") == 2
        assert await session._swap_meta("new", None, "v") is True
        assert await session._swap_meta("new", None, "w") is False
        assert await session._swap_meta("new", "v", None) is True
        assert await session.get_meta("new") is None

        await session.clear()
        assert await session.get_messages() == ()
        assert await session.get_meta("k") is None
        await session.add_message(user("after"))
        assert texts(await session.get_messages()) == ["after"]


@pytest.mark.parametrize("kind", KINDS)
async def test_the_twin_and_the_sync_session_share_one_history(kind: str, tmp_path: Path) -> None:
    session, plain = twin(kind, tmp_path), sync(kind, tmp_path)
    await session.add_message(user("from async"))
    plain.add_message(user("from sync"))
    await session.set_meta("m", 1)
    assert texts(await session.get_messages()) == ["from async", "from sync"]
    assert texts(plain.get_messages()) == ["from async", "from sync"]
    assert plain.get_meta("m") == 1
    plain.clear()
    assert await session.get_messages() == ()  # the cache notices a clear made elsewhere
    await session.aclose()


@pytest.mark.parametrize("kind", KINDS)
async def test_the_fused_append_and_read_is_one_call(kind: str, tmp_path: Path) -> None:
    session = twin(kind, tmp_path)
    assert texts(await session._add_then_get([user("a"), user("b")])) == ["a", "b"]
    assert texts(await session._add_then_get([user("c")], 2)) == ["b", "c"]
    assert texts(await session._add_then_get([])) == ["a", "b", "c"]


async def test_sqlite_replace_swaps_the_whole_history(tmp_path: Path) -> None:
    session = AsyncSQLiteSession("s", tmp_path / "store.db")
    await session.add_messages([user("old"), user("older")])
    await session.set_meta("k", 1)
    await session._replace([user("new")])
    assert texts(await session.get_messages()) == ["new"]
    assert await session.get_meta("k") is None


@pytest.mark.parametrize("kind", KINDS)
async def test_bad_input_is_refused_with_what_to_pass(kind: str, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="empty"):
        twin(kind, tmp_path, id="")
    with pytest.raises(UserError, match="timeout"):
        twin(kind, tmp_path, timeout=-1)
    with pytest.raises(UserError, match="durability"):
        twin(kind, tmp_path, durability="most")
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(UserError, match=r"directory|file"):
        (AsyncSQLiteSession if kind == "sqlite" else AsyncFileSession)(
            "s", tmp_path / "a-file" / "below"
        )
    session = twin(kind, tmp_path)
    await session.add_message(user("kept"))
    with pytest.raises(ValidationError):
        await session.add_messages([user("valid"), {"role": "robot", "content": "x"}])
    with pytest.raises(UserError, match="limit"):
        await session.get_messages(limit="3")
    with pytest.raises(UserError):
        await session.set_meta("k", {1, 2})  # not JSON-safe
    assert texts(await session.get_messages()) == ["kept"]


@pytest.mark.parametrize("kind", KINDS)
async def test_no_store_call_that_may_wait_runs_on_the_event_loop_thread(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite runs a short call on the loop when it can tell it will not wait (see
    # test_sqlite_now.py); at durability "full" every commit waits for the disk, so none can.
    options = {"durability": "full"} if kind == "sqlite" else {}
    threads: set[int] = set()

    def record(owner: Any, name: str) -> None:
        original = getattr(owner, name)

        def recorded(*args: Any, **kwargs: Any) -> Any:
            threads.add(threading.get_ident())
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, recorded)

    if kind == "sqlite":
        for name in ("register", "append", "append_returning", "clear", "close"):
            record(_sqlite_db.Database, name)
        for name in ("read_after", "read_tail", "get_meta", "set_meta", "swap_meta"):
            record(_sqlite_session, name)
    else:
        for name in ("lock", "flock", "write_at"):
            record(file_module, name)
        record(file_meta, "read_meta")
        record(file_io, "replace_file")
    session = twin(kind, tmp_path, **options)
    await session.add_message(user("a"))
    await session.add_messages([user("b"), user("c")])
    await session.get_messages()
    await twin(kind, tmp_path, **options).get_messages(limit=1)
    await session.set_meta("k", 1)
    await session.get_meta("k")
    await session._swap_meta("k", 1, 2)
    await session.clear()
    await session.aclose()
    assert threads and threading.get_ident() not in threads


# --- concurrency ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_many_tasks_on_one_session_lose_nothing_and_keep_batches_whole(
    kind: str, tmp_path: Path
) -> None:
    session = twin(kind, tmp_path)

    async def writer(number: int) -> None:
        for step in range(6):
            if step % 2:
                await session.add_messages([user(f"w{number}:{step}:{part}") for part in range(3)])
            else:
                await session.add_message(user(f"w{number}:{step}:0"))
            await session.get_messages(limit=4)

    await asyncio.gather(*(writer(number) for number in range(30)))
    stored = texts(await session.get_messages())
    assert len(stored) == 30 * (3 * 1 + 3 * 3)
    for number in range(30):
        mine = [text for text in stored if text.startswith(f"w{number}:")]
        assert mine == sorted(mine, key=lambda t: (int(t.split(":")[1]), int(t.split(":")[2])))
        for step in (1, 3, 5):
            first = stored.index(f"w{number}:{step}:0")
            assert stored[first : first + 3] == [f"w{number}:{step}:{part}" for part in range(3)]
    assert texts(sync(kind, tmp_path).get_messages()) == stored


@pytest.mark.parametrize("kind", KINDS)
async def test_a_sync_and_an_async_object_write_one_file_at_once(kind: str, tmp_path: Path) -> None:
    session, plain = twin(kind, tmp_path), sync(kind, tmp_path)

    def sync_writer() -> None:
        for index in range(100):
            plain.add_message(user(f"sync:{index}"))
            if index % 10 == 0:
                plain.get_messages()

    async def async_writer(number: int) -> None:
        for index in range(10):
            await session.add_messages([user(f"a{number}:{index}"), user(f"a{number}:{index}+")])

    thread = threading.Thread(target=sync_writer)
    thread.start()
    await asyncio.gather(*(async_writer(number) for number in range(10)))
    await asyncio.to_thread(thread.join)
    stored = texts(await session.get_messages())
    assert len(stored) == 100 + 10 * 10 * 2
    assert [t for t in stored if t.startswith("sync:")] == [f"sync:{i}" for i in range(100)]
    for number in range(10):
        for index in range(10):
            first = stored.index(f"a{number}:{index}")
            assert stored[first + 1] == f"a{number}:{index}+"
    assert texts(plain.get_messages()) == stored


def test_one_instance_serves_several_event_loops(tmp_path: Path) -> None:
    session = AsyncSQLiteSession("s", tmp_path / "store.db")
    asyncio.run(session.add_message(user("first loop")))

    def other_loop() -> None:
        asyncio.run(session.add_message(user("a loop in another thread")))

    thread = threading.Thread(target=other_loop)
    thread.start()
    thread.join()
    assert texts(asyncio.run(session.get_messages())) == ["first loop", "a loop in another thread"]


# --- the event loop is never blocked -------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_the_loop_keeps_ticking_while_another_holds_the_lock(
    kind: str, tmp_path: Path
) -> None:
    session = twin(kind, tmp_path, timeout=10)
    await session.add_message(user("before"))
    with held(kind, session, LOCK_TIME):
        outcome, gap, took = await longest_gap(session.add_messages([user("x"), user("y")]))
    assert outcome is None
    assert took >= LOCK_TIME * 0.8, took  # it did wait for the lock...
    assert gap < 0.2, gap  # ...and the loop went on meanwhile
    print(f"\n{kind}: waited {took:.3f} s for the lock; the loop's longest gap {gap * 1000:.1f} ms")
    assert texts(await session.get_messages()) == ["before", "x", "y"]


@pytest.mark.parametrize("kind", KINDS)
async def test_timeout_ends_the_wait_with_store_unavailable(kind: str, tmp_path: Path) -> None:
    session = twin(kind, tmp_path, timeout=0.3)
    await session.add_message(user("kept"))
    with held(kind, session, LOCK_TIME) as freed:
        outcome, gap, took = await longest_gap(session.add_message(user("refused")))
        assert isinstance(outcome, StoreUnavailableError), outcome
        assert "timeout=" in str(outcome)
        assert 0.3 <= took < LOCK_TIME, took
        assert gap < 0.2, gap
        await asyncio.to_thread(freed.wait)
    assert texts(await session.get_messages()) == ["kept"]  # nothing of it, and still usable
    await session.add_message(user("after"))
    assert texts(await session.get_messages()) == ["kept", "after"]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_call_that_waits_too_long_for_its_turn_is_dropped(
    kind: str, tmp_path: Path
) -> None:
    session = twin(kind, tmp_path, timeout=0.2)  # a turn may take 1 s (the least)
    await session.add_message(user("kept"))
    LANES.submit(session._lane, lambda: time.sleep(1.5))  # this process, busy on the file
    outcome, gap, took = await longest_gap(session.add_message(user("dropped")))
    assert isinstance(outcome, StoreUnavailableError), outcome
    assert "busy" in str(outcome) and "timeout=" in str(outcome)
    assert 1.0 <= took < 1.5, took
    assert gap < 0.2, gap
    await asyncio.sleep(0.6)  # the lane is free again: the dropped call still never happens
    assert texts(await session.get_messages()) == ["kept"]


# --- cancellation -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_a_cancelled_call_is_whole_or_absent_and_the_session_stays_usable(
    kind: str, tmp_path: Path
) -> None:
    session = twin(kind, tmp_path)
    await session.add_message(user("first"))
    started_batch = [user(f"started {i}") for i in range(50)]
    queued_batch = [user(f"queued {i}") for i in range(50)]
    with held(kind, session, 0.6) as freed:
        started = asyncio.create_task(session.add_messages(started_batch))
        await asyncio.sleep(0.15)  # its thread took it and waits for the lock
        queued = asyncio.create_task(session.add_messages(queued_batch))
        await asyncio.sleep(0.05)
        started.cancel()
        queued.cancel()
        for task in (started, queued):
            with pytest.raises(asyncio.CancelledError):
                await task
        assert not freed.is_set()  # both returned at once, while the lock was still held
        await asyncio.to_thread(freed.wait)
    # The call already started completed whole; the one still queued never happened.
    assert await session.get_messages() == (user("first"), *started_batch)
    await session.add_message(user("after"))
    assert texts(await session.get_messages())[-1] == "after"


@pytest.mark.parametrize("kind", KINDS)
async def test_random_cancellations_never_leave_a_torn_batch(kind: str, tmp_path: Path) -> None:
    session = twin(kind, tmp_path)
    rng = random.Random(7)

    async def writer(number: int) -> None:
        for step in range(5):
            await session.add_messages([user(f"{number}.{step}.{part}") for part in range(4)])

    tasks = [asyncio.create_task(writer(number)) for number in range(20)]
    for _ in range(10):
        await asyncio.sleep(rng.uniform(0, 0.01))
        rng.choice(tasks).cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    stored = texts(await session.get_messages())
    assert len(stored) % 4 == 0
    for start in range(0, len(stored), 4):
        head = stored[start].rsplit(".", 1)[0]
        assert stored[start : start + 4] == [f"{head}.{part}" for part in range(4)]
    assert texts(sync(kind, tmp_path).get_messages()) == stored


# --- what runs over them ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_the_runner_runs_turns_over_the_twin(kind: str, tmp_path: Path) -> None:
    provider = MockProvider()
    provider.enqueue_response(content="Nice to meet you, Lalit!")
    provider.enqueue_response(content="Your name is Lalit.")
    session = twin(kind, tmp_path)
    agent = Agent("Assistant", "Be helpful.", model="mock", provider=provider, session=session)
    runner = Runner()
    await runner.run(agent, message="My name is Lalit.")
    second = await runner.run(agent, message="What's my name?")
    assert len(second.messages) == 4
    assert second.content == "Your name is Lalit."
    assert provider.requests[-1].messages[1:] == second.messages[:-1]
    assert len(sync(kind, tmp_path).get_messages()) == 4

    provider.enqueue_response(content="Still Lalit.")
    stream = runner.stream(agent, message="And now?")
    async for _ in stream:
        pass
    assert stream.result is not None and len(stream.result.messages) == 6


@pytest.mark.parametrize("kind", KINDS)
def test_run_sync_uses_the_twin_from_its_own_loop(kind: str, tmp_path: Path) -> None:
    provider = MockProvider()
    provider.enqueue_response(content="hello")
    session = twin(kind, tmp_path)
    agent = Agent("Assistant", model="mock", provider=provider, session=session)
    result = Runner().run_sync(agent, message="hi")
    assert texts(result.messages) == ["hi", "hello"]


@pytest.mark.parametrize("kind", KINDS)
async def test_policies_over_the_twin_are_async_and_keep_their_state(
    kind: str, tmp_path: Path
) -> None:
    counter = EstimatingCounter()
    summarizer = Agent("Summarizer", model="mock", provider=MockProvider(handler=lambda r: "gist"))
    policies = [
        WindowedSession(twin(kind, tmp_path, "w"), 4),
        TokenBudgetSession(twin(kind, tmp_path, "t"), 60, counter=counter),
        SummarizingSession(twin(kind, tmp_path, "m"), summarizer, 200, counter=counter),
    ]
    for policy in policies:
        assert not blocks(policy)  # awaited on the loop: the twin does its own offloading
        for index in range(12):
            await policy.add_messages(
                [user(f"question {index} " * 3), Message(role="assistant", content="ok " * 5)]
            )
        view = await policy.get_messages()
        assert 0 < len(view) < 24
        stored = sync(kind, tmp_path, policy.id).get_messages()
        assert len(stored) == 24  # the policy never rewrites the history
    summary = await policies[2].inner.get_meta(SUMMARY_KEY)
    assert summary is not None  # the summary is kept in the twin's meta, beside the history


@pytest.mark.parametrize("kind", KINDS)
async def test_encrypted_session_over_the_twin(kind: str, tmp_path: Path) -> None:
    key = EncryptedSession.generate_key()
    sealed = EncryptedSession(twin(kind, tmp_path), key)
    assert not blocks(sealed)
    await sealed.add_messages([user("my card is 4242"), Message(role="assistant", content="ok")])
    await sealed.set_meta("k", {"secret": "yes"})
    assert await sealed._swap_meta("k", {"secret": "yes"}, {"secret": "no"}) is True
    assert texts(await sealed.get_messages()) == ["my card is 4242", "ok"]
    raw = sync(kind, tmp_path).get_messages()
    assert all("4242" not in m.content for m in raw)
    assert texts(EncryptedSession(sync(kind, tmp_path), key).get_messages())[0] == "my card is 4242"


async def test_the_async_memory_session_runs_inline() -> None:
    session = AsyncInMemorySession()
    assert not blocks(session)
    await session.add_messages([user("a"), user("b")])
    assert texts(await session.get_messages(limit=1)) == ["b"]
    assert await session._swap_meta("k", None, 1) is True
    assert await session.get_meta("k") == 1
    assert "messages=2" in repr(session)
    async with AsyncInMemorySession("x") as other:
        assert await other.get_messages() == ()
