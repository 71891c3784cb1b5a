"""undo() through EncryptedSession while other instances append, on every persistent store:
an instance that read the tail before the undo appends after it and every instance still reads
the whole history; appends racing undos leave a history every reader reads, in which nothing
acknowledged is lost, duplicated or brought back."""

from __future__ import annotations

import asyncio
import itertools
import json
import multiprocessing
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aniki import Agent, Message, Runner, TurnUndoneError
from aniki.sessions import EncryptedSession
from aniki.testing import MockProvider

from ..policies.stores import Store, make_store, resolve

KINDS = [
    "sqlite",
    "async_sqlite",
    "file",
    "async_file",
    pytest.param("redis", marks=pytest.mark.redis),
    pytest.param("async_redis", marks=pytest.mark.redis),
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("async_postgres", marks=pytest.mark.postgres),
]

KEY = EncryptedSession.generate_key()
TURNS = [
    Message("user", "my card ends in 4242"),
    Message("assistant", "noted"),
    Message("user", "and my address?"),
    Message("assistant", "not given yet"),
]


@pytest.fixture(params=KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    opened = make_store(request.param, tmp_path)
    yield opened
    await opened.close()


def sealed(store: Store, session_id: str) -> EncryptedSession[Any]:
    """A new encrypted instance over a new instance of the inner store (its own cache and,
    for a server, its own connection)."""
    return EncryptedSession(store.open(session_id), KEY)


async def call(store: Store, work: Callable[[], Any]) -> Any:
    """``work()`` awaited, in a thread for a sync store so that calls of several tasks overlap."""
    if store.kind.startswith("async_"):
        return await work()
    return await asyncio.to_thread(work)


def texts(messages: Any) -> list[str]:
    return [m.content for m in messages]


def replying(prefix: str) -> MockProvider:
    """A provider whose every reply is new text: ``<prefix> r0``, ``<prefix> r1``..."""
    count = itertools.count()
    return MockProvider(handler=lambda request: f"{prefix} r{next(count)}")


async def every_instance_reads(store: Store, session_id: str, *instances: Any) -> list[str]:
    """The history as each instance and a fresh one read it (whole and limited), all equal."""
    fresh = sealed(store, session_id)
    whole = texts(await resolve(fresh.get_messages()))
    for instance in (*instances, fresh, sealed(store, session_id)):
        assert texts(await resolve(instance.get_messages())) == whole
        for limit in (1, 2, 5):
            assert texts(await resolve(instance.get_messages(limit=limit))) == whole[-limit:]
    return whole


async def test_an_instance_that_read_before_an_undo_appends_after_it(store: Store) -> None:
    writer, undoer = sealed(store, "chat"), sealed(store, "chat")
    await resolve(writer.add_messages(TURNS))
    assert await resolve(writer.get_messages()) == tuple(TURNS)  # the writer saw the old tail
    assert await resolve(undoer.undo()) == tuple(TURNS[2:])
    agent = Agent("Helper", model="mock", provider=replying("answer"))
    result = await Runner().run(agent, message="and my name?", session=writer)
    assert texts(result.messages) == [*texts(TURNS[:2]), "and my name?", "answer r0"]
    history = await every_instance_reads(store, "chat", writer, undoer)
    assert history == texts(result.messages)

    # The same with plain appends, from an instance that read the tail before a second undo.
    assert texts(await resolve(undoer.undo())) == ["and my name?", "answer r0"]
    await resolve(writer.add_message(Message("user", "once more")))
    await resolve(writer.add_messages([Message("assistant", "a"), Message("assistant", "b")]))
    history = await every_instance_reads(store, "chat", writer, undoer)
    assert history == [*texts(TURNS[:2]), "once more", "a", "b"]


async def test_an_undo_that_empties_the_session_leaves_it_writable(store: Store) -> None:
    writer, undoer = sealed(store, "empty"), sealed(store, "empty")
    await resolve(writer.add_messages(TURNS[:2]))
    assert await resolve(writer.get_messages()) == tuple(TURNS[:2])
    assert await resolve(undoer.undo()) == tuple(TURNS[:2])
    agent = Agent("Helper", model="mock", provider=replying("answer"))
    await Runner().run(agent, message="a fresh start", session=writer)
    history = await every_instance_reads(store, "empty", writer, undoer)
    assert history == ["a fresh start", "answer r0"]


WRITERS = 3
TURNS_EACH = 30


async def test_appends_racing_undos_lose_nothing_and_stay_readable(store: Store) -> None:
    writers = [sealed(store, "race") for _ in range(WRITERS)]
    undoer, reader = sealed(store, "race"), sealed(store, "race")
    acknowledged: list[str] = []
    undone: list[str] = []
    done = asyncio.Event()

    async def write(number: int) -> None:
        session = writers[number]
        agent = Agent("Helper", model="mock", provider=replying(f"w{number}"))
        for turn in range(TURNS_EACH):
            question = f"w{number} q{turn}"
            if turn % 3 == 2:  # now and then without the Runner, a batch of two
                batch = [Message("user", question), Message("assistant", f"{question} a")]
                await call(store, lambda batch=batch: session.add_messages(batch))
                acknowledged.extend(texts(batch))
                continue
            try:
                result = await Runner().run(agent, message=question, session=session)
            except TurnUndoneError:  # the question was undone mid-run: its reply not stored
                acknowledged.append(question)
                continue
            acknowledged.extend([question, result.content])

    async def undo_until_done() -> None:
        while not done.is_set():
            undone.extend(texts(await call(store, undoer.undo)))
            await asyncio.sleep(0.001)

    async def read_until_done() -> None:
        while not done.is_set():  # every read in the middle of the race succeeds too
            await call(store, reader.get_messages)
            await call(store, lambda: reader.get_messages(limit=3))

    async def writing() -> None:
        try:
            await asyncio.gather(*(write(number) for number in range(WRITERS)))
        finally:
            done.set()

    await asyncio.wait_for(asyncio.gather(writing(), undo_until_done(), read_until_done()), 120)
    history = await every_instance_reads(store, "race", *writers, undoer, reader)
    assert undone  # the undos did race the appends
    assert len(set(history)) == len(history)  # nothing twice
    assert len(set(undone)) == len(undone)
    assert not set(history) & set(undone)  # nothing undone came back
    assert set(acknowledged) <= set(history) | set(undone)  # nothing acknowledged lost
    assert set(history) | set(undone) <= set(acknowledged)  # nothing made up
    for number in range(WRITERS):  # each writer's messages keep their order
        own = [text for text in history if text.startswith(f"w{number} ")]
        assert own == [text for text in acknowledged if text in own]


def _open_local(kind: str, folder: str, key: str = KEY) -> EncryptedSession[Any]:
    from aniki.sessions import FileSession, SQLiteSession

    inner = (
        SQLiteSession("shared", Path(folder) / "race.db")
        if kind == "sqlite"
        else FileSession("shared", Path(folder) / "files")
    )
    return EncryptedSession(inner, key)


def _write_in_process(kind: str, folder: str, key: str, number: int, turns: int) -> None:
    session = _open_local(kind, folder, key)
    written: list[str] = []
    for turn in range(turns):
        question = f"w{number} q{turn}"
        session.add_message(Message("user", question))
        written.append(question)
        session.add_messages([Message("assistant", f"{question} a")])
        written.append(f"{question} a")
        session.get_messages(limit=2)  # the next append chains onto the tail this read saw
    (Path(folder) / f"written-{number}.json").write_text(json.dumps(written))


def _undo_in_process(kind: str, folder: str, key: str) -> None:
    session = _open_local(kind, folder, key)
    undone: list[str] = []
    stop = Path(folder) / "stop"
    while not stop.exists():
        undone.extend(texts(session.undo()))
        time.sleep(0.002)
    (Path(folder) / "undone.json").write_text(json.dumps(undone))


@pytest.mark.parametrize("kind", ["sqlite", "file"])
def test_processes_appending_while_another_undoes_leave_a_readable_history(
    tmp_path: Path, kind: str
) -> None:
    context = multiprocessing.get_context("spawn")
    folder = str(tmp_path)
    undoer = context.Process(target=_undo_in_process, args=(kind, folder, KEY))
    writers = [
        context.Process(target=_write_in_process, args=(kind, folder, KEY, number, 25))
        for number in range(3)
    ]
    undoer.start()
    try:
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join(120)
    finally:
        (tmp_path / "stop").touch()
        undoer.join(60)
        for process in (*writers, undoer):
            if process.is_alive():  # only when the test fails: leave no process behind
                process.kill()
                process.join()
    assert [writer.exitcode for writer in writers] == [0, 0, 0]
    assert undoer.exitcode == 0
    history = texts(_open_local(kind, folder).get_messages())
    undone = json.loads((tmp_path / "undone.json").read_text())
    written = [
        text
        for number in range(3)
        for text in json.loads((tmp_path / f"written-{number}.json").read_text())
    ]
    assert undone  # the undos did race the appends
    assert len(set(history)) == len(history)
    assert not set(history) & set(undone)
    assert set(written) == set(history) | set(undone)  # nothing lost, nothing made up
    for limit in (1, 4, 9):
        assert texts(_open_local(kind, folder).get_messages(limit=limit)) == history[-limit:]
