"""Where a stepped window starts (its *cut*), and how the cut is found again: pure, no I/O.

A stepped window keeps its start while the view from there fits the limit, so between two
cuts every request's history is the previous one plus what was appended: a prompt cache
serves all of it. When the view outgrows the limit, the cut moves once, to the first valid
start that leaves at most ``trim_to`` (:func:`~aniki.sessions.policies._select.select_start` with
``trim_to``), and stays there again.

A cut is derived state, kept in the store's per-session meta as a :class:`CutRecord`: the
fingerprints of the message the view starts with, of the one before it, and of the messages
the view held when the cut was made. Finding it again means finding that run of messages in
the recent window of the history, so a read costs the window, never the history, and a new
policy object, another process or a restart lands on the same start. A cleared or replaced
history no longer holds the run, and the window starts afresh. Once found, a cut is tracked
in memory by the messages themselves (:class:`Anchor`), so the next read compares objects
instead of hashing.

A record also holds the cut's position in the history, so a reader that finds it in the
window knows how many messages the store holds without counting them. A reader that finds
no such cut in a partial window (a history written without the policy, a record it
ignored) reads the history whole once, and the cut it then keeps holds the position.

A stored cut is only a hint: meta may hold anything. One that would start the view at a tool
result whose call lies before it, or whose position contradicts the window, is ignored like
an unreadable one, and the view starts afresh. Whatever the meta holds, the view is valid.

A history where the same run of messages appears twice, with the same message before it, is
ambiguous; the earlier occurrence in the window is taken.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from dataclasses import replace as _replace
from types import MappingProxyType
from typing import Any

from ...messages import Message
from ._clearing import ClearToolResults, clear, users_in
from ._select import Cost, opens, select_start, within
from ._summary import message_digest

__all__ = [
    "Anchor",
    "CutRecord",
    "Placement",
    "cache_cold",
    "locate",
    "place",
]

_RECORD_VERSION = 1

_KEPT = 8
"""How many of the view's first messages a record fingerprints: enough to tell one place
in a conversation from another, few enough to keep moving a cut cheap."""


def _run_digest(messages: Sequence[Message]) -> str:
    digest = hashlib.sha256()
    for message in messages:
        digest.update(message_digest(message).encode("ascii"))
    return digest.hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class CutRecord:
    """A cut as stored in meta: enough to find its place in any recent window."""

    first: str
    """:func:`~aniki.sessions.policies._summary.message_digest` of the view's first message."""
    first_role: str
    """Its role (a cheap first check before hashing)."""
    first_size: int
    """The length of its content (a cheap first check too)."""
    before: str
    """The digest of the message just before the cut."""
    kept: int
    """How many messages the digest covers: the view's first few when the cut was made."""
    kept_digest: str
    """A digest of those messages, in order."""
    position: int | None = None
    """The index of the view's first message in the whole history (``None`` in a record
    written before positions were kept: it is found, then rewritten with one)."""
    turns: int | None = None
    """How many turns (user messages) the history holds before the cut: the window's
    clearing counts turns from it (``None`` when not recorded)."""

    @classmethod
    def at(
        cls, window: Sequence[Message], start: int, base: int = 0, turns: int | None = None
    ) -> CutRecord:
        """The record of a cut at ``window[start]`` (``start >= 1``), where ``window[0]`` is
        message ``base`` of the history; ``turns``: the user messages before the cut."""
        first, kept = window[start], window[start : start + _KEPT]
        return cls(
            first=message_digest(first),
            first_role=first.role,
            first_size=len(first.content),
            before=message_digest(window[start - 1]),
            kept=len(kept),
            kept_digest=_run_digest(kept),
            position=base + start,
            turns=turns,
        )

    def matches(self, window: Sequence[Message], start: int) -> bool:
        """Whether the cut lies at ``window[start]``."""
        first = window[start]
        return (
            start >= 1
            and start + self.kept <= len(window)
            and first.role == self.first_role
            and len(first.content) == self.first_size
            and message_digest(first) == self.first
            and message_digest(window[start - 1]) == self.before
            and _run_digest(window[start : start + self.kept]) == self.kept_digest
        )

    def to_value(self) -> dict[str, Any]:
        """The JSON-safe value stored in meta."""
        return {
            "version": _RECORD_VERSION,
            "first": self.first,
            "first_role": self.first_role,
            "first_size": self.first_size,
            "before": self.before,
            "kept": self.kept,
            "kept_digest": self.kept_digest,
            "position": self.position,
            **({} if self.turns is None else {"turns": self.turns}),
        }

    @classmethod
    def from_value(cls, value: object) -> CutRecord | None:
        """The record a stored value holds; ``None`` when absent or unreadable (a cut is
        derived state: the window then starts afresh, nothing is lost)."""
        if not isinstance(value, Mapping) or value.get("version") != _RECORD_VERSION:
            return None
        try:
            record = cls(
                first=value["first"],
                first_role=value["first_role"],
                first_size=value["first_size"],
                before=value["before"],
                kept=value["kept"],
                kept_digest=value["kept_digest"],
                position=value.get("position"),
                turns=value.get("turns"),
            )
        except KeyError:
            return None
        position = record.position
        fields_ok = (
            all(isinstance(v, str) for v in (record.first, record.before, record.kept_digest))
            and isinstance(record.first_role, str)
            and type(record.first_size) is int
            and type(record.kept) is int
            and record.kept >= 1
            and (position is None or (type(position) is int and position >= 1))
            and (record.turns is None or (type(record.turns) is int and record.turns >= 0))
        )
        return record if fields_ok else None


