"""The interface every framework adapter implements, so workloads never name a framework.

A workload opens a :class:`Backend` for one :class:`StoreSpec` and drives it: ``chat`` for
conversations (workloads 1 and 5), ``fill`` and ``reader`` for stored history (workload 3),
``appender`` for single-message appends (workload 2). Every model behind a chat is scripted:
it answers :data:`REPLY` at once (or after ``delay`` seconds of ``asyncio.sleep``), so what is
measured is the framework's own cost.

An adapter raises :class:`Unsupported` for a store or feature it has no equivalent of; the
workload records that as a note instead of a figure.

A peer that can send the model only the last messages of a conversation also offers
``trimmed_chat`` (:class:`Trimming`), with a model that reads what it is sent and answers
through an :data:`Answer` (workload 7 prices those requests).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Literal, Protocol

__all__ = [
    "INSTRUCTIONS",
    "REPLY",
    "USER_MESSAGE",
    "Answer",
    "Appender",
    "Backend",
    "Chat",
    "Durability",
    "Peer",
    "Reader",
    "StoreKind",
    "StoreSpec",
    "Trimming",
    "Unsupported",
]

USER_MESSAGE = ("The quick brown fox jumps over the lazy dog; " * 5)[:200]
"""Every user turn: 200 characters."""
REPLY = ("A scripted answer that only measures the framework around the model. " * 3)[:200]
"""Every scripted reply: 200 characters."""
INSTRUCTIONS = "You are a helpful assistant."
"""The system prompt of every benchmark agent."""

StoreKind = Literal["memory", "sqlite", "file", "redis", "postgres"]
Durability = Literal["off", "normal", "full"]


@dataclass(frozen=True)
class StoreSpec:
    """Where a framework keeps the conversation."""

    kind: StoreKind
    """The kind of store."""
    location: str = ""
    """A file path (sqlite), a directory (file), a URL (redis) or a DSN (postgres)."""
    durability: Durability = "full"
    """For local files: how hard a commit is kept (SQLite ``synchronous``, fsync per write)."""
    namespace: str = "bench"
    """A run-unique prefix for keys and tables on shared servers, so runs never collide."""
    cleanup: bool = True
    """Whether closing the backend removes the namespace's data from shared servers (a child
    process reading history that its parent wrote passes ``False``)."""

    @property
    def label(self) -> str:
        """How the store is named in the table."""
        if self.kind in ("sqlite", "file"):
            return f"{self.kind} ({self.durability})"
        return self.kind


class Unsupported(Exception):
    """The framework has no equivalent of the store or feature asked for (a note, not a failure)."""


class Chat(Protocol):
    """One conversation with a scripted model."""

    async def turn(self, text: str) -> int:
        """Run one user turn; return how many history messages the model was sent.

        The count excludes the system prompt; it lets a workload check that every framework
        really sent the whole history (a framework that dropped it would look fast).
        """
        ...


class Reader(Protocol):
    """Reads one stored conversation; keeps whatever state the framework keeps between reads."""

    async def read(self, limit: int | None) -> Sequence[object]:
        """Read the history (the last ``limit`` messages, or all), as the framework returns it."""
        ...


Appender = Callable[[int], Awaitable[None]]
"""Appends the ``i``-th benchmark message to a conversation, one durable write each."""

Answer = Callable[[list[tuple[str, str]]], str]
"""A scripted model that reads its request: given every message it was sent as
``(role, content)``, the system prompt first, it returns the reply's text."""


class Backend(Protocol):
    """A framework bound to one open store."""

    def chat(self, conversation_id: str, *, delay: float = 0.0) -> Chat:
        """A conversation whose scripted model sleeps ``delay`` seconds per call."""
        ...

    async def fill(self, conversation_id: str, count: int) -> None:
        """Store ``count`` messages (alternating user and assistant) as fast as it can."""
        ...

    def reader(self, conversation_id: str) -> Reader:
        """A fresh reader of the conversation (a new session object, where there is one)."""
        ...

    def appender(self, conversation_id: str) -> Appender:
        """Appends single messages to the conversation."""
        ...


class Peer(Protocol):
    """A framework under benchmark."""

    name: str
    """Its column in the table."""
    module: str
    """What ``import`` brings it in (workload 4)."""

    def available(self) -> bool:
        """Whether it is installed."""
        ...

    def open(self, store: StoreSpec) -> AbstractAsyncContextManager[Backend]:
        """Open ``store``; closing releases connections and removes run-scoped server data."""
        ...


class Trimming(Protocol):
    """A peer that can send the model only the most recent messages of a conversation."""

    def trimmed_chat(self, history: int, answer: Answer) -> Chat:
        """An in-memory conversation whose every request holds the system prompt, at most
        ``history`` earlier messages and the new one, answered by ``answer``."""
        ...
