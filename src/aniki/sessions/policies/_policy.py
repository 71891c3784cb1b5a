"""What every stepped history policy shares: pass-through writes and windowed, stepped reads.

A policy wraps a sync :class:`~aniki.Session` or an :class:`~aniki.AsyncSession` and is of
the same kind: its methods return what the inner store's do, awaitables included. Reads are
planned by a generator written once (it asks for "the last N messages" or for a meta value,
is sent the answer, and returns the view) and driven either synchronously or asynchronously,
depending on what the inner store returned. Stores that offer ``get_messages(limit=...)`` are
asked only for the recent window, so a read costs about the size of what it keeps, not of the
history.

Where the view starts (its cut) is chosen by :mod:`aniki.sessions.policies._cut`; this module keeps
the cut in the inner store's per-session meta (``get_meta`` / ``set_meta``) under a key that
names the policy and its limits, so two policies over one store never disturb each other,
and in memory over a store without meta.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast, overload

from ..._reads import ReadInfo, accepts_limit
from ...errors import UserError
from ...messages import Message, MessageLike, to_message
from ..base import AsyncSession, Session
from ._cut import Anchor, CutRecord, Found, Placement, place

__all__ = [
    "MetaGet",
    "MetaSet",
    "ReadInfo",
    "ReadPlan",
    "SessionT",
    "SuffixPolicy",
    "accepts_limit",
    "add_each",
    "check_positive",
    "check_session",
    "check_trim_to",
]

SessionT = TypeVar("SessionT", Session, AsyncSession)
"""The kind of store a policy wraps, and so the kind of session the policy is."""


@dataclass(frozen=True, slots=True)
class MetaGet:
    """A plan's request for the inner store's meta value under ``key``."""

    key: str


@dataclass(frozen=True, slots=True)
class MetaSet:
    """A plan's request to store ``value`` under ``key`` in the inner store's meta."""

    key: str
    value: Any


ReadPlan = Generator["int | MetaGet | MetaSet | None", Any, tuple[Message, ...]]
"""Yields how many recent messages to fetch (``None``: all) or a meta request, is sent the
answer, and returns the view."""

_FETCH_MARGIN = 16
"""Messages fetched beyond the last view: room for what a turn or two appends meanwhile."""


def check_positive(name: str, value: object) -> int:
    """``value`` when it is a whole number of at least 1, else a :class:`~aniki.UserError`."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise UserError(f"{name} must be a whole number of at least 1, got {value!r}")
    return value


