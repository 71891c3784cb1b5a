"""What every stepped history policy shares: pass-through writes and windowed, stepped reads.

A policy wraps a sync :class:`~aniki.Session` or an :class:`~aniki.AsyncSession` and is of
the same kind: its methods return what the inner store's do, awaitables included. A read is
planned by a generator written once (a flow: it asks for "the last N messages", a meta value
or an append, is sent the answer, and returns the view) and run by
:func:`~aniki.sessions._driver.drive_either`, synchronously or asynchronously depending on
what the inner store returns. Stores that offer ``get_messages(limit=...)`` are asked only
for the recent window, so a read costs about the size of what it keeps, not of the history.

Where the view starts (its cut) is chosen by :mod:`aniki.sessions.policies._cut`; this module keeps
the cut in the inner store's per-session meta (``get_meta`` / ``set_meta``) under a key that
names the policy and its limits, so two policies over one store never disturb each other,
and in memory over a store without meta.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar, cast, overload

from ...errors import UserError
from ...messages import Message, MessageLike, to_message
from ...tokens import TokenCounter
from .._capabilities import add_all, capabilities_of
from .._driver import drive_either
from .._now import NOT_NOW
from .._reads import ReadInfo
from ..base import AsyncSession, Session
from ._checks import check_session
from ._clearing import ClearToolResults
from ._cut import Anchor, CutRecord, Found, Placement, cache_cold, place

__all__ = [
    "Add",
    "CountsTokens",
    "Meta",
    "ReadPlan",
    "SessionT",
    "SuffixPolicy",
]

SessionT = TypeVar("SessionT", Session, AsyncSession)
"""The kind of store a policy wraps, and so the kind of session the policy is."""


@dataclass(frozen=True, slots=True)
class Meta:
    """A plan's request for the inner store's meta value under ``key``; with ``write``, to
    store ``value`` there instead."""

    key: str
    value: Any = None
    write: bool = False


@dataclass(frozen=True, slots=True)
class Add:
    """A plan's request to append ``messages``; with ``fused``, through the inner store's
    fused append-then-read, whose answer is the last ``limit`` messages (``None``: all) or
    ``None`` when it wrote nothing."""

    messages: list[Message]
    limit: int | None = None
    fused: bool = False


ReadPlan = Generator["int | Meta | Add | None", Any, tuple[Message, ...]]
"""Yields how many recent messages to fetch (``None``: all), a meta request or an append, is
sent the answer, and returns the view."""

_FETCH_MARGIN = 16
"""Messages fetched beyond the last view: room for what a turn or two appends meanwhile."""


class CountsTokens:
    """A policy that counts tokens. ``counter`` is a property so that the class says it
    counts (see :class:`aniki.sessions._capabilities.Counts`)."""

    _counter: TokenCounter

    @property
    def counter(self) -> TokenCounter:
        """Counts each message's tokens."""
        return self._counter

    @counter.setter
    def counter(self, counter: TokenCounter) -> None:
        self._counter = counter


