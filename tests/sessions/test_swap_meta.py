"""``_swap_meta``: compare-and-swap of one meta value, on every built-in store.

It sets meta[key] = value only when the stored value equals ``expected`` (as JSON: same
types and values, any key order; ``None`` means absent), and says whether it did. Several
threads, instances and processes racing on one key: exactly one swap of a given expected
value wins, and a counter advanced by compare-and-swap loses no step.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from aniki import UserError
from aniki.sessions import (
    AsyncPostgresSession,
    AsyncRedisSession,
    FileSession,
    InMemorySession,
    PostgresSession,
    RedisSession,
    SQLiteSession,
)
from tests.servers import (
    delete_redis_prefix,
    drop_postgres_tables,
    postgres_dsn,
    redis_url,
    unique_name,
)

Factory = Callable[[], Any]


@pytest.fixture(params=["memory", "sqlite", "file", "redis", "postgres"])
def factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Factory]:
    """Opens the same session again (the in-memory one is the same instance)."""
    if request.param == "memory":
        session = InMemorySession("s")
        yield lambda: session
    elif request.param == "sqlite":
        yield lambda: SQLiteSession("s", tmp_path / "chat.db")
    elif request.param == "file":
        yield lambda: FileSession("s", tmp_path / "chats")
    elif request.param == "redis":
        url, prefix = redis_url(), unique_name("swap") + ":"
        yield lambda: RedisSession("s", url, prefix=prefix)
        delete_redis_prefix(prefix)
    else:
        dsn, table = postgres_dsn(), unique_name("swap")
        yield lambda: PostgresSession("s", dsn, table=table)
        drop_postgres_tables(table)


def test_an_absent_key_is_expected_as_none(factory: Factory) -> None:
    session = factory()
    assert session._swap_meta("k", None, {"v": 1}) is True
    assert factory().get_meta("k") == {"v": 1}
    assert session._swap_meta("k", None, {"v": 2}) is False  # no longer absent
    assert factory().get_meta("k") == {"v": 1}


def test_a_swap_happens_only_from_the_expected_value(factory: Factory) -> None:
    session = factory()
    session.set_meta("k", 1)
    assert session._swap_meta("k", 2, 3) is False
    assert factory().get_meta("k") == 1
    assert session._swap_meta("k", 1, 3) is True
    assert factory().get_meta("k") == 3
    assert session._swap_meta("other", None, "x") is True  # keys are independent
    assert factory().get_meta("k") == 3


def test_none_as_the_new_value_deletes(factory: Factory) -> None:
    session = factory()
    session.set_meta("k", "v")
    assert session._swap_meta("k", "v", None) is True
    assert factory().get_meta("k") is None
    assert session._swap_meta("k", None, None) is True  # absent stays absent: it matched


def test_values_are_compared_as_json(factory: Factory) -> None:
    session = factory()
    session.set_meta("k", {"a": [1, 2], "b": {"x": None, "y": "é"}})
    assert session._swap_meta("k", {"b": {"y": "é", "x": None}, "a": [1, 2]}, "reordered")
    session.set_meta("k", [1, 2])
    assert session._swap_meta("k", (1, 2), "a tuple is a JSON array") is True
    for stored, other in [(1, 1.0), (1, True), (0, False), ("1", 1), ([], {})]:
        session.set_meta("k", stored)
        assert session._swap_meta("k", other, "no") is False, (stored, other)
        assert factory().get_meta("k") == stored
        assert session._swap_meta("k", stored, "yes") is True


def test_bad_arguments_are_user_errors_and_change_nothing(factory: Factory) -> None:
    session = factory()
    session.set_meta("k", 1)
    with pytest.raises(UserError, match="JSON-safe"):
        session._swap_meta("k", 1, object())
    with pytest.raises(UserError, match="JSON-safe"):
        session._swap_meta("k", float("nan"), 2)
    with pytest.raises(UserError, match="meta key"):
        session._swap_meta("", None, 1)
    assert factory().get_meta("k") == 1


def test_a_stored_value_is_a_copy_as_json_keeps_it(factory: Factory) -> None:
    session = factory()
    value = {"kept": [1, 2], "pair": (3, 4)}
    assert session._swap_meta("k", None, value) is True
    value["kept"].append(99)  # changing the object passed in changes nothing stored
    assert factory().get_meta("k") == {"kept": [1, 2], "pair": [3, 4]}
    session.set_meta("j", value)
    value["kept"].append(100)
    assert factory().get_meta("j") == {"kept": [1, 2, 99], "pair": [3, 4]}
    with pytest.raises(UserError, match="JSON-safe"):
        session.set_meta("j", {1, 2})  # every store refuses what JSON cannot hold


def test_clear_drops_what_a_swap_expected(factory: Factory) -> None:
    session = factory()
    session.set_meta("k", 1)
    session.clear()
    assert session._swap_meta("k", 1, 2) is False
    assert factory().get_meta("k") is None


def test_threads_racing_on_one_key_lose_no_step(factory: Factory) -> None:
    threads, steps = 6, 40
    wins: list[int] = []
    factory()._swap_meta("n", None, 0)

    def advance() -> None:
        session = factory()  # an instance per thread (the in-memory one is shared)
        for _ in range(steps):
            while True:
                current = session.get_meta("n")
                if session._swap_meta("n", current, current + 1):
                    wins.append(current)
                    break

    workers = [threading.Thread(target=advance) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert factory().get_meta("n") == threads * steps
    assert sorted(wins) == list(range(threads * steps))  # each value was swapped from once


# --- processes --------------------------------------------------------------------------------

PROCESSES = 6
STEPS = 25


def _open(kind: str, place: str) -> Any:
    """The session ``s`` of ``kind``; ``place`` is a folder, a Redis prefix or a table."""
    if kind == "sqlite":
        return SQLiteSession("s", Path(place) / "chat.db", timeout=30)
    if kind == "redis":
        return RedisSession("s", redis_url(), prefix=place)
    if kind == "postgres":
        return PostgresSession("s", postgres_dsn(), table=place)
    return FileSession("s", Path(place) / "chats")


@pytest.fixture
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where the processes of the test's ``kind`` meet."""
    kind = request.node.callspec.params["kind"]
    if kind == "redis":
        prefix = unique_name("swap") + ":"
        yield prefix
        delete_redis_prefix(prefix)
    elif kind == "postgres":
        table = unique_name("swap")
        yield table
        drop_postgres_tables(table)
    else:
        yield str(tmp_path)


