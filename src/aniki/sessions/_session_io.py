"""Talking to a session of either kind (sync ``Session`` or ``AsyncSession``), off the event
loop when its calls block: what the run engine and ``SummarizingSession`` call a store with.

A store may offer ``_add_then_get(messages, limit=None)``: append the batch atomically, then
return what ``get_messages(limit)`` returns right after it, in one round trip to its server
(Redis, PostgreSQL) instead of two. History policies offer ``_add_then_get(messages)`` over such
a store, and return ``None`` (having written nothing) when the store below them has none.
A run appends and then reads twice per turn, so these stores serve a turn in two round trips.

A streamed run keeps its tool turns out of the store until it completes; a policy offers
``_view_with(extra)`` to select over the stored history and those messages together.

The calls of a synchronous store that does I/O (SQLite, files, Redis, PostgreSQL, a custom
``Session``; a policy or ``EncryptedSession`` over one) run in a worker thread (see
:mod:`aniki._threads`), so that they never block the event loop: other tasks go on, and
a run's deadline fires even while the store hangs; a store that can tell a call will not
wait runs it at once instead (:mod:`aniki.sessions._now`). An ``AsyncSession`` is awaited
on the loop, and ``InMemorySession`` (no I/O), with any policy over it, is called inline:
a thread hop costs tens of microseconds. Which is which, and what else a store can do, its
class says (:mod:`aniki.sessions._capabilities`).

A call already running in a thread when its run is cancelled cannot be interrupted: the run
ends at once, and the call finishes in the background. Each write is one batch, written
whole by that call, so what it leaves behind is the whole batch or none of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from .._threads import STORES
from ..errors import TurnUndoneError
from ..messages import Message
from ._capabilities import Capabilities, add_all, blocking_of, capabilities_of
from ._driver import awaitable
from ._guard import HistoryMoved, TurnGuard, guarding
from ._now import NOT_NOW, attempt

__all__ = ["append", "append_then_read", "blocks", "call", "read", "read_with"]


def blocks(session: Any) -> bool:
    """Whether ``session``'s calls may block on I/O, and so should leave the event loop."""
    return blocking_of(session)


async def call(
    blocking: bool, work: Callable[[], Any], now: Callable[[Callable[[], Any]], Any] | None = None
) -> Any:
    """``work()``, in a worker thread when ``blocking`` (unless ``now``, the store's
    ``_try_now``, runs it at once: :mod:`aniki.sessions._now`); an awaitable it returns is
    awaited on the loop."""
    if not blocking:
        result = work()
    elif now is None or (result := await attempt(now, work)) is NOT_NOW:
        result = await STORES.submit(work)
    return await result if awaitable(result) else result


async def append(session: Any, messages: Sequence[Message]) -> None:
    """Append ``messages`` in one atomic batch when the store offers ``add_messages``.

    Without it the messages are appended one by one, and a run cancelled part-way still
    completes the batch (in its thread, or in a task of its own on the loop), so a turn is
    never stored in part: an assistant's tool call always with its results.
    """
    if messages:
        await _append(session, capabilities_of(session), list(messages))


async def _append(session: Any, can: Capabilities, batch: list[Message]) -> None:
    if can.blocking:
        await call(True, lambda: add_all(session, batch, can), can.try_now)
        return
    result = add_all(session, batch, can)
    if awaitable(result):
        writing = asyncio.ensure_future(result)
        writing.add_done_callback(_retrieve)  # its error, if the run was gone by then
        await asyncio.shield(writing)


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _append_then_read_now(session: Any, can: Capabilities, batch: list[Message]) -> Any:
    fused = can.add_then_get if batch else None
    if fused is not None:
        history = fused(batch)
        if history is not None:
            return history
    if batch:
        written = add_all(session, batch, can)
        if awaitable(written):  # a store that looked synchronous but is not
            return _read_after(written, session)
    return session.get_messages()


async def _read_after(written: Any, session: Any) -> Any:
    await written
    history = session.get_messages()
    return await history if awaitable(history) else history


async def read(session: Any, can: Capabilities | None = None) -> Sequence[Message]:
    """The session's history, as its ``get_messages()`` (and any policy on it) returns it
    (``can``: its capabilities, when known)."""
    return await _read(session, capabilities_of(session) if can is None else can)


async def _read(session: Any, can: Capabilities) -> Sequence[Message]:
    messages: Sequence[Message] = await call(can.blocking, session.get_messages, can.try_now)
    return messages


async def append_then_read(
    session: Any,
    messages: Sequence[Message],
    *,
    guard: TurnGuard | None = None,
    then: Callable[[], object] | None = None,
    can: Capabilities,
) -> Sequence[Message]:
    """:func:`append`, then :func:`read`: in one round trip when the store can fuse them,
    and in one trip to a worker thread for a store whose calls block.

    Under a run's ``guard`` the store appends only while the run's user message is still
    stored (see :mod:`aniki.sessions._guard`); else :class:`~aniki.TurnUndoneError`.
    ``then`` (a blocking call that raises nothing) runs right after a successful write in
    the same trip to the worker thread, for a store whose calls block; else not at all.
    ``can``: the session's capabilities (the run's, found once)."""
    if guard is not None:
        try:
            with guarding(guard):
                return await append_then_read(session, messages, then=then, can=can)
        except HistoryMoved:
            raise TurnUndoneError(str(session.id), messages) from None
    batch = list(messages)
    if can.blocking:

        def work() -> Any:
            history = _append_then_read_now(session, can, batch)
            if then is not None and not awaitable(history):
                then()
            return history

        history: Sequence[Message] = await call(True, work, can.try_now)
        return history
    fused = can.add_then_get if batch else None
    if fused is not None:
        history = await call(False, lambda: fused(batch))
        if history is not None:
            return history
    if batch:
        await _append(session, can, batch)
    return await _read(session, can)


async def read_with(session: Any, extra: Sequence[Message], can: Capabilities) -> Sequence[Message]:
    """The history followed by ``extra`` (messages not stored yet), as the model should see
    it: a history policy selects over both, so ``extra`` counts against its bound (``can``:
    the session's capabilities)."""
    view_with = can.view_with
    if not extra:
        return await _read(session, can)
    if view_with is None:
        return (*await _read(session, can), *extra)
    batch = list(extra)
    messages: Sequence[Message] = await call(can.blocking, lambda: view_with(batch), can.try_now)
    return messages
