"""A SQLite store's short calls run on the event loop's thread when they will not wait, and
in a worker thread when they might (aniki.sessions._now): a lock held by another process,
a first read of a long history, durability ``full``; a call that gives up has written
nothing, and one that has written runs to its end."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from aniki import Agent, EncryptedSession, Message, Runner, TokenBudgetSession
from aniki._threads import LANES
from aniki.sessions import AsyncSQLiteSession, InMemorySession, SQLiteSession
from aniki.sessions._capabilities import capabilities_of
from aniki.sessions._local_file import DAMAGED
from aniki.sessions._now import LATER, NOT_NOW
from aniki.sessions.sqlite import _checkpoint
from aniki.sessions.sqlite._checkpoint import Checkpointer
from aniki.testing import MockProvider


class Recording(SQLiteSession):
    """Notes the thread of every write and read."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.threads: list[str] = []

    def add_messages(self, messages: Any) -> None:
        self.threads.append(threading.current_thread().name)
        super().add_messages(messages)

    def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        self.threads.append(threading.current_thread().name)
        return super().get_messages(limit)

    def _add_then_get(self, messages: Any, limit: int | None = None) -> tuple[Message, ...]:
        self.threads.append(threading.current_thread().name)
        return super()._add_then_get(messages, limit)


def _agent() -> Agent:
    return Agent("Helper", model="mock", provider=MockProvider(handler=lambda request: "ok"))


def _turns(session: Any, count: int) -> None:
    async def run() -> None:
        agent, runner = _agent(), Runner()
        for turn in range(count):
            await runner.run(agent, message=f"question {turn}", session=session)

    asyncio.run(run())


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "now.db"