def _race_once(kind: str, place: str, barrier: Any, results: Any) -> None:
    session = _open(kind, place)
    barrier.wait()
    results.put((os.getpid(), session._swap_meta("owner", None, os.getpid())))


def _count(kind: str, place: str, barrier: Any, results: Any) -> None:
    session = _open(kind, place)
    barrier.wait()
    won: list[int] = []
    for _ in range(STEPS):
        while True:
            current = session.get_meta("n")
            if session._swap_meta("n", current, current + 1):
                won.append(current)
                break
    results.put(won)


def _run_processes(target: Any, kind: str, place: str) -> list[Any]:
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(PROCESSES)
    results = context.Queue()
    workers = [
        context.Process(target=target, args=(kind, str(place), barrier, results))
        for _ in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    found = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    return found


needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


SHARED = ["sqlite", "file", "redis", "postgres"]


@needs_fork
@pytest.mark.parametrize("kind", SHARED)
def test_processes_racing_for_one_expected_value_have_one_winner(kind: str, place: str) -> None:
    for _ in range(3):
        _open(kind, place).set_meta("owner", None)
        outcomes = _run_processes(_race_once, kind, place)
        winners = [pid for pid, won in outcomes if won]
        assert len(winners) == 1
        assert _open(kind, place).get_meta("owner") == winners[0]


@needs_fork
@pytest.mark.parametrize("kind", SHARED)
def test_processes_advancing_a_counter_lose_no_step(kind: str, place: str) -> None:
    _open(kind, place).set_meta("n", 0)
    won = [value for values in _run_processes(_count, kind, place) for value in values]
    assert sorted(won) == list(range(PROCESSES * STEPS))
    assert _open(kind, place).get_meta("n") == PROCESSES * STEPS


# --- the async server stores ------------------------------------------------------------------


@pytest.fixture(params=["async_redis", "async_postgres"])
def async_factory(request: pytest.FixtureRequest) -> Iterator[Factory]:
    if request.param == "async_redis":
        url, prefix = redis_url(), unique_name("swap") + ":"
        yield lambda: AsyncRedisSession("s", url, prefix=prefix)
        delete_redis_prefix(prefix)
    else:
        dsn, table = postgres_dsn(), unique_name("swap")
        yield lambda: AsyncPostgresSession("s", dsn, table=table)
        drop_postgres_tables(table)


async def test_an_async_swap_keeps_the_same_rules(async_factory: Factory) -> None:
    session = async_factory()
    assert await session._swap_meta("k", None, {"a": 1, "b": [2]}) is True
    assert await session._swap_meta("k", None, "again") is False
    assert await session._swap_meta("k", {"b": [2], "a": 1.0}, "float") is False
    assert await session._swap_meta("k", {"b": [2], "a": 1}, "reordered") is True
    assert await async_factory().get_meta("k") == "reordered"
    assert await session._swap_meta("k", "reordered", None) is True
    assert await async_factory().get_meta("k") is None
    with pytest.raises(UserError, match="JSON-safe"):
        await session._swap_meta("k", None, object())


async def test_async_tasks_advancing_a_counter_lose_no_step(async_factory: Factory) -> None:
    tasks, steps = 4, 15
    await async_factory().set_meta("n", 0)
    wins: list[int] = []

    async def advance() -> None:
        session = async_factory()  # its own instance, so its own connection
        for _ in range(steps):
            while True:
                current = await session.get_meta("n")
                if await session._swap_meta("n", current, current + 1):
                    wins.append(current)
                    break

    await asyncio.gather(*(advance() for _ in range(tasks)))
    assert sorted(wins) == list(range(tasks * steps))
    assert await async_factory().get_meta("n") == tasks * steps


def test_a_value_stored_in_another_key_order_is_swapped_from(factory: Factory) -> None:
    # The servers compare exact texts: a value written with its keys in another order (by an
    # older writer, or by hand) still matches the same JSON value.
    session = factory()
    session.set_meta("k", {"b": 1, "a": {"y": 2, "x": 3}})
    assert session._swap_meta("k", {"a": {"x": 3, "y": 2}, "b": 1}, "done") is True
    assert factory().get_meta("k") == "done"
