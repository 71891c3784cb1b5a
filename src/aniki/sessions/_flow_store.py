"""What the stores written as flows share (Redis and PostgreSQL; see :mod:`._driver`).

- :class:`FlowCore`: a store's I/O-free core. It writes ``append``, ``read`` and
  ``_append_read`` (an append and the read after it, fused into one step); the appends that
  follow a named message, or read back, are built from those three here, once.
- :class:`FlowSession`: the calls of a session class of such a store, each of which builds
  its flow and hands it to the class's ``_run``: the private ones, written once for sync and
  async classes (each returns what ``_run`` does: the result, or an awaitable of it), and, in
  :class:`SyncFlowSession` and :class:`AsyncFlowSession`, the public methods of each kind.
  A store's classes add what is their own: ``_run``, ``fork``, ``undo``, closing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Generic, TypeVar

from .._stamps import stamp, stamp_one
from ..messages import Message, MessageLike, to_message, to_messages
from ._args import check_limit
from ._catalog import KEEP, InfoChange, Keep, Listing, check_info
from ._driver import Flow
from ._history_cache import unfused
from .base import SessionInfo

__all__ = ["AsyncFlowSession", "FlowCore", "FlowSession", "SyncFlowSession"]

Q = TypeVar("Q")
C = TypeVar("C", bound="FlowCore[Any]")
T = TypeVar("T")
S = TypeVar("S")


class FlowCore(Generic[Q]):
    """The state and flows of one session of a store whose flows yield requests ``Q``."""

    id: str
    """The session's id, checked."""
    store: str
    """How errors name the store (no password)."""

    def append(self, messages: Sequence[Message], after: str | None = None) -> Flow[Q, bool]:
        """Append ``messages``; with ``after`` (an id, or ``''`` for none), only after the
        message with that id: whether they were appended."""
        raise NotImplementedError

    def read(self, limit: int | None) -> Flow[Q, tuple[Message, ...]]:
        """The history, or its last ``limit`` messages."""
        raise NotImplementedError

    def _append_read(
        self, messages: Sequence[Message], limit: int | None, after: str | None
    ) -> Flow[Q, tuple[Message, ...] | None]:
        """:meth:`append_then_read` of a batch and a limit it fuses; with ``after``, as
        :meth:`append` (``None`` when another message is last)."""
        raise NotImplementedError

    def clear(self) -> Flow[Q, None]:
        """Delete the history and the derived state."""
        raise NotImplementedError

    def replace(self, messages: Sequence[Message]) -> Flow[Q, None]:
        """Clear, then append ``messages``, as one write."""
        raise NotImplementedError

    def get_meta(self, key: str) -> Flow[Q, Any]:
        """The derived-state value under ``key`` (``None`` when absent)."""
        raise NotImplementedError

    def set_meta(self, key: str, value: Any) -> Flow[Q, None]:
        """Store ``value`` under ``key``; ``None`` deletes it."""
        raise NotImplementedError

    def swap_meta(self, key: str, expected: Any, value: Any) -> Flow[Q, bool]:
        """Set meta ``key`` to ``value`` only if it holds ``expected`` (compared as JSON)."""
        raise NotImplementedError

    def list_sessions(self, listing: Listing) -> Flow[Q, list[SessionInfo]]:
        """The page of the store's sessions ``listing`` asks for (see ``_catalog``)."""
        raise NotImplementedError

    def info(self) -> Flow[Q, SessionInfo]:
        """This session's info: title, owner, tags, count and times."""
        raise NotImplementedError

    def set_info(self, change: InfoChange) -> Flow[Q, None]:
        """Apply ``change`` to this session's info (a write: ``updated_at`` moves)."""
        raise NotImplementedError

    def prune(self, cutoff: datetime, owner: str | None) -> Flow[Q, int]:
        """Remove the store's sessions (of ``owner``) last written before ``cutoff``, whole,
        a batch of at most ``PRUNE_BATCH`` per request; how many went."""
        raise NotImplementedError

    def delete_sessions(self, owner: str) -> Flow[Q, int]:
        """Remove every session of ``owner`` as :meth:`prune` does; how many went."""
        raise NotImplementedError

    def append_after(
        self, messages: Sequence[Message], after: str | None, read: bool, limit: int | None
    ) -> Flow[Q, tuple[Message, ...] | None]:
        """:meth:`append` (with ``read``, :meth:`append_then_read`) only after the message
        whose id is ``after`` (``None``: none is stored): ``None`` when another is last;
        without ``read``, ``messages``."""
        mark = "" if after is None else after
        if read and messages and (limit is None or limit > 0):
            return (yield from self._append_read(messages, limit, mark))
        if not (yield from self.append(messages, mark)):
            return None
        return (yield from self.read(limit)) if read else tuple(messages)

    def append_then_read(
        self, messages: Sequence[Message], limit: int | None
    ) -> Flow[Q, tuple[Message, ...]]:
        """:meth:`append`, then :meth:`read`, fused into one step (a store whose fused step
        finds that another writer came in between reads again)."""
        plain = unfused(messages, limit, self.append, self.read)
        if plain is not None:
            return (yield from plain)
        found = yield from self._append_read(messages, limit, None)
        assert found is not None  # only an append after a named message is refused
        return found


