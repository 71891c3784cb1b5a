"""What every suffix-keeping history policy shares: pass-through writes and windowed reads.

A policy wraps a sync :class:`~aniki.Session` or an :class:`~aniki.AsyncSession` and is of
the same kind: its methods return what the inner store's do, awaitables included. Reads are
planned by a generator written once (it asks for "the last N messages", is sent them, and
returns the selected suffix) and driven either synchronously or asynchronously, depending on
what the inner store returned. Stores that offer ``get_messages(limit=...)`` are asked only for
the recent window, so a read costs about the size of what it keeps, not of the history.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable, Sequence
from typing import Any, Generic, TypeVar, cast, overload

from ..errors import UserError
from ..messages import Message, MessageLike, to_message
from .base import AsyncSession, Session

__all__ = [
    "ReadPlan",
    "SessionT",
    "SuffixPolicy",
    "accepts_limit",
    "add_each",
    "check_positive",
    "check_session",
    "plan_suffix",
]

SessionT = TypeVar("SessionT", Session, AsyncSession)
"""The kind of store a policy wraps, and so the kind of session the policy is."""

ReadPlan = Generator["int | None", Sequence[Message], tuple[Message, ...]]
"""Yields how many recent messages to fetch (``None``: all), is sent them, returns the view."""

Selector = Callable[[Sequence[Message], bool], "int | None"]
"""``(window, complete) -> start``, or ``None`` when the window is too short to decide."""


def accepts_limit(get_messages: Callable[..., Any]) -> bool:
    """Whether a store's ``get_messages`` takes ``limit=`` (the built-in stores all do)."""
    try:
        parameters = inspect.signature(get_messages).parameters
    except (TypeError, ValueError):
        return False
    return "limit" in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


def plan_suffix(select: Selector, first: int | None) -> ReadPlan:
    """Fetch ``first`` recent messages, doubling until ``select`` can decide; keep its suffix."""
    limit = first
    while True:
        window = yield limit
        complete = limit is None or len(window) < limit
        start = select(window, complete)
        if start is not None:
            return tuple(window[start:])
        assert limit is not None  # a complete window always decides
        limit = max(limit * 2, 16)