@dataclass(frozen=True, slots=True)
class Anchor:
    """A cut this policy object placed or found: the messages around it, held in memory.

    ``before`` is ``None`` when the view starts at the very beginning of the history.
    """

    before: Message | None
    view: tuple[Message, ...]
    """The view as last returned; the next view from the same cut starts with it."""
    position: int
    """The index of ``view[0]`` in the whole history."""
    turns: int | None = None
    """How many turns (user messages) the history holds before ``view[0]``."""

    def matches(self, window: Sequence[Message], start: int, complete: bool) -> bool:
        """Whether the cut lies at ``window[start]``."""
        view = self.view
        if start + len(view) > len(window):
            return False
        if self.before is None:
            if start != 0 or not complete:
                return False
        elif start == 0 or window[start - 1] != self.before:
            return False
        return all(a is b or a == b for a, b in zip(view, window[start:], strict=False))


Found = Anchor | CutRecord


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a read's view starts, and whether the cut moved to get there."""

    start: int
    """The view is ``window[start:]``."""
    moved: bool
    """Whether this is a new cut (to be stored) rather than the one found."""
    base: int | None
    """The index of ``window[0]`` in the whole history; ``None`` when a partial window does
    not tell (no cut with a known position was found in it): read the history whole."""
    replaced: Mapping[int, Message] = field(default_factory=lambda: _NOTHING)
    """What the view sends in place of its cleared messages, by the ``id()`` of each."""
    turns: int | None = None
    """How many turns the history holds before the view's first message (when known)."""


_NOTHING: Mapping[int, Message] = MappingProxyType({})


def cache_cold(window: Sequence[Message], kept: int, ttl: float | None) -> bool:
    """Whether the provider's prompt cache has expired for a read of ``window`` (whose first
    ``kept`` messages are stored): the newest stored message came more than ``ttl`` seconds
    after the one before it, which the previous request ended with. Read from the stored
    times, so every reader of the same history agrees, and a read of the same history again
    finds the cut already moved."""
    if ttl is None or kept < 2:
        return False
    newest, before = window[kept - 1].created_at, window[kept - 2].created_at
    if newest is None or before is None:
        return False
    return (newest - before).total_seconds() > ttl


def locate(found: Found | None, window: Sequence[Message], complete: bool) -> int | None:
    """The index of the cut ``found`` in ``window``: its earliest match; ``None`` when absent."""
    if found is None or not window:
        return None
    if isinstance(found, Anchor):
        if not found.view:
            return None
        head = found.view[0]
        # A store that hands back the objects it was given (or cached) is matched by identity,
        # which is exact and cheap; a store that decodes afresh, by equality.
        for index, message in enumerate(window):
            if message is head and found.matches(window, index, complete):
                return index
        for index, message in enumerate(window):
            if message == head and found.matches(window, index, complete):
                return index
        return None
    for index in range(1, len(window)):
        if found.matches(window, index):
            return index
    return None


