"""``Memory``: the append-only, validating message store that in-process sessions build on."""

from __future__ import annotations

from collections.abc import Iterable

from ._stamps import stamp, stamp_one
from .errors import UserError
from .messages import Message, MessageLike, to_message, to_messages

__all__ = ["Memory"]


class Memory:
    """An ordered, append-only list of validated messages, held in this process.

    Every message is validated as it is added, so a malformed one is refused with
    :class:`~aniki.ValidationError` before anything is stored.

    Example::

        memory = Memory()
        memory.add_message({"role": "user", "content": "Hi"})
        memory.get_messages()  # (Message(role='user', content='Hi', ...),)
    """

    __slots__ = ("_messages",)

    def __init__(self, messages: Iterable[MessageLike] = ()) -> None:
        self._messages: list[Message] = stamp(to_messages(messages), keep=True)

    def add_message(self, message: MessageLike) -> None:
        """Validate ``message`` and append it."""
        self._messages.append(stamp_one(to_message(message)))

    def add_messages(self, messages: Iterable[MessageLike]) -> None:
        """Validate every message first, then append them all: all or nothing."""
        self._messages.extend(stamp(to_messages(messages)))

    def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        """A snapshot of the messages in order; with ``limit``, only the most recent ``limit``."""
        if limit is None:
            return tuple(self._messages)
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise UserError(f"limit must be an int or None, got {type(limit).__name__}")
        if limit <= 0:
            return ()
        return tuple(self._messages[-limit:])

    def clear(self) -> None:
        """Remove every message."""
        self._messages.clear()

    def undo(self) -> tuple[Message, ...]:
        """Remove the last turn (the last user message and everything after it) and return
        it, oldest first; ``()`` when no user message is held."""
        start = len(self._messages)
        for position in range(start - 1, -1, -1):
            if self._messages[position].role == "user":
                start = position
                break
        removed = tuple(self._messages[start:])
        del self._messages[start:]
        return removed

    def copy(self, count: int | None = None) -> Memory:
        """A new memory holding the first ``count`` messages (all of them when ``None``),
        ids and times kept."""
        copied = Memory()
        copied._messages = self._messages[:count]
        return copied

    def __len__(self) -> int:
        return len(self._messages)

    def __repr__(self) -> str:
        return f"Memory({len(self._messages)} messages)"
