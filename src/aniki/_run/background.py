"""The event loop ``Runner.run_sync`` runs in: one per process, in a daemon thread.

``asyncio.run()`` per call would make a new loop each time, and with it a new HTTP client
and a new connection (a provider keeps one client per loop), and would leave the closed
loop's transports and tasks to be collected later, with warnings. One long-lived loop keeps
each provider's client, and its pooled connections, warm across calls and across the
threads of a web server, which share it: its runs are concurrent on it as on any loop.

The loop is made on the first call. A forked child does not inherit its thread, so it makes
its own on its first call (the parent's loop object is kept, unused, never closed: closing
it there would touch the parent's state). At interpreter exit the loop closes its providers'
clients, cancels what still runs, and closes.

The caller's context variables reach the run, as with ``asyncio.run()``: the task is made in
a copy of the calling thread's context.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from ..errors import RunTimeoutError
from .deadline import GRACE

__all__ = ["run"]

T = TypeVar("T")

_SLACK = GRACE + 0.4
"""Seconds past a run's timeout that ``run`` still waits for the run to report it itself;
only a loop blocked by something outside aniki (a middleware that never awaits) needs it."""

_EXIT_WAIT = 2.0
"""Seconds the loop is given at exit to close its clients and cancel what still runs."""


class _Background:
    """The process's loop and its thread, made on first use, made anew after a fork."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._abandoned: list[asyncio.AbstractEventLoop] = []
        os.register_at_fork(after_in_child=self._forget)
        atexit.register(self.stop)

    def _forget(self) -> None:
        # The child has no thread running the loop. Kept, so that it is never collected
        # (an unclosed loop warns when it is), and never closed (it is still "running").
        if self._loop is not None:
            self._abandoned.append(self._loop)
        self._lock = threading.Lock()  # another thread may have held it at the fork
        self._loop = self._thread = None
        self._pid = os.getpid()

    def loop(self) -> asyncio.AbstractEventLoop:
        """The running background loop, started now if there is none."""
        loop = self._loop
        if loop is not None and self._pid == os.getpid() and not loop.is_closed():
            return loop
        with self._lock:
            if self._pid != os.getpid():  # forked without the at-fork hook (os.fork in C)
                self._forget()
            loop = self._loop
            if loop is None or loop.is_closed():
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                thread = threading.Thread(
                    target=_serve, args=(loop, ready), name="aniki-run-sync", daemon=True
                )
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
            return loop

    def stop(self) -> None:
        """Close the providers' clients of the loop, cancel its tasks, stop and close it."""
        with self._lock:
            loop, thread = self._loop, self._thread
            if loop is None or thread is None or self._pid != os.getpid() or loop.is_closed():
                return
            self._loop = self._thread = None
        wind_down = asyncio.run_coroutine_threadsafe(_wind_down(), loop)
        with contextlib.suppress(Exception):
            wind_down.result(_EXIT_WAIT)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(_EXIT_WAIT)
        if not thread.is_alive():
            loop.close()
        else:  # stuck in a callback that never returns: leave it be, never collected
            self._abandoned.append(loop)


def _serve(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    loop.run_forever()


async def _wind_down() -> None:
    from ..providers._client import close_loop_clients

    await asyncio.wait_for(close_loop_clients(), _EXIT_WAIT / 2)
    tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=_EXIT_WAIT / 4)
        for task in tasks:
            if task.done() and not task.cancelled():
                task.exception()  # seen, so not logged as never retrieved
    await asyncio.get_running_loop().shutdown_asyncgens()


_BACKGROUND = _Background()


def run(work: Coroutine[Any, Any, T], *, timeout: float | None) -> T:
    """Run ``work`` on the background loop and wait for its result in this thread.

    ``work`` bounds itself by ``timeout`` (it is a run with a deadline); this thread waits a
    little longer before it gives up on its own, with ``RunTimeoutError``, so the timeout
    holds even when something blocks the loop. A caller interrupted while it waits
    (``KeyboardInterrupt``) cancels the run.
    """
    loop = _BACKGROUND.loop()
    finished = threading.Lock()
    finished.acquire()
    started: list[asyncio.Task[T]] = []

    def start() -> None:
        # Runs in a copy of the caller's context (call_soon_threadsafe takes it), which the
        # task copies in turn: the caller's context variables reach the run.
        task = loop.create_task(work)
        task.add_done_callback(lambda _: finished.release())
        task.add_done_callback(_retrieve)
        started.append(task)

    # Lighter than run_coroutine_threadsafe (one callback, a lock instead of a Condition):
    # the hop between threads is most of what run_sync adds to a run.
    loop.call_soon_threadsafe(start)
    try:
        if not finished.acquire(timeout=-1 if timeout is None else timeout + _SLACK):
            assert timeout is not None
            raise RunTimeoutError(timeout)
    except BaseException:  # the loop is held up, or the caller was interrupted
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile (at exit)
            loop.call_soon_threadsafe(lambda: started[0].cancel())
        raise
    return started[0].result()


def _retrieve(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()  # seen, so not logged when the caller has stopped waiting
