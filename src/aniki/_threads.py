"""The worker threads aniki keeps, in one place: the pools a run's blocking calls go to, and
the lanes of the local stores' async twins.

**Pools for a run** (:class:`Workers`). Three kinds of call block: a synchronous store's
(:mod:`aniki.sessions._session_io`), a synchronous tool's, and the first set-up of a provider
(importing the vendor package and building its HTTP client take from tens of milliseconds to
most of a second). Each kind has its own threads, so that slow tools cannot hold up the
history's reads and writes. Work that only computes, but long enough to stall the loop
(fitting an oversized summary to its share), has threads of its own too. They are not the
loop's default executor: ``asyncio.run()`` waits for that one's threads when it closes its
loop, and the interpreter waits for them at exit, so a hung call would hold a run past its
deadline and the process past its end. A queue and a wake-up per call cost about half of
``run_in_executor``'s hop (measured: 40 µs against 80 µs on a busy 2-core machine).

**Lanes for the local stores' async twins** (:class:`Lanes`). A lane is a queue of calls on
one file (a SQLite database, a session file). Its calls run one at a time, in the order they
were made, on whichever thread is free; different lanes run side by side. So a file's calls
never occupy more than one thread (a second thread would only wait for the first on the
file's lock), the history cache of the session behind them is warmed by each call in turn,
and a file whose lock another process holds stops only its own lane. A lane's call is a
:class:`concurrent.futures.Future`: cancelled before its thread starts it, it never runs; once
started it runs to its end. Loop-agnostic, so a twin may be used from any event loop.

Every thread is a daemon, started when a call finds none idle: a call still hanging at exit (a
timed-out run's write, a tool that never returns, a disk that stopped answering) does not keep
the process alive; a store's writes are transactions or single ``write`` calls, so one cut
short at exit is not stored at all. The caller's context variables are copied into the
thread, as ``asyncio.to_thread`` does. A forked child starts with none of the threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import threading
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["COMPUTE", "LANES", "SETUP", "STORES", "TOOLS", "Lanes", "Workers"]

T = TypeVar("T")


class _Daemons:
    """Up to ``most`` daemon threads named ``aniki-{name}-N``, started as calls need them;
    a subclass says what a thread serves (:meth:`_serve`)."""

    def __init__(self, name: str, most: int) -> None:
        self._name = name
        self._most = most
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._idle = threading.Semaphore(0)
        self._threads = 0

    def _wake(self) -> None:
        """Hand the queued call to an idle thread, or start one if there is room."""
        if self._idle.acquire(blocking=False):
            return
        with self._lock:
            if self._threads < self._most:
                self._threads += 1
                name = f"aniki-{self._name}-{self._threads}"
                threading.Thread(target=self._serve, name=name, daemon=True).start()

    def _serve(self) -> None:
        raise NotImplementedError


class Workers(_Daemons):
    """A pool whose calls complete futures of the caller's event loop."""

    def _reset(self) -> None:
        super()._reset()
        self._queue: queue.SimpleQueue[_Call] = queue.SimpleQueue()

    def submit(self, work: Callable[[], T]) -> asyncio.Future[T]:
        """Run ``work`` in a worker thread; the future (of the running loop) gets its result.

        Cancelling the future does not stop ``work``: it completes in the background.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put((loop, future, contextvars.copy_context(), work))
        self._wake()
        return future

    def _serve(self) -> None:
        while True:
            loop, future, context, work = self._queue.get()
            try:
                outcome: tuple[Any, BaseException | None] = (context.run(work), None)
            except BaseException as exc:  # handed to the caller, whatever it is
                outcome = (None, exc)
            with contextlib.suppress(RuntimeError):  # the loop was closed meanwhile
                loop.call_soon_threadsafe(_settle, future, *outcome)
            del loop, future, context, work, outcome
            self._idle.release()


_Call = tuple[
    asyncio.AbstractEventLoop, "asyncio.Future[Any]", contextvars.Context, Callable[[], Any]
]


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():  # the run moved on (its deadline passed)
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


_Job = tuple["Future[Any]", contextvars.Context, Callable[[], Any]]


class Lanes(_Daemons):
    """Threads serving lanes of calls: a lane's calls one at a time, in order."""

    def _reset(self) -> None:
        super()._reset()
        # A lane is listed from its first call until a thread finds it empty: a call made
        # meanwhile joins the queue of the thread already serving it.
        self._lanes: dict[Hashable, deque[_Job]] = {}
        self._ready: queue.SimpleQueue[Hashable] = queue.SimpleQueue()

    def busy(self, lane: Hashable) -> bool:
        """Whether ``lane`` has a call queued or running."""
        return lane in self._lanes

    def submit(self, lane: Hashable, work: Callable[[], T]) -> Future[T]:
        """Run ``work`` in ``lane``, after the calls already made there; its future."""
        future: Future[T] = Future()
        job: _Job = (future, contextvars.copy_context(), work)
        with self._lock:
            calls = self._lanes.get(lane)
            if calls is not None:
                calls.append(job)
                return future
            self._lanes[lane] = deque((job,))
        self._ready.put(lane)
        self._wake()
        return future

    def _serve(self) -> None:
        while True:
            lane = self._ready.get()
            while True:
                with self._lock:
                    calls = self._lanes[lane]
                    if not calls:
                        del self._lanes[lane]
                        break
                    job = calls.popleft()
                _run_job(job)
                del job
            self._idle.release()


def _run_job(job: _Job) -> None:
    future, context, work = job
    if not future.set_running_or_notify_cancel():
        return  # cancelled while it waited: never started, so nothing of it happened
    try:
        result = context.run(work)
    except BaseException as exc:  # handed to the caller, whatever it is
        future.set_exception(exc)
    else:
        future.set_result(result)


_MOST = min(32, (os.cpu_count() or 1) + 4)

STORES = Workers("store", _MOST)
"""For the calls of synchronous stores."""
TOOLS = Workers("tool", _MOST)
"""For synchronous tools."""
SETUP = Workers("setup", 2)
"""For one-time set-up: building a provider or its client, loading a tokenizer."""
COMPUTE = Workers("compute", 2)
"""For long computations a policy makes on a run's behalf: fitting a summary to its share."""
LANES = Lanes("file-lane", 64)
"""The lanes of every async twin of a local store. A lane's thread may be waiting for another
process's lock (up to a store's ``timeout``), so there are more threads than cores."""
