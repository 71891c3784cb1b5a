"""``HistoryCache``: the history a session instance has already read from its store.

A store tags what it returns with a *generation* (a value that changes whenever the session
is cleared) and a *position* (how far this instance has read: a count, the last sequence
number or key, a byte offset in a file). The next read asks the store only for what lies
past the position, and starts over when the generation changed, so a long conversation costs
O(new messages) per read. Every built-in store but the in-memory one keeps its history so.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Sequence
from typing import Any, Generic, TypeVar

from ..messages import Message

__all__ = ["HistoryCache", "unfused"]

G = TypeVar("G")
S = TypeVar("S")

Flow = Generator[S, Any, "tuple[Message, ...]"]


class HistoryCache(Generic[G]):
    """Messages read so far, their generation and the position reached."""

    __slots__ = ("_messages", "_snapshot", "generation", "position")

    def __init__(self) -> None:
        self.generation: G | None = None
        """The generation the messages were read under; ``None`` when nothing is cached."""
        self.position = 0
        """Where the next read starts (exclusive), in the store's own terms."""
        self._messages: list[Message] = []
        self._snapshot: tuple[Message, ...] | None = ()

    def __len__(self) -> int:
        return len(self._messages)

    def reset(self, generation: G | None = None, position: int = 0) -> None:
        """Forget everything (a clear, or a generation this instance has not seen); the next
        read starts at ``position`` (where the store's records begin)."""
        self.generation, self.position = generation, position
        self._messages, self._snapshot = [], ()

    def extend(self, messages: Iterable[Message], position: int) -> None:
        """Add what was read (or written) past :attr:`position`, which moves to ``position``."""
        self._messages.extend(messages)
        self.position = position
        self._snapshot = None  # rebuilt by the next view, not on every append

    def view(self, limit: int | None = None) -> tuple[Message, ...]:
        """The cached history as an immutable snapshot; with ``limit``, its last ``limit``."""
        if limit is not None:  # a window costs its own size, not the history's
            return tuple(self._messages[-limit:]) if limit > 0 else ()
        if self._snapshot is None:
            self._snapshot = tuple(self._messages)
        return self._snapshot


def unfused(
    messages: Sequence[Message],
    limit: int | None,
    append: Callable[[Sequence[Message]], Generator[S, Any, object]],
    read: Callable[[int | None], Flow[S]],
) -> Flow[S] | None:
    """The flow for an append-then-read that needs no fused step (nothing to append, or
    nothing to return), else ``None``: the store's own flows, run one after the other."""
    if not messages:
        return read(limit)
    if limit is not None and limit <= 0:
        return _append_only(append(messages))
    return None


def _append_only(append: Generator[S, Any, object]) -> Flow[S]:
    yield from append
    return ()
