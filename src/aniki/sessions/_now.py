"""Calls of a blocking store made on the event loop's own thread, when they will not wait.

A synchronous store's calls run in a worker thread (:mod:`aniki.sessions._session_io`), so a
store that waits (on another process's lock, on a slow disk) never stalls the loop. That
hop is not free: handing a call to a thread and its result back costs tens of microseconds
of CPU, more than a SQLite append or a cached read takes, and with a few hundred runs on
one loop the threads and the loop fight for the interpreter lock (measured on 2 cores, 200
conversations of 5 turns on one SQLite file: 2.3x the CPU of the ideal through threads,
0.8x on the loop's thread).

A store that can tell, before it starts, that a call will not wait offers ``_try_now(work)``
(:class:`TriesNow`): it runs ``work`` at once on the calling thread, or runs nothing and
answers :data:`NOT_NOW`, and the call goes to a thread as before. A wait it meets before it
has written anything (another process's write lock) makes it give up (:class:`WouldWait`,
caught by the store, never seen by a caller); once it has written, the rest of the call
runs to its end, waiting as any call would. A store busy with a call of another thread
answers :data:`LATER`: :func:`attempt` lets the loop's other tasks run and asks again (a
few times) before it sends the call to a thread, since sending every call that meets a
busy store to a thread would keep the store busy with threads from then on.

A call made now does not suspend its task, so :func:`attempt` lets the other tasks run
once when a millisecond has passed since it last did on this thread: a task awaiting store
calls in a loop never starves the others, and a run's few calls a turn add no wait.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["LATER", "NOT_NOW", "NotNow", "TriesNow", "WouldWait", "attempt"]

_PAUSES = (0.0, 0.0, 0.001, 0.002, 0.004, 0.008)
"""How long :func:`attempt` lets the other tasks run before it asks a store that answered
:data:`LATER` again (about 15 ms in all, then the call goes to a thread)."""


_TURN_EVERY = 0.001
"""Seconds of calls made now, on one thread, before :func:`attempt` lets other tasks run."""
_turns = threading.local()  # on each thread (each loop): when attempt last let others run


class NotNow:
    """The answer of a ``_try_now`` that ran nothing (:data:`NOT_NOW`, :data:`LATER`)."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


NOT_NOW = NotNow("NOT_NOW")
"""What ``_try_now`` returns when it ran nothing: the call must go to a worker thread."""
LATER = NotNow("LATER")
"""What ``_try_now`` returns when it ran nothing because the store is busy with another
thread's call: it may be free once the loop's other tasks have run."""


class WouldWait(BaseException):
    """Raised inside a store trying a call now, at a wait met before anything was written.

    A ``BaseException``, so that no ``except Exception`` between the store's query and its
    ``_try_now`` mistakes it for a failure of the call."""


class TriesNow(Protocol):
    """A blocking store that can run ``work`` (its own calls, with what the run engine does
    around them) at once on the calling thread when nothing it needs is held and no long
    first read is due: ``work()``'s result, or :data:`NOT_NOW` having run nothing."""

    def _try_now(self, work: Callable[[], Any]) -> Any: ...


async def attempt(now: Callable[[Callable[[], Any]], Any], work: Callable[[], Any]) -> Any:
    """``work()`` made now through ``now`` (a store's ``_try_now``), or :data:`NOT_NOW`
    having run nothing (the call must go to a thread); see the module docstring."""
    for pause in _PAUSES:
        result = now(work)
        if result is not LATER:
            if result is not NOT_NOW:
                clock = time.monotonic()
                if clock - getattr(_turns, "last", 0.0) >= _TURN_EVERY:
                    _turns.last = clock
                    await asyncio.sleep(0)  # the others' turn, as after a hop
            return result
        await asyncio.sleep(pause)
    return NOT_NOW