def check_positive(name: str, value: object) -> int:
    """``value`` when it is a whole number of at least 1, else a :class:`~aniki.UserError`."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise UserError(f"{name} must be a whole number of at least 1, got {value!r}")
    return value


def check_session(inner: object) -> None:
    """A :class:`~aniki.UserError` unless ``inner`` has the session methods a policy uses."""
    for member in ("add_message", "get_messages", "clear"):
        if not callable(getattr(inner, member, None)):
            raise UserError(
                f"a history policy wraps a Session or AsyncSession; "
                f"{type(inner).__name__} has no {member}() method"
            )


class SuffixPolicy(Generic[SessionT]):
    """Base of the policies that keep a most-recent suffix: everything but the selection.

    Subclasses implement :meth:`_plan`. Writes, ``clear`` and ``id`` go to the inner store
    untouched; the stored history is never rewritten.
    """

    def __init__(self, inner: Session | AsyncSession) -> None:
        check_session(inner)
        # Subclasses take ``inner: SessionT``; mypy cannot pass a constrained TypeVar through.
        self._inner: SessionT = cast("SessionT", inner)
        self._limited = accepts_limit(inner.get_messages)

    @property
    def inner(self) -> SessionT:
        """The wrapped store, which holds the whole history."""
        return self._inner

    @property
    def id(self) -> str:
        """The inner store's id."""
        return str(self._inner.id)

    def _plan(self) -> ReadPlan:
        raise NotImplementedError

    def _first_fetch(self, wanted: int) -> int | None:
        """How many recent messages to ask for first: all of them when the store has no limit."""
        return wanted if self._limited else None

    @overload
    def get_messages(self: SuffixPolicy[Session]) -> tuple[Message, ...]: ...
    @overload
    def get_messages(
        self: SuffixPolicy[AsyncSession],
    ) -> Coroutine[Any, Any, tuple[Message, ...]]: ...
    def get_messages(self) -> Any:
        """The selected most-recent messages, oldest first (awaitable over an async store)."""
        plan = self._plan()
        return self._drive(plan, self._fetch(next(plan)))

    def _add_then_get(self, messages: list[Message]) -> Any:
        """Append ``messages``, then select: one round trip to the first window when the inner
        store fuses its append and read (see ``aniki._run.session_io``); ``None``, having
        written nothing, when it cannot."""
        fused = getattr(self._inner, "_add_then_get", None)
        if fused is None:
            return None
        plan = self._plan()
        limit = next(plan)
        first = fused(messages) if limit is None else fused(messages, limit)
        if first is None:
            return None
        return self._drive(plan, first)

    def _view_with(self, extra: Sequence[Message]) -> Any:
        """The selection over the stored history followed by ``extra``, messages not stored
        yet (a streamed run's tool turns): what :meth:`get_messages` will return once they
        are, so that they count against the same bound."""
        plan = self._plan()
        return self._drive(plan, self._fetch(next(plan)), tuple(extra))

    def _drive(self, plan: ReadPlan, first: Any, extra: tuple[Message, ...] = ()) -> Any:
        """Feed ``plan`` the first window and any further one it asks for; return its view.

        ``extra`` follows every window (a window then looks longer than the store's answer,
        which costs at most a few more fetches: each asks for twice as many)."""
        if inspect.isawaitable(first):
            return self._drive_async(plan, first, extra)
        window: Sequence[Message] = first
        while True:
            try:
                request = plan.send((*window, *extra) if extra else window)
            except StopIteration as done:
                selected: tuple[Message, ...] = done.value
                return selected
            window = self._fetch(request)

    async def _drive_async(
        self, plan: ReadPlan, first: Awaitable[Sequence[Message]], extra: tuple[Message, ...]
    ) -> tuple[Message, ...]:
        window: Sequence[Message] = await first
        while True:
            try:
                request = plan.send((*window, *extra) if extra else window)
            except StopIteration as done:
                selected: tuple[Message, ...] = done.value
                return selected
            window = await self._fetch(request)

    def _fetch(self, limit: int | None) -> Any:
        if limit is not None and self._limited:
            return self._inner.get_messages(limit=limit)  # type: ignore[call-arg]
        return self._inner.get_messages()

    @overload
    def add_message(self: SuffixPolicy[Session], message: MessageLike) -> None: ...
    @overload
    def add_message(
        self: SuffixPolicy[AsyncSession], message: MessageLike
    ) -> Coroutine[Any, Any, None]: ...
    def add_message(self, message: MessageLike) -> Any:
        """Append one message to the inner store."""
        return self._inner.add_message(message)

    @overload
    def add_messages(self: SuffixPolicy[Session], messages: Iterable[MessageLike]) -> None: ...
    @overload
    def add_messages(
        self: SuffixPolicy[AsyncSession], messages: Iterable[MessageLike]
    ) -> Coroutine[Any, Any, None]: ...
    def add_messages(self, messages: Iterable[MessageLike]) -> Any:
        """Append a batch: atomically when the inner store has ``add_messages``.

        Otherwise every message is validated first, then appended one by one.
        """
        batch = [to_message(message) for message in messages]
        add_many = getattr(self._inner, "add_messages", None)
        if add_many is not None:
            return add_many(batch)
        return add_each(self._inner, batch)

    @overload
    def clear(self: SuffixPolicy[Session]) -> None: ...
    @overload
    def clear(self: SuffixPolicy[AsyncSession]) -> Coroutine[Any, Any, None]: ...
    def clear(self) -> Any:
        """Delete the inner store's history."""
        return self._inner.clear()


def add_each(inner: Any, batch: list[Message]) -> Any:
    """Append ``batch`` one message at a time, awaiting each when ``inner`` is async."""
    for index, message in enumerate(batch):
        result = inner.add_message(message)
        if inspect.isawaitable(result):
            return _add_rest_async(inner, result, batch[index + 1 :])
    return None


async def _add_rest_async(inner: Any, pending: Awaitable[Any], rest: list[Message]) -> None:
    await pending
    for message in rest:
        await inner.add_message(message)
