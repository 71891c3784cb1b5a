"""Talking to a session of either kind (sync ``Session`` or ``AsyncSession``).

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
a run's deadline fires even while the store hangs. An ``AsyncSession`` is awaited on the
loop, and ``InMemorySession`` (no I/O), with any policy over it, is called inline: a thread
hop costs tens of microseconds.

A call already running in a thread when its run is cancelled cannot be interrupted: the run
ends at once, and the call finishes in the background. Each write is one batch, written
whole by that call, so what it leaves behind is the whole batch or none of it.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .._threads import STORES
from ..errors import TurnUndoneError
from ..messages import Message
from ..sessions._guard import HistoryMoved, TurnGuard, guarding

__all__ = ["append", "append_then_read", "blocks", "call", "read", "read_with"]


def _loaded(module: str, name: str) -> Any:
    """``module.name`` if that module is imported already, else ``None``: an object cannot be
    an instance of a class not loaded yet, and importing it here would be on the loop."""
    found = sys.modules.get(module)
    return getattr(found, name, None) if found is not None else None


def blocks(session: Any) -> bool:
    """Whether ``session``'s calls may block on I/O, and so should leave the event loop."""
    memory = _loaded("aniki.sessions.memory", "InMemorySession")
    wrappers = tuple(
        cls
        for cls in (
            _loaded("aniki.sessions.policies._policy", "SuffixPolicy"),
            _loaded("aniki.sessions.encrypted", "EncryptedSession"),
        )
        if cls is not None
    )
    for _ in range(64):  # wrappers of wrappers; a cycle is not a store
        if memory is not None and type(session) is memory:  # a subclass may add I/O
            return False
        if wrappers and isinstance(session, wrappers):
            session = session.inner
            continue
        method = getattr(session, "get_messages", None)
        return not inspect.iscoroutinefunction(method)
    return True


async def call(blocking: bool, work: Callable[[], Any]) -> Any:
    """``work()``, in a worker thread when ``blocking``; an awaitable it returns is awaited
    on the loop."""
    if blocking:
        result = await STORES.submit(work)
    else:
        result = work()
    return await result if inspect.isawaitable(result) else result


def _append_now(session: Any, batch: list[Message]) -> Any:
    add_many = getattr(session, "add_messages", None)
    if add_many is not None:
        return add_many(batch)
    from ..sessions.policies._policy import add_each

    return add_each(session, batch)


async def append(session: Any, messages: Sequence[Message]) -> None:
    """Append ``messages`` in one atomic batch when the store offers ``add_messages``.

    Without it the messages are appended one by one, and a run cancelled part-way still
    completes the batch (in its thread, or in a task of its own on the loop), so a turn is
    never stored in part: an assistant's tool call always with its results.
    """
    if not messages:
        return
    batch = list(messages)
    if blocks(session):
        await call(True, lambda: _append_now(session, batch))
        return
    result = _append_now(session, batch)
    if inspect.isawaitable(result):
        writing = asyncio.ensure_future(result)
        writing.add_done_callback(_retrieve)  # its error, if the run was gone by then
        await asyncio.shield(writing)


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _append_then_read_now(session: Any, batch: list[Message]) -> Any:
    fused = getattr(session, "_add_then_get", None) if batch else None
    if fused is not None:
        history = fused(batch)
        if history is not None:
            return history
    if batch:
        written = _append_now(session, batch)
        if inspect.isawaitable(written):  # a store that looked synchronous but is not
            return _read_after(written, session)
    return session.get_messages()


async def _read_after(written: Any, session: Any) -> Any:
    await written
    history = session.get_messages()
    return await history if inspect.isawaitable(history) else history


async def read(session: Any) -> Sequence[Message]:
    """The session's history, as its ``get_messages()`` (and any policy on it) returns it."""
    messages: Sequence[Message] = await call(blocks(session), session.get_messages)
    return messages


async def append_then_read(
    session: Any, messages: Sequence[Message], *, guard: TurnGuard | None = None
) -> Sequence[Message]:
    """:func:`append`, then :func:`read`: in one round trip when the store can fuse them,
    and in one trip to a worker thread for a store whose calls block.

    Under a run's ``guard`` the store appends only while the run's user message is still
    stored (see :mod:`aniki.sessions._guard`); else :class:`~aniki.TurnUndoneError`."""
    if guard is not None:
        try:
            with guarding(guard):
                return await append_then_read(session, messages)
        except HistoryMoved:
            raise TurnUndoneError(str(session.id), messages) from None
    if blocks(session):
        batch = list(messages)
        history: Sequence[Message] = await call(True, lambda: _append_then_read_now(session, batch))
        return history
    fused = getattr(session, "_add_then_get", None) if messages else None
    if fused is not None:
        batch = list(messages)
        history = await call(blocks(session), lambda: fused(batch))
        if history is not None:
            result: Sequence[Message] = history
            return result
    await append(session, messages)
    return await read(session)


async def read_with(session: Any, extra: Sequence[Message]) -> Sequence[Message]:
    """The history followed by ``extra`` (messages not stored yet), as the model should see
    it: a history policy selects over both, so ``extra`` counts against its bound."""
    if not extra:
        return await read(session)
    view_with = getattr(session, "_view_with", None)
    if view_with is not None:
        batch = list(extra)
        messages: Sequence[Message] = await call(blocks(session), lambda: view_with(batch))
        return messages
    return (*await read(session), *extra)
