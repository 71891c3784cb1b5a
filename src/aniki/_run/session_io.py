"""Talking to a session of either kind (sync ``Session`` or ``AsyncSession``)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from ..messages import Message

__all__ = ["append", "read"]


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