class FlowSession(Generic[C]):
    """The private calls of a flow store's session classes (``aniki.sessions._session_io``,
    the encrypted session and ``aniki sessions import`` make them), written once for the
    sync and the async class: each returns what the class's ``_run`` does."""

    _core: C

    @property
    def id(self) -> str:
        """The conversation's id."""
        return self._core.id

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r}, store={self._core.store!r})"

    def _run(self, make: Callable[[], Flow[Any, T]], *, read: bool = False) -> Any:
        """Run the flow ``make()`` gives: its result, or an awaitable of it. ``make`` is
        called again for a retry; ``read``: the flow only reads (a store may retry it where
        a write could have been applied)."""
        raise NotImplementedError

    def _add_then_get(self, messages: list[Message], limit: int | None = None) -> Any:
        # add_messages then get_messages in one round trip (see aniki.sessions._session_io).
        checked, batch = check_limit(limit), stamp(messages)
        return self._run(lambda: self._core.append_then_read(batch, checked))

    def _add_after(
        self,
        messages: list[Message],
        after: str | None,
        *,
        read: bool = False,
        limit: int | None = None,
    ) -> Any:
        # add_messages (with read, then get_messages) in one step, only after the message
        # with the id `after` (aniki.sessions._capabilities.AppendsAfter); None, writing
        # nothing, if another message is last.
        checked, batch = check_limit(limit), stamp(messages)
        return self._run(lambda: self._core.append_after(batch, after, read, checked))

    def _replace(self, messages: Iterable[MessageLike]) -> Any:
        # clear() then add_messages() as one write (used by `aniki sessions import`).
        batch = stamp(to_messages(messages), keep=True)
        return self._run(lambda: self._core.replace(batch))

    def _list(self, listing: Listing) -> Any:
        # A store's listing (aniki.sessions.store): any session of the store serves it.
        return self._run(lambda: self._core.list_sessions(listing), read=True)

    def _prune(self, cutoff: datetime, owner: str | None) -> Any:
        return self._run(lambda: self._core.prune(cutoff, owner))

    def _delete(self, owner: str) -> Any:
        return self._run(lambda: self._core.delete_sessions(owner))

    def _swap_meta(self, key: str, expected: Any, value: Any) -> Any:
        """Set meta ``key`` to ``value`` only if it now holds ``expected``; whether it did.

        Atomic across processes. Values compare as JSON (same types and values, any key
        order); ``expected=None`` means the key is absent, ``value=None`` deletes it.
        """
        return self._run(lambda: self._core.swap_meta(key, expected, value))


