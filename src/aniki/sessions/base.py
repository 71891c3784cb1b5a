"""The session protocols: the whole contract between the Runner and a history store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, cast, runtime_checkable

from .._checks import shown
from ..errors import UserError
from ..messages import Message, MessageLike

__all__ = ["AsyncSession", "Session", "SessionInfo", "require_session"]


@runtime_checkable
class Session(Protocol):
    """A conversation's history, stored anywhere.

    Exactly four members, so a custom store is a thin wrapper. The Runner appends every
    message of a run through :meth:`add_message` and reads the history to send through
    :meth:`get_messages`. Built-in stores also offer ``add_messages(batch)`` (atomic) and
    ``get_messages(limit=None)``; the Runner uses ``add_messages`` when a store has it.

    Example::

        class ListSession:
            def __init__(self, id: str) -> None:
                self.id = id
                self._messages: list[Message] = []

            def add_message(self, message: MessageLike) -> None:
                self._messages.append(to_message(message))

            def get_messages(self) -> Sequence[Message]:
                return tuple(self._messages)

            def clear(self) -> None:
                self._messages.clear()
    """

    @property
    def id(self) -> str:
        """The conversation's id."""
        ...

    def add_message(self, message: MessageLike) -> None:
        """Validate and append one message."""
        ...

    def get_messages(self) -> Sequence[Message]:
        """The history, oldest first."""
        ...

    def clear(self) -> None:
        """Delete the history."""
        ...


@runtime_checkable
class AsyncSession(Protocol):
    """:class:`Session` for stores whose I/O is asynchronous: the same members, awaited."""

    @property
    def id(self) -> str:
        """The conversation's id."""
        ...

    async def add_message(self, message: MessageLike) -> None:
        """Validate and append one message."""
        ...

    async def get_messages(self) -> Sequence[Message]:
        """The history, oldest first."""
        ...

    async def clear(self) -> None:
        """Delete the history."""
        ...


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One stored conversation, as a store's ``list_sessions()`` and a session's ``info()``
    report it. The fields after ``updated_at`` are what an app sets with ``set_info``."""

    id: str
    """The session id."""
    message_count: int
    """How many messages it holds."""
    updated_at: datetime | None
    """When it was last written (UTC): a message appended or removed, or its info set."""
    title: str | None = None
    """A title the app gave it (``None``: none)."""
    owner: str | None = None
    """The user (or tenant) it belongs to, as the app names them (``None``: none)."""
    tags: tuple[str, ...] = ()
    """Labels the app gave it, sorted, each once."""
    created_at: datetime | None = None
    """When it was first written (UTC), when the store records it."""


def require_session(value: object, where: str = "session=") -> Session | AsyncSession:
    """``value`` when it has the four members of :class:`Session` (or :class:`AsyncSession`),
    else a :class:`~aniki.UserError` saying what to pass instead."""
    missing = missing_methods(value)
    if not hasattr(value, "id"):
        missing.insert(0, "id")
    if not missing and not isinstance(value, type):
        return cast("Session | AsyncSession", value)
    wanted = f"{where} takes a Session or AsyncSession object such as SQLiteSession('user-1')"
    if isinstance(value, str):
        raise UserError(f"{wanted}, not a session id; got str {shown(value)}")
    if isinstance(value, type):
        name = value.__name__
        raise UserError(f"{wanted}; got the class {name} itself: create one, {name}('user-1')")
    kind = type(value).__name__
    if "add_message" in missing and "get_messages" in missing:  # not meant as a session
        raise UserError(f"{wanted}; got {kind}")
    absent = ", ".join(name if name == "id" else f"{name}()" for name in missing)
    raise UserError(f"{wanted}; got {kind}, which has no {absent}")


def missing_methods(value: object) -> list[str]:
    """Which of ``add_message``, ``get_messages``, ``clear`` ``value`` lacks (none: a session).

    The one membership check made by name: these three are what makes a session."""
    return [
        name
        for name in ("add_message", "get_messages", "clear")
        if not callable(getattr(value, name, None))
    ]
