"""Worker threads for the blocking calls a run makes, so that its event loop never waits.

Three kinds of call block: a synchronous store's (:mod:`aniki._run.session_io`), a
synchronous tool's, and the first set-up of a provider (importing the vendor package and
building its HTTP client take from tens of milliseconds to most of a second). Each kind has
its own threads, so that slow tools cannot hold up the history's reads and writes.
Work that only computes, but long enough to stall the loop (fitting an oversized summary
to its share), has threads of its own too.

Not the loop's default executor: ``asyncio.run()`` waits for that one's threads when it
closes its loop, and the interpreter waits for them at exit, so a hung call would hold a run
past its deadline and the process past its end. These threads are daemons instead: a call
still hanging at exit (a timed-out run's write, a tool that never returns) does not keep the
process alive; a store's writes are transactions, so one cut short at exit is not stored at
all. A queue and a wake-up per call cost about half of ``run_in_executor``'s hop (measured:
40 µs against 80 µs on a busy 2-core machine).

The caller's context variables are copied into the thread, as ``asyncio.to_thread`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["COMPUTE", "SETUP", "STORES", "TOOLS", "Workers"]

T = TypeVar("T")


class Workers:
    """Up to ``most`` daemon threads named ``aniki-{name}-N``, started as calls need them."""

    def __init__(self, name: str, most: int) -> None:
        self._name = name
        self._most = most
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # a child has none of the threads

    def _reset(self) -> None:
        self._queue: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads = 0

    def submit(self, work: Callable[[], T]) -> asyncio.Future[T]:
        """Run ``work`` in a worker thread; the future (of the running loop) gets its result.

        Cancelling the future does not stop ``work``: it completes in the background.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put((loop, future, contextvars.copy_context(), work))
        if not self._idle.acquire(blocking=False):
            with self._lock:
                if self._threads < self._most:
                    self._threads += 1
                    name = f"aniki-{self._name}-{self._threads}"
                    threading.Thread(target=self._serve, name=name, daemon=True).start()
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


_MOST = min(32, (os.cpu_count() or 1) + 4)

STORES = Workers("store", _MOST)
"""For the calls of synchronous stores."""
TOOLS = Workers("tool", _MOST)
"""For synchronous tools."""
SETUP = Workers("setup", 2)
"""For one-time set-up: building a provider or its client, loading a tokenizer."""
COMPUTE = Workers("compute", 2)
"""For long computations a policy makes on a run's behalf: fitting a summary to its share."""
