"""The async twin of a local store: its sync session's methods, run in the file's lane.

:class:`Offloaded` holds one synchronous session (``SQLiteSession``, ``FileSession``) and
runs each of its methods in a worker thread, in the lane of the session's file
(:mod:`aniki._threads`). The logic, the checks on damaged files and the incremental
history cache are the sync class's own: written once, used by both.

On the event loop a call only validates its messages and hands them over; every ``sqlite3``
call, ``flock`` wait, ``write`` and ``fsync`` happens in the thread.

Cancellation: a call whose caller is cancelled before its thread starts it is dropped (none
of it happens); once started it finishes in the thread, and what it writes is, as always,
one whole transaction or line. Either way the session stays usable.

A sync session that can run a call at once on the loop's thread when it will not wait
(``_try_now``, see :mod:`aniki.sessions._now`) is asked first while its lane is idle: a
short SQLite call then costs no thread hop.

Time bounds: the sync session bounds the wait for another process's lock (``timeout=``).
A call also waits at most ``max(timeout, 1 s)`` for its turn behind this process's earlier
calls on the same file, then is dropped and raises :class:`~aniki.StoreUnavailableError`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import Future
from contextlib import suppress
from typing import Any, Generic, Protocol, TypeVar, cast

from .._threads import LANES
from ..errors import StoreUnavailableError
from ..messages import Message, MessageLike, to_message, to_messages
from ._args import check_limit
from ._closing import AsyncClosing
from ._now import LATER, NOT_NOW, attempt

__all__ = ["LocalStore", "Offloaded"]

T = TypeVar("T")

_LEAST_TURN_WAIT = 1.0
"""Seconds a call may always wait for its turn, even with ``timeout=0``: calls of this
process on the file ahead of it are short (a commit, a line) unless the disk hangs."""


class LocalStore(Protocol):
    """What :class:`Offloaded` calls on the sync session it holds."""

    @property
    def id(self) -> str: ...

    def add_message(self, message: MessageLike) -> None: ...

    def add_messages(self, messages: Iterable[MessageLike]) -> None: ...

    def get_messages(self, limit: int | None = None) -> tuple[Message, ...]: ...

    def clear(self) -> None: ...

    def get_meta(self, key: str) -> Any: ...

    def set_meta(self, key: str, value: Any) -> None: ...

    def _swap_meta(self, key: str, expected: Any, value: Any) -> bool: ...

    def _add_after(
        self, messages: list[Message], after: str | None, *, read: bool, limit: int | None
    ) -> tuple[Message, ...] | None: ...

    def close(self) -> None: ...


StoreT = TypeVar("StoreT", bound=LocalStore)


class Offloaded(AsyncClosing, Generic[StoreT]):
    """Base of the async twins: every method awaits the sync session's, run in its lane."""

    def __init__(self, sync: StoreT, *, lane: Hashable, timeout: float, store: str) -> None:
        self._sync = sync
        self._lane = lane
        self._turn_wait = max(timeout, _LEAST_TURN_WAIT)
        self._store = store
        self._now: Callable[[Callable[[], Any]], Any] | None = getattr(sync, "_try_now", None)
        # The sync session's own append-then-read (one statement where it can), if it has one.
        self._fused: Callable[..., tuple[Message, ...]] | None = getattr(
            sync, "_add_then_get", None
        )

    @property
    def id(self) -> str:
        """The conversation's id."""
        return self._sync.id

    async def add_message(self, message: MessageLike) -> None:
        """Validate and append one message (one transaction or line)."""
        checked = to_message(message)
        await self._call(lambda: self._sync.add_message(checked))

    async def add_messages(self, messages: Iterable[MessageLike]) -> None:
        """Validate every message, then append them atomically: all or nothing."""
        batch = to_messages(messages)
        if batch:
            await self._call(lambda: self._write(batch))

    async def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        """The history, oldest first; with ``limit``, only the most recent ``limit``."""
        checked = check_limit(limit)
        return await self._call(lambda: self._sync.get_messages(checked))

    async def _add_then_get(
        self, messages: list[Message], limit: int | None = None
    ) -> tuple[Message, ...]:
        # add_messages then get_messages in one trip to the thread (see aniki.sessions._session_io).
        batch = to_messages(messages)
        checked = check_limit(limit)

        def both() -> tuple[Message, ...]:
            if batch and self._fused is not None:
                return self._fused(batch, checked)
            if batch:
                self._write(batch)
            return self._sync.get_messages(checked)

        return await self._call(both)

    async def _add_after(
        self,
        messages: list[Message],
        after: str | None,
        *,
        read: bool = False,
        limit: int | None = None,
    ) -> tuple[Message, ...] | None:
        # The sync session's _add_after (aniki.sessions._capabilities.AppendsAfter) in one trip to
        # the thread: with read, the read after it too.
        batch = to_messages(messages)
        checked = check_limit(limit)
        return await self._call(
            lambda: self._sync._add_after(batch, after, read=read, limit=checked)
        )

    async def clear(self) -> None:
        """Delete the history and its derived state; other instances see it on their next read."""
        await self._call(self._sync.clear)

    async def get_meta(self, key: str) -> Any:
        """The derived-state value stored under ``key`` (``None`` when absent)."""
        return await self._call(lambda: self._sync.get_meta(key))

    async def set_meta(self, key: str, value: Any) -> None:
        """Store a JSON-safe value under ``key`` beside the history; ``None`` deletes it."""
        await self._call(lambda: self._sync.set_meta(key, value))

    async def _swap_meta(self, key: str, expected: Any, value: Any) -> bool:
        """Set meta ``key`` to ``value`` only if it now holds ``expected``; whether it did.

        As the sync session's ``_swap_meta``: atomic across processes, values compared as
        JSON, ``expected=None`` meaning absent and ``value=None`` deleting the key.
        """
        return await self._call(lambda: self._sync._swap_meta(key, expected, value))

    async def aclose(self) -> None:
        """Drop the cache and close what the session holds open; it reopens on next use."""
        await self._call(self._sync.close)

    def _write(self, batch: list[Message]) -> None:
        # One message takes the store's single-statement path.
        if len(batch) == 1:
            self._sync.add_message(batch[0])
        else:
            self._sync.add_messages(batch)

    def _now_in_lane(self, work: Callable[[], Any]) -> Any:
        # The sync session's _try_now, once the calls already in the lane have run.
        return LATER if LANES.busy(self._lane) else cast(Any, self._now)(work)

    async def _call(self, work: Callable[[], T]) -> T:
        """``work()`` in this file's lane; see the module docstring for cancellation."""
        now = self._now
        if now is not None:
            result = await attempt(self._now_in_lane, work)
            if result is not NOT_NOW:
                return cast(T, result)
        loop = asyncio.get_running_loop()
        future = LANES.submit(self._lane, work)
        waiting: asyncio.Future[T] = loop.create_future()

        def settled(_: Future[T]) -> None:  # in the worker thread
            with suppress(RuntimeError):  # the loop was closed meanwhile
                loop.call_soon_threadsafe(_copy, future, waiting)

        def expire() -> None:
            if future.cancel() and not waiting.done():  # it had not started: it never will
                waiting.set_exception(
                    StoreUnavailableError(
                        f"this process's earlier calls on the file kept it busy for "
                        f"{self._turn_wait:g} s, so this call was not made; retry, or raise "
                        "timeout=",
                        store=self._store,
                    )
                )

        future.add_done_callback(settled)
        timer = loop.call_later(self._turn_wait, expire)
        try:
            return await waiting
        except asyncio.CancelledError:
            future.cancel()  # dropped if it has not started; otherwise it runs to its end
            raise
        finally:
            timer.cancel()


def _copy(future: Future[T], waiting: asyncio.Future[T]) -> None:
    if waiting.done() or future.cancelled():
        return
    error = future.exception()
    if error is not None:
        waiting.set_exception(error)
    else:
        waiting.set_result(future.result())
