"""``AsyncInMemorySession``: :class:`~aniki.InMemorySession` with awaited methods."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..messages import Message, MessageLike
from ._catalog import KEEP, Keep
from ._closing import AsyncClosing
from .base import SessionInfo
from .memory import InMemorySession

__all__ = ["AsyncInMemorySession"]


class AsyncInMemorySession(AsyncClosing):
    """An :class:`~aniki.AsyncSession` kept in this process's memory, lost when it exits.

    What ``open_session("memory:", id, asynchronous=True)`` returns, so code written for
    async stores runs unchanged in tests. Nothing here does I/O: each call runs on the event
    loop and returns at once. Like ``InMemorySession``, two instances never share state.

    Example::

        session = AsyncInMemorySession("s1")
        await session.add_message({"role": "user", "content": "Hi"})
        await session.get_messages()  # (Message(role='user', content='Hi', ...),)
    """

    blocking = False  # no I/O: called inline, on the event loop

    def __init__(self, id: str | None = None) -> None:
        self._sync = InMemorySession(id)

    @property
    def id(self) -> str:
        """The session's label (a fresh unique string when none was given)."""
        return self._sync.id

    async def add_message(self, message: MessageLike) -> None:
        """Validate and append one message."""
        self._sync.add_message(message)

    async def add_messages(self, messages: Iterable[MessageLike]) -> None:
        """Validate all, then append all: a bad message stores none of the batch."""
        self._sync.add_messages(messages)

    async def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        """The history, oldest first; with ``limit``, only the most recent ``limit``."""
        return self._sync.get_messages(limit)

    async def clear(self) -> None:
        """Delete the history and any derived state."""
        self._sync.clear()

    async def fork(self, new_id: str, *, upto: str | None = None) -> AsyncInMemorySession:
        """:meth:`InMemorySession.fork <aniki.InMemorySession.fork>`, awaited."""
        forked = AsyncInMemorySession.__new__(AsyncInMemorySession)
        forked._sync = self._sync.fork(new_id, upto=upto)
        return forked

    async def undo(self) -> tuple[Message, ...]:
        """:meth:`InMemorySession.undo <aniki.InMemorySession.undo>`, awaited."""
        return self._sync.undo()

    async def get_meta(self, key: str) -> Any:
        """The derived-state value stored under ``key`` (``None`` when absent)."""
        return self._sync.get_meta(key)

    async def set_meta(self, key: str, value: Any) -> None:
        """Store derived state (a JSON-safe value) beside the history; ``None`` deletes."""
        self._sync.set_meta(key, value)

    async def _swap_meta(self, key: str, expected: Any, value: Any) -> bool:
        """As :meth:`InMemorySession._swap_meta`."""
        return self._sync._swap_meta(key, expected, value)

    async def info(self) -> SessionInfo:
        """:meth:`InMemorySession.info <aniki.InMemorySession.info>`, awaited."""
        return self._sync.info()

    async def set_info(
        self,
        *,
        title: str | Keep | None = KEEP,
        owner: str | Keep | None = KEEP,
        tags: Iterable[str] | Keep = KEEP,
    ) -> None:
        """:meth:`InMemorySession.set_info <aniki.InMemorySession.set_info>`, awaited."""
        self._sync.set_info(title=title, owner=owner, tags=tags)

    async def aclose(self) -> None:
        """Nothing to close; here for symmetry with the other async stores."""

    def __repr__(self) -> str:
        return f"AsyncInMemorySession(id={self.id!r}, messages={len(self._sync._memory)})"