def _find(
    found: Found | None, window: Sequence[Message], complete: bool
) -> tuple[int | None, int | None] | None:
    """Where the cut ``found`` lies in ``window`` and where ``window[0]`` lies in the
    history (each ``None`` when unknown); ``None`` when a partial window cannot tell whether
    a stored cut may start a view: fetch more."""
    at = locate(found, window, complete)
    if at is not None and isinstance(found, CutRecord):
        # A stored cut is a hint: one that starts no valid view, or whose position the
        # window contradicts, is ignored like an unreadable one.
        valid = opens(window, at, complete)
        if valid is None:
            return None
        position = found.position
        agrees = position is None or (position == at if complete else position >= at)
        if not valid or not agrees:
            at = None
    if complete:
        return at, 0
    if at is None or found is None or found.position is None:
        return at, None
    return at, found.position - at


def place(
    found: Found | None,
    window: Sequence[Message],
    complete: bool,
    *,
    limit: int,
    trim_to: int,
    cost: Cost,
    cold: bool = False,
    clearing: ClearToolResults | None = None,
) -> Placement | None:
    """Where the view over ``window`` (the last messages of the history) starts.

    The cut ``found`` stays while the view from it fits ``limit``. Without one (a new
    conversation, or a history that no longer holds it) the whole history is the view while
    it fits. Otherwise the cut moves to the first valid start leaving at most ``trim_to``.
    With ``cold`` (the provider's prompt cache has expired: the whole request is paid again
    anyway), it moves there too when the view holds more than ``trim_to``, even if it fits.
    With ``clearing``, the old tool results it names weigh what their placeholders weigh,
    and the placement says what the view sends in their place.
    ``None`` when ``window`` is too short to tell: fetch more and call again.
    """
    located = _find(found, window, complete)
    if located is None:
        return None
    at, base = located
    if clearing is None:  # turns are counted only for a window that clears
        return _placed(found, window, complete, at, base, limit, trim_to, cost, cold)
    first = _first_turn(found, window, at, complete)
    if first is None:  # the turns are not known here: read the history whole, once
        return Placement(0, moved=False, base=None)
    replaced = clear(window, first, clearing)
    if replaced:
        cost = _cleared_cost(cost, replaced)
    placed = _placed(found, window, complete, at, base, limit, trim_to, cost, cold)
    if placed is None or placed.base is None:
        return placed
    turns = first + users_in(window[: placed.start])
    return _replace(placed, replaced=replaced, turns=turns)


def _first_turn(
    found: Found | None, window: Sequence[Message], at: int | None, complete: bool
) -> int | None:
    """How many turns the history holds before ``window[0]``, when known."""
    if complete:
        return 0
    if at is None or found is None or found.turns is None:
        return None
    first = found.turns - users_in(window[:at])
    return first if first >= 0 else None


def _cleared_cost(cost: Cost, replaced: Mapping[int, Message]) -> Cost:
    def cleared(message: Message) -> int:
        return cost(replaced.get(id(message), message))

    return cleared


def _placed(
    found: Found | None,
    window: Sequence[Message],
    complete: bool,
    at: int | None,
    base: int | None,
    limit: int,
    trim_to: int,
    cost: Cost,
    cold: bool,
) -> Placement | None:
    """:func:`place` once the cut is located (``at``, ``base``)."""
    if trim_to >= limit:
        # A one-step slide: the longest valid suffix within the limit, from the history alone.
        start = select_start(window, limit, cost, complete=complete)
        if start is None:
            return None
        if not isinstance(found, Anchor) or not found.view:
            return Placement(start, moved=start != 0, base=base)
        moved = start >= len(window) or window[start] != found.view[0]
        return Placement(start, moved=moved, base=base)
    known: dict[int, int] = {}
    measure = cost

    def weigh(message: Message) -> int:  # each message weighed once per call, by identity
        key = id(message)
        weight = known.get(key)
        if weight is None:
            weight = known[key] = measure(message)
        return weight

    cost = weigh
    if at is not None and within(window[at:], limit, cost):
        if not cold or within(window[at:], trim_to, cost):
            return Placement(at, moved=False, base=base)
    elif within(window, limit, cost):
        # The view from an earlier cut, or from the history's start, may still fit.
        if not complete:
            return None
        if at is None and (not cold or within(window, trim_to, cost)):
            return Placement(0, moved=False, base=base)
    start = select_start(window, trim_to, cost, complete=complete)
    if start is None or (start == 0 and not complete):
        return None
    # A single exchange longer than the limit is kept whole: then the cut may not move.
    return Placement(start, moved=start != at, base=base)
