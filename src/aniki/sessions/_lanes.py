"""Worker threads for the async twins of the local stores: one lane of calls per file.

A lane is a queue of calls on one file (a SQLite database, a session file). Its calls run
one at a time, in the order they were made, on whichever worker thread is free; different
lanes run side by side. So a file's calls never occupy more than one thread (a second
thread would only wait for the first on the file's lock), the history cache of the session
behind them is warmed by each call in turn, and a file whose lock another process holds
stops only its own lane.

The threads are daemons, started as lanes need them, up to :data:`_MOST`: a call hanging at
exit (a disk that stopped answering) does not keep the process alive, and a store's writes
are transactions or single ``write`` calls, so one cut short at exit is not stored at all.

A call is a :class:`concurrent.futures.Future`: cancelled before its thread starts it, it
never runs; once started it runs to its end, whatever becomes of its caller. Loop-agnostic,
so a twin may be used from any event loop, or from several.
"""

from __future__ import annotations

import contextvars
import os
import queue
import threading
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["LANES", "Lanes"]

T = TypeVar("T")

_Job = tuple["Future[Any]", contextvars.Context, Callable[[], Any]]


class Lanes:
    """Daemon threads named ``aniki-{name}-N`` (at most ``most``) serving lanes of calls."""

    def __init__(self, name: str, most: int) -> None:
        self._name = name
        self._most = most
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # a child has none of the threads

    def _reset(self) -> None:
        self._lock = threading.Lock()
        # A lane is listed from its first call until a thread finds it empty: a call made
        # meanwhile joins the queue of the thread already serving it.
        self._lanes: dict[Hashable, deque[_Job]] = {}
        self._ready: queue.SimpleQueue[Hashable] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._threads = 0

    def submit(self, lane: Hashable, work: Callable[[], T]) -> Future[T]:
        """Run ``work`` in ``lane``, after the calls already made there; its future.

        The caller's context variables are copied into the thread, as ``asyncio.to_thread``
        does.
        """
        future: Future[T] = Future()
        job: _Job = (future, contextvars.copy_context(), work)
        with self._lock:
            calls = self._lanes.get(lane)
            if calls is not None:
                calls.append(job)
                return future
            self._lanes[lane] = deque((job,))
        self._ready.put(lane)
        if not self._idle.acquire(blocking=False):
            with self._lock:
                if self._threads < self._most:
                    self._threads += 1
                    name = f"aniki-{self._name}-{self._threads}"
                    threading.Thread(target=self._serve, name=name, daemon=True).start()
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
                _run(job)
                del job
            self._idle.release()


def _run(job: _Job) -> None:
    future, context, work = job
    if not future.set_running_or_notify_cancel():
        return  # cancelled while it waited: never started, so nothing of it happened
    try:
        result = context.run(work)
    except BaseException as exc:  # handed to the caller, whatever it is
        future.set_exception(exc)
    else:
        future.set_result(result)


_MOST = 64
"""Lanes served at once. A lane's thread may be waiting for another process's lock (up to a
store's ``timeout``), so there are more threads than cores."""

LANES = Lanes("file-lane", _MOST)
"""The lanes of every async twin of a local store."""
