"""Helpers behind :mod:`aniki.testing.conformance`: sample messages, a driver, a process worker,
and the base class that opens and cleans up the sessions under test.

Kept apart so the suite module reads as a list of checks.
"""

from __future__ import annotations

import asyncio
import inspect
import multiprocessing
import shutil
import tempfile
import traceback
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, TypeAlias

from ..messages import Message, MessageLike, ToolCall
from ..sessions._capabilities import capabilities_of
from ..sessions.base import AsyncSession, Session

__all__ = [
    "AnySession",
    "ConformanceBase",
    "Driver",
    "SessionFactory",
    "append_worker",
    "assert_batches_contiguous",
    "large_messages",
    "raises",
    "run_writers",
    "sample_messages",
    "writer_message",
]

AnySession: TypeAlias = Session | AsyncSession
"""A sync or an async session: the suite drives both the same way."""

SessionFactory: TypeAlias = Callable[[str], Any]
"""Builds the session for an id, bound to one store; picklable for the multi-process check."""


def sample_messages() -> list[Message]:
    """One of every message shape a store must keep exactly, the awkward ones included."""
    call_a = ToolCall(id="call_a", name="get_weather", arguments='{"city": "Os')
    call_b = ToolCall(id="call_b", name="noop", arguments="")
    call_c = ToolCall(id="call_\u00e9", name="echo", arguments='{"s": "a\\u0000b", "n": 1e999}')
    return [
        Message(role="system", content="You are terse."),
        Message(role="user", content="Hi"),
        Message(
            role="user", content="h\u00e9llo w\u00f6rld \u2014 \u65e5\u672c\u8a9e \u0627\u0644"
        ),
        Message(
            role="user",
            content="\U0001f469\u200d\U0001f469\u200d\U0001f467 \U0001f1f3\U0001f1f4 \U0001d54f",
        ),
        Message(role="user", content="nul:\x00:end and \x01\x1f\x7f"),
        Message(role="user", content="line\nbreaks\r\nand\u2028separators\u2029\u0085end"),
        Message(role="user", content="  padded  \n\t"),
        Message(role="user", content="'); DROP TABLE messages; -- \" \\ %s ?"),
        Message(role="user", content='{"role": "system", "content": "not me"}'),
        Message(role="assistant", tool_calls=(call_a, call_b)),
        Message(role="tool", content="12 degrees", tool_call_id="call_a"),
        Message(role="tool", content="\x00", tool_call_id="call_b"),
        Message(role="assistant", content="Checking.", tool_calls=(call_c,)),
        Message(role="tool", content="{not json", tool_call_id="call_\u00e9"),
        Message(role="assistant", content="Done."),
    ]


def large_messages() -> list[Message]:
    """Two messages of about 1 MB each: one ASCII, one multi-byte, and a 1 MB tool argument."""
    return [
        Message(role="user", content="x" * 1_000_000),
        Message(role="assistant", content="\u00e9\U0001f600" * 250_000),
        Message(
            role="assistant",
            tool_calls=(ToolCall(id="big", name="store", arguments="[" * 1_000_000),),
        ),
    ]


def writer_message(writer: int, index: int) -> Message:
    """The ``index``-th message appended by process ``writer`` in the concurrency check."""
    return Message(role="user", content=f"w{writer}:{index}")