class SyncFlowSession(FlowSession[C]):
    """The public methods of a flow store's sync session class."""

    def _run(self, make: Callable[[], Flow[Any, T]], *, read: bool = False) -> T:
        raise NotImplementedError

    def add_message(self, message: MessageLike) -> None:
        """Validate and append one message."""
        batch = [stamp_one(to_message(message))]
        self._run(lambda: self._core.append(batch))

    def add_messages(self, messages: Iterable[MessageLike]) -> None:
        """Validate all, then append all atomically: other readers see all or none."""
        batch = stamp(to_messages(messages))
        self._run(lambda: self._core.append(batch))

    def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        """The history, oldest first; with ``limit``, only the most recent ``limit``."""
        checked = check_limit(limit)
        return self._run(lambda: self._core.read(checked), read=True)

    def clear(self) -> None:
        """Delete the history and the session's derived state."""
        self._run(self._core.clear)

    def get_meta(self, key: str) -> Any:
        """The derived-state value stored under ``key`` (``None`` when absent)."""
        return self._run(lambda: self._core.get_meta(key), read=True)

    def set_meta(self, key: str, value: Any) -> None:
        """Store derived state (a JSON-safe value) beside the history; ``None`` deletes."""
        self._run(lambda: self._core.set_meta(key, value))

    def list_sessions(self) -> list[SessionInfo]:
        """Every session of this store holding messages or info, most recently updated
        first (``open_store(url).list_sessions(...)`` filters and pages)."""
        return self._run(lambda: self._core.list_sessions(Listing()), read=True)

    def info(self) -> SessionInfo:
        """What this conversation is: its title, owner, tags, message count and times
        (``created_at`` and ``updated_at`` are ``None`` until it is first written)."""
        return self._run(self._core.info, read=True)

    def set_info(
        self,
        *,
        title: str | Keep | None = KEEP,
        owner: str | Keep | None = KEEP,
        tags: Iterable[str] | Keep = KEEP,
    ) -> None:
        """Set the conversation's ``title``, ``owner`` (a user id) or ``tags``; a keyword
        left out is left as it is, ``None`` (``()`` for tags) removes it. Counts as a write:
        ``updated_at`` moves. :class:`~aniki.UserError` for a value out of bounds (see
        docs/sessions.md)."""
        change = check_info(title=title, owner=owner, tags=tags)
        self._run(lambda: self._core.set_info(change))

    def close(self) -> None:
        """Close the connections this instance opened."""
        raise NotImplementedError

    def __enter__(self: S) -> S:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncFlowSession(FlowSession[C]):
    """The public methods of a flow store's async session class: the sync one's, awaited."""

    async def _run(self, make: Callable[[], Flow[Any, T]], *, read: bool = False) -> T:
        raise NotImplementedError

    async def add_message(self, message: MessageLike) -> None:
        """Validate and append one message."""
        batch = [stamp_one(to_message(message))]
        await self._run(lambda: self._core.append(batch))

    async def add_messages(self, messages: Iterable[MessageLike]) -> None:
        """Validate all, then append all atomically: other readers see all or none."""
        batch = stamp(to_messages(messages))
        await self._run(lambda: self._core.append(batch))

    async def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        """The history, oldest first; with ``limit``, only the most recent ``limit``."""
        checked = check_limit(limit)
        return await self._run(lambda: self._core.read(checked), read=True)

    async def clear(self) -> None:
        """Delete the history and the session's derived state."""
        await self._run(self._core.clear)

    async def get_meta(self, key: str) -> Any:
        """The derived-state value stored under ``key`` (``None`` when absent)."""
        return await self._run(lambda: self._core.get_meta(key), read=True)

    async def set_meta(self, key: str, value: Any) -> None:
        """Store derived state (a JSON-safe value) beside the history; ``None`` deletes."""
        await self._run(lambda: self._core.set_meta(key, value))

    async def list_sessions(self) -> list[SessionInfo]:
        """Every session of this store holding messages or info, most recently updated
        first (``open_store(url, asynchronous=True)`` filters and pages)."""
        return await self._run(lambda: self._core.list_sessions(Listing()), read=True)

    async def info(self) -> SessionInfo:
        """The sync class's ``info()``, awaited."""
        return await self._run(self._core.info, read=True)

    async def set_info(
        self,
        *,
        title: str | Keep | None = KEEP,
        owner: str | Keep | None = KEEP,
        tags: Iterable[str] | Keep = KEEP,
    ) -> None:
        """The sync class's ``set_info()``, awaited."""
        change = check_info(title=title, owner=owner, tags=tags)
        await self._run(lambda: self._core.set_info(change))

    async def aclose(self) -> None:
        """Close the connections this instance opened."""
        raise NotImplementedError

    async def __aenter__(self: S) -> S:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