@dataclass(slots=True)
class _CutState:
    """What a policy object knows of its cut between reads."""

    found: Found | None = None
    """The cut as last placed (in memory), or as read from meta."""
    stored: Any = None
    """The meta value as last read or written, to notice another writer and skip rewrites."""
    loaded: bool = False
    """Whether the meta value has been read at all."""
    cleared: int | None = None
    """How many messages of the last view were sent cleared (``None`` before a read)."""


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
    cache_ttl: float | None = None
    """The provider's prompt-cache lifetime in seconds: when a message comes longer than that
    after the one before it, the cache is cold, and the cut moves then (see ``place``)."""
    blocking: bool = True
    """Whether its calls may block on I/O: as the inner store's (set per instance)."""

    # What a policy can do only when its inner store can (see aniki.sessions._capabilities).
    _INNER_DECIDES: ClassVar[frozenset[str]] = frozenset({"add_then_get", "undo", "try_now"})
    _last_read: ReadInfo | None = None  # what the last read saw, for the run's reports

    def __init__(
        self,
        inner: Session | AsyncSession,
        limit: int,
        trim_to: int,
        cache_ttl: float | None = None,
        clearing: ClearToolResults | None = None,
    ) -> None:
        check_session(inner)
        # Subclasses take ``inner: SessionT``; mypy cannot pass a constrained TypeVar through.
        self._inner: SessionT = cast("SessionT", inner)
        can = capabilities_of(inner)
        self._limited = can.limited
        self.blocking = can.blocking
        self.limit = limit
        self.trim_to = trim_to
        self.cache_ttl = cache_ttl
        self._clearing = clearing
        # A one-step slide (trim_to == limit) follows from the history alone: any reader
        # finds the same view, so there is no cut to keep (and none to write every turn).
        self._has_meta = trim_to < limit and can.get_meta is not None
        self._fused = can.add_then_get
        self._now = can.try_now
        self._state = _CutState()

    def _try_now(self, work: Callable[[], Any]) -> Any:
        # The inner store's (aniki.sessions._now): the policy's own work is computation.
        now = self._now
        return NOT_NOW if now is None else now(work)

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

    def _plan(
        self, extra: tuple[Message, ...] = (), append: list[Message] | None = None
    ) -> ReadPlan:
        """The read: find the cut, keep it or move it, remember it; return the view.

        ``extra`` follows every window: messages not stored yet (a streamed run's tool
        turns), which count against the limit, though a cut is only ever remembered at a
        stored message. ``append`` is appended first, fused with the first fetch.
        """
        state = self._state
        checked = False  # whether meta was read during this read
        if self._has_meta and not state.loaded:
            state.stored = yield Meta(self.cut_key)
            state.found, state.loaded, checked = CutRecord.from_value(state.stored), True, True
        found = state.found
        size = self._first_fetch(found)
        while True:
            if append is None:
                window: Sequence[Message] = yield size
            else:
                window = yield from _append_then_fetch(append, size)
                append = None
            if extra:
                window = (*window, *extra)
            complete = size is None or len(window) - len(extra) < size
            placement = self._place(found, window, complete, len(window) - len(extra))
            if placement is not None and placement.moved and self._has_meta and not checked:
                # Before moving the cut, see whether another process has moved it already.
                checked = True
                value = yield Meta(self.cut_key)
                other = CutRecord.from_value(value) if value != state.stored else None
                state.stored = value
                if other is not None:
                    found = other
                    placement = self._place(found, window, complete, len(window) - len(extra))
            if placement is not None and placement.base is not None:
                break
            if placement is not None:  # where the window lies is unknown: read it all, once
                size = None
                continue
            assert size is not None  # a complete window always decides
            size = max(size * 2, 16)
        view, cut = self._settle(found, placement, window, len(window) - len(extra))
        if cut is not None:
            yield Meta(self.cut_key, cut, write=True)
            state.stored = cut
        return view

    def _settle(
        self, found: Found | None, placement: Placement, window: Sequence[Message], kept: int
    ) -> tuple[tuple[Message, ...], Any]:
        """Remember where the view starts (``placement`` in ``window``, whose first ``kept``
        messages are stored): the view, and the cut to store in meta (``None``: none)."""
        state = self._state
        start, base, replaced = placement.start, placement.base, placement.replaced
        assert base is not None  # placed
        view = tuple(window[start:])
        if replaced:
            view = tuple(replaced.get(id(message), message) for message in view)
        # A clearing step changes messages the last view sent: the prefix breaks there too.
        cleared = sum(id(message) in replaced for message in window[start:kept]) if replaced else 0
        stepped = state.cleared is not None and cleared != state.cleared
        state.cleared = cleared
        kept_prefix = not placement.moved and not stepped
        self._last_read = ReadInfo(stored=base + kept, prefix_kept=kept_prefix)
        if start >= kept:
            return view, None
        before = window[start - 1] if start else None
        turns = placement.turns
        state.found = Anchor(before, tuple(window[start:kept]), base + start, turns)
        unknown = isinstance(found, CutRecord) and (
            found.position is None or (self._clearing is not None and found.turns is None)
        )
        if (placement.moved or unknown) and start > 0 and self._has_meta:
            value = CutRecord.at(window[:kept], start, base, turns).to_value()
            if value != state.stored:
                return view, value
        return view, None

    def _place(
        self, found: Found | None, window: Sequence[Message], complete: bool, kept: int
    ) -> Placement | None:
        cold = cache_cold(window, kept, self.cache_ttl)
        return place(
            found,
            window,
            complete,
            limit=self.limit,
            trim_to=self.trim_to,
            cost=self._cost,
            cold=cold,
            clearing=self._clearing,
        )

    def _key_suffix(self) -> str:
        """What ``cache_ttl`` and ``clear_tool_results`` add to the cut's meta key: such a
        window keeps a cut of its own (``".ttl300"``, ``".clear2.4.400"``)."""
        ttl = "" if self.cache_ttl is None else f".ttl{self.cache_ttl:g}"
        return ttl + ("" if self._clearing is None else self._clearing.key)

    def _options_repr(self) -> str:
        ttl = "" if self.cache_ttl is None else f", cache_ttl={self.cache_ttl:g}"
        clearing = self._clearing
        return ttl + ("" if clearing is None else f", clear_tool_results={clearing!r}")

    @overload
    def get_messages(self: SuffixPolicy[Session]) -> tuple[Message, ...]: ...
    @overload
    def get_messages(
        self: SuffixPolicy[AsyncSession],
    ) -> Coroutine[Any, Any, tuple[Message, ...]]: ...
    def get_messages(self) -> Any:
        """The view: the most recent messages from the cut on, oldest first (awaitable over
        an async store)."""
        return drive_either(self._plan(), self._answer)

    def _add_then_get(self, messages: list[Message]) -> Any:
        """Append ``messages``, then read: the append fused with the first window's fetch
        when the inner store can (see ``aniki.sessions._session_io``); ``None``, having written
        nothing, when the inner store has no such step."""
        if self._fused is None:
            return None
        return drive_either(self._plan(append=messages), self._answer)

    def _view_with(self, extra: Sequence[Message]) -> Any:
        """The view over the stored history followed by ``extra``, messages not stored yet
        (a streamed run's tool turns): what :meth:`get_messages` will return once they are,
        so that they count against the same limit."""
        return drive_either(self._plan(tuple(extra)), self._answer)

    def _answer(self, request: int | Meta | Add | None) -> Any:
        """What the inner store answers to a plan's ``request`` (maybe an awaitable)."""
        if request is None or type(request) is int:
            return self._fetch(request)
        inner = cast(Any, self._inner)
        if isinstance(request, Meta):
            if request.write:
                return inner.set_meta(request.key, request.value)
            return inner.get_meta(request.key)
        assert isinstance(request, Add)
        if not request.fused:
            return self.add_messages(request.messages)
        assert self._fused is not None  # a plan appends fused only when the store can
        if request.limit is None:
            return self._fused(request.messages)
        return self._fused(request.messages, request.limit)

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
        return add_all(self._inner, [to_message(message) for message in messages])

    @overload
    def undo(self: SuffixPolicy[Session]) -> tuple[Message, ...]: ...
    @overload
    def undo(self: SuffixPolicy[AsyncSession]) -> Coroutine[Any, Any, tuple[Message, ...]]: ...
    def undo(self) -> Any:
        """Remove the last turn from the inner store (its ``undo()``) and return it. The cut
        is found again on the next read, or starts afresh when the turn held it."""
        undo = capabilities_of(self._inner).undo
        if undo is None:
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


def _append_then_fetch(
    messages: list[Message], size: int | None
) -> Generator[Add | int | None, Any, Sequence[Message]]:
    """The first window of a read that appends ``messages`` first, through the store's fused
    step; when a wrapper below cannot fuse after all (it wrote nothing), an append and a
    fetch."""
    window = yield Add(messages, size, fused=True)
    if window is None:
        yield Add(messages)
        window = yield size
    result: Sequence[Message] = window
    return result
