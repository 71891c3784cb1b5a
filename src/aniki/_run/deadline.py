"""``Deadline``: the moment a run must be over by, shared by everything the run awaits."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from ..errors import RunTimeoutError

__all__ = ["GRACE", "Deadline"]

T = TypeVar("T")


class Deadline:
    """``timeout`` seconds from the first :meth:`start` (``None``: no limit).

    Everything a run awaits — its session I/O as much as its model calls — goes through
    :meth:`bound`, so the limit covers the whole run. A store call that blocks runs in a
    worker thread (see :mod:`aniki.sessions._session_io`), so the event loop stays free to notice
    that the time is up.
    """

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self._at: float | None = None

    def start(self) -> None:
        """Fix the deadline, if not done yet (needs a running event loop)."""
        if self.timeout is not None and self._at is None:
            self._at = asyncio.get_running_loop().time() + self.timeout

    async def bound(self, work: Awaitable[T]) -> T:
        """Await ``work``; cancel it and raise ``RunTimeoutError`` if the deadline passes."""
        if self.timeout is None:
            return await work
        self.start()
        assert self._at is not None
        task = asyncio.ensure_future(work)
        try:
            remaining = max(self._at - asyncio.get_running_loop().time(), 0.0)
            done, _ = await asyncio.wait({task}, timeout=remaining)
        finally:
            if not task.done():
                task.cancel()
                # Cancelling may take the store's client a while (psycopg asks the server to
                # cancel the query, and waits for it): not past the deadline. The task ends
                # in the background; the run is over either way.
                await asyncio.wait({task}, timeout=GRACE)
                task.add_done_callback(_retrieve)
        if not done:
            raise RunTimeoutError(self.timeout)
        return task.result()


GRACE = 0.1
"""Seconds a cancelled run is given to wind down before its caller is told it timed out."""


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # seen, so not logged as never retrieved