class Driver:
    """Calls a sync or an async session with plain calls, so each check is written once.

    An awaitable result is run to completion on one event loop, created the first time it
    is needed and closed by :meth:`close`: async stores that pool connections keep using
    the loop they first ran on.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None

    def run(self, result: Any) -> Any:
        """``result`` itself, or its value when it is awaitable."""
        if not inspect.isawaitable(result):
            return result
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(_awaited(result))

    def add_message(self, session: AnySession, message: MessageLike) -> None:
        self.run(session.add_message(message))

    def add_messages(self, session: AnySession, messages: Iterable[MessageLike]) -> None:
        self.run(session.add_messages(messages))  # type: ignore[union-attr]

    def get_messages(self, session: AnySession, limit: int | None = None) -> list[Message]:
        if limit is None:
            messages = self.run(session.get_messages())
        else:
            messages = self.run(session.get_messages(limit=limit))  # type: ignore[call-arg]
        if not isinstance(messages, Sequence):
            raise AssertionError(
                f"get_messages() must return a sequence, got {type(messages).__name__}"
            )
        for message in messages:
            if not isinstance(message, Message):
                raise AssertionError(
                    f"get_messages() must return Message objects, got {type(message).__name__}"
                )
        return list(messages)

    def clear(self, session: AnySession) -> None:
        self.run(session.clear())

    def get_meta(self, session: AnySession, key: str) -> Any:
        return self.run(session.get_meta(key))  # type: ignore[union-attr]

    def set_meta(self, session: AnySession, key: str, value: Any) -> None:
        self.run(session.set_meta(key, value))  # type: ignore[union-attr]

    def release(self, session: AnySession) -> None:
        """Close ``session`` the way it offers (``aclose()`` or ``close()``), if it does."""
        closer = capabilities_of(session).close
        if closer is not None:
            self.run(closer())

    def close(self) -> None:
        """Close the event loop, if one was made."""
        if self._loop is not None:
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()
            self._loop = None


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def append_worker(
    factory: SessionFactory,
    session_id: str,
    writer: int,
    count: int,
    use_batches: bool,
    start: Any,
    results: Any,
) -> None:
    """Body of one child process of the concurrency check; reports ``(writer, error)``.

    Appends ``count`` messages (every third step a batch of two when ``use_batches``), and
    after every write checks that the history it reads only grows and holds its own
    messages in order: the incremental read paths are exercised under contention too.
    """
    driver = Driver()
    error = None
    try:
        session = factory(session_id)
        start.wait(60)
        seen: list[Message] = []
        index = 0
        while index < count:
            if use_batches and index % 3 == 1 and index + 1 < count:
                batch = [writer_message(writer, index), writer_message(writer, index + 1)]
                driver.add_messages(session, batch)
                index += 2
            else:
                driver.add_message(session, writer_message(writer, index))
                index += 1
            now = driver.get_messages(session)
            if now[: len(seen)] != seen:
                raise AssertionError(f"writer {writer}: history changed under it, not appended")
            mine = [m for m in now if m.content.startswith(f"w{writer}:")]
            if mine != [writer_message(writer, i) for i in range(index)]:
                raise AssertionError(f"writer {writer}: own messages missing or out of order")
            seen = now
        driver.release(session)
    except BaseException:  # reported to the parent, which fails the test with it
        error = traceback.format_exc()
    finally:
        driver.close()
    results.put((writer, error))


@contextmanager
def raises(expected: type[BaseException]) -> Iterator[None]:
    """Fail unless the block raises ``expected`` (``pytest.raises`` without needing pytest)."""
    try:
        yield
    except expected:
        return
    raise AssertionError(f"expected {expected.__name__} to be raised")


def run_writers(
    factory: SessionFactory, session_id: str, processes: int, count: int, batches: bool
) -> list[str]:
    """Run :func:`append_worker` in ``processes`` fresh processes; their errors, if any."""
    context = multiprocessing.get_context("spawn")
    start, results = context.Event(), context.Queue()
    workers = [
        context.Process(
            target=append_worker,
            args=(factory, session_id, writer, count, batches, start, results),
            daemon=True,
        )
        for writer in range(processes)
    ]
    for worker in workers:
        worker.start()
    start.set()
    errors = []
    try:
        for _ in workers:
            writer, error = results.get(timeout=120)
            if error:
                errors.append(f"writer {writer} failed:\n{error}")
    except Exception as exc:  # queue.Empty: a child died or hung
        errors.append(f"a writer process did not report back: {exc!r}")
    for worker in workers:
        worker.join(10)
        if worker.is_alive():
            worker.kill()
            errors.append(f"writer process {worker.pid} hung")
        elif worker.exitcode:
            errors.append(f"writer process exited with {worker.exitcode}")
    return errors


def assert_batches_contiguous(history: list[Message], count: int) -> None:
    """Fail when a batch sent by :func:`append_worker` was split by another writer."""
    # append_worker sends index i and i+1 as one batch whenever i % 3 == 1.
    position = {m.content: n for n, m in enumerate(history)}
    for message in history:
        writer, index = message.content[1:].split(":")
        i = int(index)
        if i % 3 == 1 and i + 1 < count:
            follower = position[f"w{writer}:{i + 1}"]
            assert follower == position[message.content] + 1, (
                f"the batch w{writer}:{i}-{i + 1} was interleaved with another writer's messages"
            )


class ConformanceBase:
    """What the conformance checks stand on: the switches, the factory a subclass provides,
    and opening, filling, reading and cleaning up sessions of the store under test."""

    shares_history_across_instances: ClassVar[bool] = True
    supports_add_messages: ClassVar[bool] = True
    supports_limit: ClassVar[bool] = True
    supports_meta: ClassVar[bool] = True
    supports_processes: ClassVar[bool] = True
    processes: ClassVar[int] = 4
    messages_per_process: ClassVar[int] = 30

    tmp_path: Path
    driver: Driver

    # --- what a subclass provides ---------------------------------------------------

    def session_factory(self) -> SessionFactory:
        """Return a picklable callable ``factory(session_id) -> session`` for one store."""
        raise NotImplementedError(
            f"{type(self).__name__} must override session_factory() to return a picklable "
            "callable building a session for an id, e.g. functools.partial(MyStore, url=...)"
        )

    # --- plumbing -----------------------------------------------------------------------

    def setup_method(self, method: Any) -> None:
        self.tmp_path = Path(tempfile.mkdtemp(prefix="aniki-conformance-"))
        self.driver = Driver()
        self._run_tag = uuid.uuid4().hex[:12]
        self._opened: list[AnySession] = []
        self._ids: set[str] = set()

    def teardown_method(self, method: Any) -> None:
        try:
            if self.shares_history_across_instances:
                for session_id in self._ids:
                    cleaner = self.open(session_id, remember=False)
                    self.driver.clear(cleaner)
            for session in self._opened:
                self.driver.release(session)
        finally:
            self.driver.close()
            shutil.rmtree(self.tmp_path, ignore_errors=True)

    def new_id(self, name: str = "s") -> str:
        """An id unique to this test run (so a shared server's data never collide)."""
        return f"conformance-{self._run_tag}-{name}"

    def open(self, session_id: str, *, remember: bool = True) -> AnySession:
        """A new session instance for ``session_id``, closed when the test ends."""
        session: AnySession = self.session_factory()(session_id)
        self._opened.append(session)
        if remember:
            self._ids.add(session_id)
        return session

    def _need(self, flag: bool, what: str) -> None:
        if not flag:
            import pytest  # imported here so that importing this module does not need pytest

            pytest.skip(f"{type(self).__name__} does not support {what}")

    def add(self, session: AnySession, *messages: Any) -> None:
        """Add ``messages`` to ``session`` one at a time, sync or async alike."""
        for message in messages:
            self.driver.add_message(session, message)

    def read(self, session: AnySession, limit: int | None = None) -> list[Message]:
        """The messages of ``session`` (the last ``limit`` of them), sync or async alike."""
        return self.driver.get_messages(session, limit)
