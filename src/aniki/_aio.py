"""asyncio helpers shared across the package."""

from __future__ import annotations

import asyncio
import math
import sys
import weakref
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["GRAIN", "within", "within_about"]

T = TypeVar("T")


async def within(seconds: float, work: Awaitable[T]) -> T:
    """``await work``, or ``asyncio.TimeoutError`` once ``seconds`` have passed (``work`` is
    cancelled then). On Python 3.11 and later this costs a timer, not the task that
    ``asyncio.wait_for`` makes for a coroutine (3.10 has only ``wait_for``)."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await work
    return await asyncio.wait_for(work, seconds)


GRAIN = 0.025
"""Seconds: :func:`within_about` ends a wait up to this much after its time is up."""

_COARSE_FROM = 1.0
"""Bounds shorter than this (seconds) are kept exactly, by :func:`within`."""


async def within_about(seconds: float, work: Awaitable[T]) -> T:
    """:func:`within`, for the bound of every call to a store: ``asyncio.TimeoutError`` at
    most :data:`GRAIN` seconds late, for bounds of a second or more.

    A server handling many conversations has a store call in flight for each, and each
    exact bound is a timer of its own in the event loop's heap, pushed and cancelled per
    call (measured: a fifth of the CPU an asyncio Redis append-and-read costs, with 200
    calls in flight). Here the calls whose time is up within the same :data:`GRAIN` share
    one timer, which cancels those still running when it fires.
    """
    if sys.version_info < (3, 11):  # no Task.uncancel() to tell our cancellation apart
        return await within(seconds, work)
    task = asyncio.current_task()
    if seconds < _COARSE_FROM or task is None:
        return await within(seconds, work)
    loop = asyncio.get_running_loop()
    slots = _slots(loop)
    if slots is None:
        return await within(seconds, work)
    key = math.ceil((loop.time() + seconds) / GRAIN)
    slot = slots.get(key)
    if slot is None:
        slot = slots[key] = set()
        loop.call_at(key * GRAIN, _expire, slots, key)
    call = _Call(task, task.cancelling())
    slot.add(call)
    try:
        result = await work
    except asyncio.CancelledError:
        if call.expired and task.uncancel() <= call.cancelling:
            raise asyncio.TimeoutError from None
        raise
    finally:
        slot.discard(call)
    if call.expired:  # the work swallowed our cancellation and finished: take it back
        task.uncancel()
    return result


class _Call:
    """A call bounded by :func:`within_about`: its task, and whether its time ran out."""

    __slots__ = ("cancelling", "expired", "task")

    def __init__(self, task: asyncio.Task[object], cancelling: int) -> None:
        self.task = task
        self.cancelling = cancelling
        """Cancellations of the task asked before the call began and not undone."""
        self.expired = False


_SLOTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, set[_Call]]] = (
    weakref.WeakKeyDictionary()
)
"""Per event loop, the calls still running by the tick (of :data:`GRAIN`) they expire at."""


def _slots(loop: asyncio.AbstractEventLoop) -> dict[int, set[_Call]] | None:
    """``loop``'s slots (``None`` for a loop that cannot be weakly referenced)."""
    try:
        slots = _SLOTS.get(loop)
        if slots is None:
            slots = _SLOTS[loop] = {}
    except TypeError:
        return None
    return slots


def _expire(slots: dict[int, set[_Call]], key: int) -> None:
    for call in slots.pop(key, ()):
        call.expired = True
        call.task.cancel()
