"""Talking to a session of either kind (sync ``Session`` or ``AsyncSession``).

A store may offer ``_add_then_get(messages, limit=None)``: append the batch atomically, then
return what ``get_messages(limit)`` returns right after it, in one round trip to its server
(Redis, PostgreSQL) instead of two. History policies offer ``_add_then_get(messages)`` over such
a store, and return ``None`` (having written nothing) when the store below them has none.
A run appends and then reads twice per turn, so these stores serve a turn in two round trips.

A streamed run keeps its tool turns out of the store until it completes; a policy offers
``_view_with(extra)`` to select over the stored history and those messages together.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from ..messages import Message

__all__ = ["append", "append_then_read", "read", "read_with"]


async def _resolve(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def append(session: Any, messages: Sequence[Message]) -> None:
    """Append ``messages`` in one atomic batch when the store offers ``add_messages``."""
    if not messages:
        return
    add_many = getattr(session, "add_messages", None)
    if add_many is not None:
        await _resolve(add_many(list(messages)))
        return
    for message in messages:
        await _resolve(session.add_message(message))


async def read(session: Any) -> Sequence[Message]:
    """The session's history, as its ``get_messages()`` (and any policy on it) returns it."""
    messages: Sequence[Message] = await _resolve(session.get_messages())
    return messages


async def append_then_read(session: Any, messages: Sequence[Message]) -> Sequence[Message]:
    """:func:`append`, then :func:`read`: in one round trip when the store can fuse them."""
    fused = getattr(session, "_add_then_get", None) if messages else None
    if fused is not None:
        history = fused(list(messages))
        if history is not None:
            result: Sequence[Message] = await _resolve(history)
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
        messages: Sequence[Message] = await _resolve(view_with(extra))
        return messages
    return (*await read(session), *extra)
