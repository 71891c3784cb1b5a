"""asyncio helpers shared across the package."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["within"]

T = TypeVar("T")


async def within(seconds: float, work: Awaitable[T]) -> T:
    """``await work``, or ``asyncio.TimeoutError`` once ``seconds`` have passed (``work`` is
    cancelled then). On Python 3.11 and later this costs a timer, not the task that
    ``asyncio.wait_for`` makes for a coroutine (3.10 has only ``wait_for``)."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await work
    return await asyncio.wait_for(work, seconds)
