"""The chain of an encrypted session's records, and the check that every record is in its
place (pure, no I/O; :mod:`aniki.sessions.encrypted` seals, opens and stores them).

Each sealed record names a *chain value*: the digest of the stored record before it
(:data:`GENESIS` when there was none). A record sealed ``onto_tail`` was appended by a store
that checked, in the append itself, that the last record it held was the one named
(:class:`AppendsAfter`): it names exactly the record right before it, and a read holds it to
that. Any other record (written over a store without that check, or before it existed) may
name an earlier record of the session: writers that read the tail at the same moment both
name it, and the chain forks.

What a read proves: every record it returns was sealed with the key for this session and
follows, unbroken, from the record before the window (or the session's start). What it cannot
prove is that nothing came after the last record: an ``undo()``, which removes only the newest
records, and someone with write access cutting the newest records off both leave a whole chain.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..errors import StoreError
from ..messages import Message

__all__ = ["GENESIS", "TRIES", "AppendsAfter", "NeedMore", "Opened", "digest", "place"]

GENESIS = ""
"""The chain value of a record written when the session was empty."""

TRIES = 64
"""Appends one call makes, each onto the tail it just read, before it gives up: each failed
try means another writer's append, undo or clear landed first."""


@runtime_checkable
class AppendsAfter(Protocol):
    """A store that appends a batch only if its last record is the one named, in one atomic
    step with the append (all four persistent stores and their async twins)."""

    def _add_after(
        self,
        messages: list[Message],
        after: str | None,
        *,
        read: bool = False,
        limit: int | None = None,
    ) -> Any:
        """Append ``messages`` (stamped) only if the last stored message has the id ``after``
        (``None``: the session holds no message); ``None``, writing nothing, if not. Else,
        with ``read``, what ``get_messages(limit)`` returns right after; without, the batch
        as stored (with its ids). Awaitable on an async store."""
        ...


@dataclass(frozen=True, slots=True)
class Opened:
    """A stored record, checked and opened."""

    plain: Message
    """The message sealed in it, with the id and time the store gave the record."""
    prev: str | None
    """The chain value it names (``None`` for an unbound record read with accept_unbound)."""
    digest: str
    """Its own chain value: what the record after it names."""
    onto_tail: bool = False
    """Sealed to follow the record right before it (see the module docstring)."""


class NeedMore(Exception):
    """A limited read found a record naming one before the window: read more history."""


def digest(stored: Message) -> str:
    """The chain value of a stored record: a digest of its ciphertext."""
    raw = hashlib.sha256(stored.content.encode("utf-8", "surrogatepass")).digest()[:18]
    return base64.urlsafe_b64encode(raw).decode("ascii")


def place(
    stored: Sequence[Message],
    start: int,
    *,
    complete: bool,
    known: Callable[[Message], Opened | None],
    open_record: Callable[[Message, str], Opened],
    session_id: str,
    altered: type[StoreError],
) -> dict[int, Opened]:
    """``stored[start:]`` (and any record before it that the check reaches) opened, once
    every one of them is checked: no copy of another record, each in its place.

    A record is in its place when the record it names comes before it and is in its place
    too (right before it, for a record sealed ``onto_tail``). So the check reaches back from
    the window to the earliest record a checked record names: one record on an unbroken
    chain, more after racing writers forked it. A record naming the start of the session (or
    an unbound one) is placed only against the whole history: when ``stored`` is not
    ``complete`` (more may lie before it), :class:`NeedMore`. Records before the checked ones
    are only hashed, for copies. ``known`` gives a record opened before (not decrypted
    again); ``altered`` is the error raised for a record out of place.
    """
    check = _Check(stored, complete, known, open_record, session_id, altered)
    for index in range(start, len(stored)):  # in order: the first bad record is named
        check.opened(index)
    check_from, index = start, len(stored) - 1
    while index >= check_from:
        before = check.named(index)
        if before < 0 and not complete:
            raise NeedMore
        check_from = min(check_from, before + 1)
        index -= 1
    check.unbound_first()
    return check.checked


class _Check:
    """The state of one :func:`place`: every record hashed, those checked so far opened."""

    def __init__(
        self,
        stored: Sequence[Message],
        complete: bool,
        known: Callable[[Message], Opened | None],
        open_record: Callable[[Message, str], Opened],
        session_id: str,
        altered: type[StoreError],
    ) -> None:
        self.stored, self.complete, self.session_id = stored, complete, session_id
        self.open_record, self.altered = open_record, altered
        self.checked: dict[int, Opened] = {}
        self.hashes: list[str] = []
        self.cached: list[Opened | None] = []
        self.first: dict[str, int] = {}
        for index, record in enumerate(stored):
            found = known(record)
            value = found.digest if found else digest(record)
            if value in self.first:
                raise altered(
                    f"message {index} of session {session_id!r} (of {len(stored)} read) is a "
                    f"copy of message {self.first[value]}; refused"
                )
            self.first[value] = index
            self.hashes.append(value)
            self.cached.append(found)

    def where(self, index: int) -> str:
        if self.complete:
            return f"message {index} of session {self.session_id!r}"
        return f"message -{len(self.stored) - index} (from the end) of session {self.session_id!r}"

    def opened(self, index: int) -> Opened:
        if index not in self.checked:
            record = self.cached[index] or self.open_record(self.stored[index], self.where(index))
            self.checked[index] = record
        return self.checked[index]

    def named(self, index: int) -> int:
        """Where the record that record ``index`` names is (-1: the start of the session)."""
        record = self.opened(index)
        prev = record.prev
        if record.onto_tail:
            if index > 0 and prev == self.hashes[index - 1]:
                return index - 1
            if index == 0 and (prev == GENESIS or not self.complete):
                return -1
            raise self.altered(
                f"{self.where(index)} was not written right after the record before it: "
                "records were removed from before it, inserted or reordered; refused"
            )
        if prev is None or prev == GENESIS:
            return -1
        if prev in self.first and self.first[prev] < index:
            return self.first[prev]
        if not self.complete:
            raise NeedMore
        raise self.altered(
            f"{self.where(index)} was not written after any record before it: records were "
            "removed from before it, reordered, or taken from another copy of the session; "
            "refused"
        )

    def unbound_first(self) -> None:
        """Refuse an unbound record (read with accept_unbound) after a sealed one."""
        bound_before = False
        for index in sorted(self.checked):
            unbound = self.checked[index].prev is None
            if unbound and bound_before:
                raise self.altered(
                    f"{self.where(index)} is not sealed but follows sealed records: it was inserted"
                )
            bound_before = bound_before or not unbound
