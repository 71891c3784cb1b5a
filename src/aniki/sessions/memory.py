"""``InMemorySession``: history held in this process only."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from ..memory import Memory
from ..messages import Message, MessageLike
from ._codec import check_session_id

__all__ = ["InMemorySession"]


class InMemorySession:
    """A session kept in this process's memory, lost when the process exits.

    Two instances never share state, even with the same id: the id is a label, not a key
    into shared storage. Use :class:`~aniki.SQLiteSession` (or another persistent store)
    when a conversation must survive a restart.

    Example::

        session = InMemorySession("s1")
        session.add_message({"role": "user", "content": "Hi"})
        session.get_messages()  # (Message(role='user', content='Hi', ...),)
        session.clear()
        session.get_messages()  # ()
    """

    def __init__(self, id: str | None = None) -> None:
        self._id = check_session_id(id) if id is not None else uuid.uuid4().hex
        self._memory = Memory()
        self._meta: dict[str, Any] = {}

    @property
    def id(self) -> str:
        """The session's label (a fresh unique string when none was given)."""
        return self._id

    def add_message(self, message: MessageLike) -> None:
        """Validate and append one message."""
        self._memory.add_message(message)

    def add_messages(self, messages: Iterable[MessageLike]) -> None:
        """Validate all, then append all: a bad message stores none of the batch."""
        self._memory.add_messages(messages)

    def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        """The history, oldest first; with ``limit``, only the most recent ``limit``."""
        return self._memory.get_messages(limit)

    def clear(self) -> None:
        """Delete the history and any derived state (such as a stored summary)."""
        self._memory.clear()
        self._meta.clear()

    def get_meta(self, key: str) -> Any:
        """The derived-state value stored under ``key`` (``None`` when absent)."""
        return self._meta.get(key)

    def set_meta(self, key: str, value: Any) -> None:
        """Store derived state (a JSON-safe value) beside the history; ``None`` deletes."""
        if value is None:
            self._meta.pop(key, None)
        else:
            self._meta[key] = value

    def __repr__(self) -> str:
        return f"InMemorySession(id={self._id!r}, messages={len(self._memory)})"