@contextmanager
def write_locked(path: Path) -> Iterator[sqlite3.Connection]:
    """Another connection (as another process would) holding the file's write lock."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        conn.close()


def test_a_short_history_is_served_on_the_loop_thread(path: Path) -> None:
    opened = SQLiteSession("other", path)  # the file is open in this process
    opened.get_messages()
    session = Recording("chat", path)
    _turns(session, 3)
    assert set(session.threads) == {threading.main_thread().name}
    assert [m.role for m in SQLiteSession("chat", path).get_messages()] == ["user", "assistant"] * 3


def test_a_long_history_is_first_read_in_a_worker_thread(path: Path) -> None:
    SQLiteSession("chat", path).add_messages(
        [Message("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(600)]
    )
    session = Recording("chat", path)
    _turns(session, 2)
    main = threading.main_thread().name
    # The first call (append, then read 600 messages) goes to a thread; then the cache is
    # warm, and the calls are short.
    assert main not in session.threads[:2]
    assert set(session.threads[2:]) == {main}
    assert len(SQLiteSession("chat", path).get_messages()) == 604


def test_durability_full_always_waits_in_a_worker_thread(path: Path) -> None:
    session = Recording("chat", path, durability="full")
    _turns(session, 2)
    assert threading.main_thread().name not in session.threads


def test_calls_made_on_the_loop_thread_leave_checkpoints_to_a_worker_thread(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite's automatic checkpoint runs inside a commit, copying the log into the database
    # and waiting for the disk: the calls made on the loop's thread turn it off, and every
    # so many writes a worker thread checkpoints on a connection of its own.
    checkpoints: list[str] = []
    made = Checkpointer._checkpoint

    def recorded(self: Checkpointer) -> None:
        checkpoints.append(threading.current_thread().name)
        made(self)

    monkeypatch.setattr(Checkpointer, "_checkpoint", recorded)
    session = Recording("chat", path)
    session.get_messages()
    _turns(session, 600)  # 1,200 writes
    assert set(session.threads) == {threading.main_thread().name}
    db = session._database
    autocheckpoint = "PRAGMA wal_autocheckpoint"
    assert db.now(lambda: db.conn.execute(autocheckpoint).fetchone()[0]) == 0
    with db.transaction(write=False) as conn:  # a call made otherwise: it is back on
        assert conn.execute(autocheckpoint).fetchone()[0] == 1000
    _wait_for(lambda: len(checkpoints) == 1200 // _checkpoint.CHECKPOINT_AFTER)
    assert threading.main_thread().name not in checkpoints
    other = sqlite3.connect(path, isolation_level=None)
    try:  # what the checkpoints copied is in the database file itself
        busy, log, copied = other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        other.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert busy == 0 and copied == log
    finally:
        other.close()
    assert len(SQLiteSession("chat", path).get_messages()) == 1200


def test_a_log_grown_long_is_copied_whole_by_a_call_on_the_loop_and_starts_again(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker thread's checkpoint copies the log up to what it held when it began (here,
    # up to the snapshot of a reader that never finishes), and the log starts again only
    # once all of it is copied: under writes that never pause, it would grow. Past a bound,
    # the next call on the loop copies the rest on the store's own connection.
    monkeypatch.setattr(_checkpoint, "CHECKPOINT_AFTER", 10)
    monkeypatch.setattr(_checkpoint, "OVERGROWN", 30)
    session = Recording("chat", path)
    session.get_messages()
    db = session._database
    reader = sqlite3.connect(path, isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM aniki_messages").fetchone()  # holds its snapshot
        _turns(session, 15)
        _wait_for(lambda: db._checkpoints.overgrown)
    finally:
        reader.close()
    _turns(session, 1)  # its first call copies the rest; its second starts the log again
    assert set(session.threads) == {threading.main_thread().name}
    assert not db._checkpoints.overgrown
    other = sqlite3.connect(path, isolation_level=None)
    try:
        _, log, copied = other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    finally:
        other.close()
    assert 0 < log < 10 and copied == log  # the last turn's pages only
    assert len(SQLiteSession("chat", path).get_messages()) == 32


def test_when_no_checkpoint_can_be_made_beside_the_store_the_loop_makes_them(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker thread's connection cannot be opened (the file moved away, no access): the
    # log is still copied and starts again, by calls on the loop.
    def refused(*_: object) -> sqlite3.Connection:
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(_checkpoint, "CHECKPOINT_AFTER", 10)
    monkeypatch.setattr(_checkpoint, "_open", refused)
    session = Recording("chat", path)
    session.get_messages()
    _turns(session, 60)  # 120 writes
    assert set(session.threads) == {threading.main_thread().name}
    other = sqlite3.connect(path, isolation_level=None)
    try:
        _, log, _ = other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    finally:
        other.close()
    assert 0 < log < 60  # not one page or more per write since the start
    assert len(SQLiteSession("chat", path).get_messages()) == 120


def test_no_checkpoint_is_made_on_a_file_found_damaged(path: Path) -> None:
    # A checkpoint writes the database file, and a file found damaged is never written.
    session = SQLiteSession("chat", path)
    session.add_message(Message("user", "kept"))
    session.get_messages()
    db = session._database
    made: list[str] = []
    db.conn.set_trace_callback(made.append)
    db._checkpoints.overgrown = True  # a call on the loop would finish a checkpoint now
    DAMAGED.remember("found damaged for this test", path=str(db.path))
    try:
        assert db.now(lambda: "ran") == "ran"
        db._checkpoints._checkpoint()  # the worker thread's, called here
    finally:
        DAMAGED.unname(str(db.path))
    assert not [statement for statement in made if "wal_checkpoint" in statement]
    assert db._checkpoints._conn is None  # no connection was opened to checkpoint
    assert not db._checkpoints.overgrown


@pytest.mark.parametrize(("durability", "level"), [("off", 0), ("normal", 1)])
def test_the_checkpointing_connection_waits_for_the_disk_as_the_store_does(
    path: Path, monkeypatch: pytest.MonkeyPatch, durability: str, level: int
) -> None:
    monkeypatch.setattr(_checkpoint, "CHECKPOINT_AFTER", 10)
    session = SQLiteSession("chat", path, durability=durability)  # type: ignore[arg-type]
    session.get_messages()
    _turns(session, 10)
    checkpoints = session._database._checkpoints
    _wait_for(lambda: checkpoints._conn is not None)
    assert checkpoints._conn is not None
    assert checkpoints._conn.execute("PRAGMA synchronous").fetchone()[0] == level


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_checkpoints_on_a_connection_of_its_own(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_checkpoint, "CHECKPOINT_AFTER", 10)
    session = SQLiteSession("chat", path)
    session.get_messages()
    checkpoints = session._database._checkpoints
    _turns(session, 10)
    _wait_for(lambda: checkpoints._conn is not None)
    inherited = checkpoints._conn
    pid = os.fork()
    if pid == 0:  # the child: must neither use nor close the parent's connection
        signal.alarm(60)  # never hang the test run, whatever another thread held at fork
        code = 0
        try:
            _turns(session, 10)
            _wait_for(lambda: checkpoints._conn is not inherited)
            code = 0 if len(session.get_messages()) == 40 else 3
        except BaseException:
            code = 4
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert checkpoints._conn is inherited
    assert inherited is not None and inherited.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert len(session.get_messages()) == 40


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_fork_waits_for_a_checkpoint_in_progress() -> None:
    # A child made while a thread is inside SQLite would keep the mutexes it holds.
    def checkpointing() -> None:
        with _checkpoint._RUNNING:
            inside.set()
            time.sleep(0.3)

    inside = threading.Event()
    thread = threading.Thread(target=checkpointing)
    thread.start()
    inside.wait(5)
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os._exit(0 if _checkpoint._RUNNING.acquire(timeout=5) else 1)  # free in the child
    waited = time.monotonic() - start
    _, status = os.waitpid(pid, 0)
    thread.join()
    assert os.waitstatus_to_exitcode(status) == 0
    assert waited >= 0.2


def _wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "not within 10 s"
        time.sleep(0.01)


def test_a_lock_held_elsewhere_sends_the_call_to_a_thread_and_it_lands_once(
    path: Path,
) -> None:
    session = Recording("chat", path, timeout=5.0)
    _turns(session, 1)  # the file exists and this object has read it

    async def run() -> int:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        ticker = asyncio.ensure_future(tick())
        with write_locked(path) as other:
            turn = asyncio.ensure_future(Runner().run(_agent(), message="later", session=session))
            await asyncio.sleep(0.3)  # the loop is free while the append waits
            other.execute("COMMIT")
            await turn
        ticker.cancel()
        return ticks

    assert asyncio.run(run()) >= 10
    stored = SQLiteSession("chat", path).get_messages()
    assert [m.content for m in stored if m.role == "user"] == ["question 0", "later"]
    assert len(stored) == 4


def test_a_call_that_has_written_waits_instead_of_giving_up(path: Path) -> None:
    session = SQLiteSession("chat", path, timeout=5.0)
    session.get_messages()
    session.add_message(Message("user", "first"))
    holder: list[sqlite3.Connection] = []

    def work() -> str:
        session.add_message(Message("user", "written now"))
        with write_locked(path) as other:  # another writer takes the lock right after
            holder.append(other)
            threading.Timer(0.2, lambda: other.execute("COMMIT")).start()
            session.set_meta("after", 1)  # waits for it rather than giving the call up
        return "done"

    assert capabilities_of(session).try_now is not None
    assert session._try_now(work) == "done"
    assert [m.content for m in session.get_messages()] == ["first", "written now"]
    assert session.get_meta("after") == 1


def test_a_call_that_meets_a_lock_before_writing_runs_nothing(path: Path) -> None:
    session = SQLiteSession("chat", path, timeout=5.0)
    session.add_message(Message("user", "first"))
    session.get_messages()
    with write_locked(path):
        started = time.monotonic()
        answer = session._try_now(lambda: session.add_message(Message("user", "not now")))
        assert answer is NOT_NOW
        assert time.monotonic() - started < 1.0  # gave up at once, did not wait 5 s
    assert [m.content for m in session.get_messages()] == ["first"]
    # The connection waits for locks again as configured.
    conn = session._database.conn
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000


def test_a_busy_connection_declines(path: Path) -> None:
    session = SQLiteSession("chat", path)
    session.get_messages()
    db = session._database
    ran: list[int] = []
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with db.lock:
            taken.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    taken.wait(5)
    try:
        assert session._try_now(lambda: ran.append(1)) is LATER  # asked again soon
    finally:
        release.set()
        holder.join()
    assert ran == []
    assert session._try_now(lambda: ran.append(2)) is None
    assert ran == [2]


def test_wrappers_try_now_only_over_a_store_that_can(path: Path) -> None:
    store = SQLiteSession("chat", path)
    key = EncryptedSession.generate_key()

    def tries(session: object) -> Callable[[Callable[[], Any]], Any] | None:
        return capabilities_of(session).try_now

    assert tries(TokenBudgetSession(store, 4000)) is not None
    assert tries(EncryptedSession(store, key)) is not None
    assert tries(TokenBudgetSession(InMemorySession(), 4000)) is None
    assert tries(EncryptedSession(InMemorySession(), key)) is None
    assert tries(SQLiteSession("chat", path, durability="full")) is not None  # it declines


def test_a_policy_over_sqlite_serves_its_turns_on_the_loop_thread(path: Path) -> None:
    opened = SQLiteSession("other", path)
    opened.get_messages()
    inner = Recording("chat", path)
    _turns(TokenBudgetSession(inner, 4000), 3)
    assert set(inner.threads) == {threading.main_thread().name}
    assert len(inner.get_messages()) == 6
    assert opened.get_messages() == ()


def test_the_async_twin_runs_short_calls_on_the_loop_and_waits_in_its_lane(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lane_calls: list[object] = []
    submit = LANES.submit

    def spy(lane: Any, work: Callable[[], Any]) -> Any:
        lane_calls.append(lane)
        return submit(lane, work)

    monkeypatch.setattr(LANES, "submit", spy)
    opened = SQLiteSession("other", path)
    opened.get_messages()

    async def run() -> tuple[int, int]:
        session = AsyncSQLiteSession("chat", path, timeout=5.0)
        for turn in range(3):
            await Runner().run(_agent(), message=f"question {turn}", session=session)
        short = len(lane_calls)
        with write_locked(path) as other:
            writing = asyncio.ensure_future(session.add_message(Message("user", "later")))
            await asyncio.sleep(0.2)
            assert not writing.done()  # waiting in the lane, not on the loop
            other.execute("COMMIT")
            await writing
        return short, len(lane_calls)

    short, after = asyncio.run(run())
    assert short == 0
    assert after == 1
    assert [m.content for m in SQLiteSession("chat", path).get_messages()][-1] == "later"