def check_trim_to(trim_to: object, limit: int, name: str) -> int:
    """``trim_to`` checked against the policy's limit; ``None`` gives half the limit."""
    if trim_to is None:
        return max(limit // 2, 1)
    if not isinstance(trim_to, int) or isinstance(trim_to, bool) or not 1 <= trim_to <= limit:
        raise UserError(
            f"trim_to must be a whole number between 1 and {name} = {limit}, got {trim_to!r} "
            f"(leave it out for half of {name}; trim_to={limit} slides the window one message "
            "at a time)"
        )
    return trim_to


def check_session(inner: object) -> None:
    """A :class:`~aniki.UserError` unless ``inner`` has the session methods a policy uses."""
    for member in ("add_message", "get_messages", "clear"):
        if not callable(getattr(inner, member, None)):
            raise UserError(
                f"a history policy wraps a Session or AsyncSession; "
                f"{type(inner).__name__} has no {member}() method"
            )


@dataclass(slots=True)
class _CutState:
    """What a policy object knows of its cut between reads."""

    found: Found | None = None
    """The cut as last placed (in memory), or as read from meta."""
    stored: Any = None
    """The meta value as last read or written, to notice another writer and skip rewrites."""
    loaded: bool = False
    """Whether the meta value has been read at all."""


class SuffixPolicy(Generic[SessionT]):
    """Base of the policies that keep a stepped most-recent suffix: everything but the limit.

    Subclasses set :attr:`limit`, :attr:`trim_to` and :attr:`_cost`, name their meta key and
    size their first fetch. Writes and ``id`` go to the inner store untouched; the stored
    history is never rewritten.
    """

    limit: int
    """The most the view may cost (messages or tokens) before its cut moves."""
    trim_to: int
    """The most the view keeps when its cut moves."""

    def __init__(self, inner: Session | AsyncSession, limit: int, trim_to: int) -> None:
        check_session(inner)
        # Subclasses take ``inner: SessionT``; mypy cannot pass a constrained TypeVar through.
        self._inner: SessionT = cast("SessionT", inner)
        self._limited = accepts_limit(inner.get_messages)
        self.limit = limit
        self.trim_to = trim_to
        # A one-step slide (trim_to == limit) follows from the history alone: any reader
        # finds the same view, so there is no cut to keep (and none to write every turn).
        self._has_meta = (
            trim_to < limit
            and callable(getattr(inner, "get_meta", None))
            and callable(getattr(inner, "set_meta", None))
        )
        self._state = _CutState()
        self._last_read: ReadInfo | None = None

    @property
    def inner(self) -> SessionT:
        """The wrapped store, which holds the whole history."""
        return self._inner

    @property
    def id(self) -> str:
        """The inner store's id."""
        return str(self._inner.id)

    @property
    def cut_key(self) -> str:
        """The meta key the cut is kept under: it names the policy, its limits and counter."""
        raise NotImplementedError

    def _cost(self, message: Message) -> int:
        raise NotImplementedError

    def _fresh_fetch(self) -> int:
        """How many recent messages to ask for first when no cut is known yet."""
        raise NotImplementedError

    def _first_fetch(self, found: Found | None) -> int | None:
        if not self._limited:
            return None
        if isinstance(found, Anchor):
            return len(found.view) + 1 + _FETCH_MARGIN
        if isinstance(found, CutRecord):
            return found.kept + 1 + _FETCH_MARGIN
        return self._fresh_fetch()

    def _plan(self, extra: int = 0) -> ReadPlan:
        """The read: find the cut, keep it or move it, remember it; return the view.

        The last ``extra`` messages of every window are not stored yet (a streamed run's
        tool turns): they count against the limit, but a cut is only ever remembered at a
        stored message.
        """
        state = self._state
        checked = False  # whether meta was read during this read
        if self._has_meta and not state.loaded:
            state.stored = yield MetaGet(self.cut_key)
            state.found, state.loaded, checked = CutRecord.from_value(state.stored), True, True
        found = state.found
        size = self._first_fetch(found)
        while True:
            window: Sequence[Message] = yield size
            complete = size is None or len(window) - extra < size
            placement = self._place(found, window, complete)
            if placement is not None and placement.moved and self._has_meta and not checked:
                # Before moving the cut, see whether another process has moved it already.
                checked = True
                value = yield MetaGet(self.cut_key)
                other = CutRecord.from_value(value) if value != state.stored else None
                state.stored = value
                if other is not None:
                    found = other
                    placement = self._place(found, window, complete)
            if placement is not None and placement.base is not None:
                break
            if placement is not None:  # where the window lies is unknown: read it all, once
                size = None
                continue
            assert size is not None  # a complete window always decides
            size = max(size * 2, 16)
        start, kept, base = placement.start, len(window) - extra, placement.base
        self._last_read = ReadInfo(stored=base + kept, prefix_kept=not placement.moved)
        if start < kept:
            before = window[start - 1] if start else None
            state.found = Anchor(before, tuple(window[start:kept]), base + start)
            stale = placement.moved or (isinstance(found, CutRecord) and found.position is None)
            if stale and start > 0 and self._has_meta:
                value = CutRecord.at(window[:kept], start, base).to_value()
                if value != state.stored:
                    yield MetaSet(self.cut_key, value)
                    state.stored = value
        return tuple(window[start:])

    def _place(
        self, found: Found | None, window: Sequence[Message], complete: bool
    ) -> Placement | None:
        return place(
            found, window, complete, limit=self.limit, trim_to=self.trim_to, cost=self._cost
        )

    @overload
    def get_messages(self: SuffixPolicy[Session]) -> tuple[Message, ...]: ...
    @overload
    def get_messages(
        self: SuffixPolicy[AsyncSession],
    ) -> Coroutine[Any, Any, tuple[Message, ...]]: ...
    def get_messages(self) -> Any:
        """The view: the most recent messages from the cut on, oldest first (awaitable over
        an async store)."""
        return self._execute(self._plan())

    def _add_then_get(self, messages: list[Message]) -> Any:
        """Append ``messages``, then read: the append fused with the first window's fetch
        when the inner store can (see ``aniki._run.session_io``); ``None``, having written
        nothing, when the inner store has no such step."""
        fused = getattr(self._inner, "_add_then_get", None)
        if fused is None:
            return None

        def first(limit: int | None) -> Any:
            window = fused(messages) if limit is None else fused(messages, limit)
            if window is not None:
                return window
            # A wrapper below cannot fuse after all (it wrote nothing): append, then read.
            added = self.add_messages(messages)
            if inspect.isawaitable(added):
                return _after(added, lambda: self._fetch(limit))
            return self._fetch(limit)

        return self._execute(self._plan(), first=first)

    def _view_with(self, extra: Sequence[Message]) -> Any:
        """The view over the stored history followed by ``extra``, messages not stored yet
        (a streamed run's tool turns): what :meth:`get_messages` will return once they are,
        so that they count against the same limit."""
        return self._execute(self._plan(len(extra)), extra=tuple(extra))

    def _answer(self, request: int | MetaGet | MetaSet | None, first: Any) -> Any:
        if isinstance(request, MetaGet):
            return cast(Any, self._inner).get_meta(request.key)
        if isinstance(request, MetaSet):
            return cast(Any, self._inner).set_meta(request.key, request.value)
        if first is not None:
            return first(request)
        return self._fetch(request)

    def _execute(
        self, plan: ReadPlan, *, extra: tuple[Message, ...] = (), first: Any = None
    ) -> Any:
        """Answer ``plan``'s requests until it returns its view; ``first`` (when given)
        answers the first fetch. Switches to :meth:`_execute_async` at the first awaitable.

        ``extra`` follows every window (a window then looks longer than the store's answer,
        which the plan allows for)."""
        request = next(plan)
        while True:
            fetch = not isinstance(request, (MetaGet, MetaSet))
            answer: Any = self._answer(request, first if fetch else None)
            if fetch:
                first = None
            if inspect.isawaitable(answer):
                return self._execute_async(plan, answer, fetch, extra, first)
            if fetch and extra:
                answer = (*answer, *extra)
            try:
                request = plan.send(answer)
            except StopIteration as done:
                view: tuple[Message, ...] = done.value
                return view

    async def _execute_async(
        self,
        plan: ReadPlan,
        pending: Awaitable[Any],
        fetch: bool,
        extra: tuple[Message, ...],
        first: Any,
    ) -> tuple[Message, ...]:
        while True:
            answer: Any = await pending
            if fetch and extra:
                answer = (*answer, *extra)
            try:
                request = plan.send(answer)
            except StopIteration as done:
                view: tuple[Message, ...] = done.value
                return view
            fetch = not isinstance(request, (MetaGet, MetaSet))
            result = self._answer(request, first if fetch else None)
            if fetch:
                first = None
            pending = result if inspect.isawaitable(result) else _ready(result)

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
    def undo(self: SuffixPolicy[Session]) -> tuple[Message, ...]: ...
    @overload
    def undo(self: SuffixPolicy[AsyncSession]) -> Coroutine[Any, Any, tuple[Message, ...]]: ...
    def undo(self) -> Any:
        """Remove the last turn from the inner store (its ``undo()``) and return it. The cut
        is found again on the next read, or starts afresh when the turn held it."""
        undo = getattr(self._inner, "undo", None)
        if not callable(undo):
            raise UserError(f"{type(self._inner).__name__} has no undo(); it cannot remove a turn")
        self._state = _CutState()
        return undo()

    @overload
    def clear(self: SuffixPolicy[Session]) -> None: ...
    @overload
    def clear(self: SuffixPolicy[AsyncSession]) -> Coroutine[Any, Any, None]: ...
    def clear(self) -> Any:
        """Delete the inner store's history (built-in stores drop its derived state, the
        cut included, with it)."""
        self._state = _CutState()
        return self._inner.clear()


async def _ready(value: Any) -> Any:
    return value


async def _after(pending: Awaitable[Any], then: Callable[[], Any]) -> Any:
    await pending
    result = then()
    return await result if inspect.isawaitable(result) else result


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
