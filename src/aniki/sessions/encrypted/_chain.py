"""The chain of an encrypted session's records: sealing a batch onto the last record, and
the check that every record read is in its place (pure, no I/O; ``_envelope`` seals and opens
one record, ``session`` stores them).

Each sealed record names a *chain value*: the digest of the stored record before it
(:data:`~._envelope.GENESIS` when there was none). A record sealed ``onto_tail`` was appended
by a store that checked, in the append itself, that the last record it held was the one named
(:class:`~aniki.sessions._capabilities.AppendsAfter`): it names exactly the record right
before it, and a read holds it to that. Any other record (written over a store without that
check, or before it existed) may name an earlier record of the session: writers that read
the tail at the same moment both name it, and the chain forks. Such a fork is accepted, as a
record naming *an earlier* record of the session, when every record between the two is in
its place too.

What a read proves: every record it returns was sealed with the key for this session and
follows, unbroken, from the record before the window (or the session's start). What it cannot
prove is that nothing came after the last record: an ``undo()``, which removes only the newest
records, and someone with write access cutting the newest records off both leave a whole chain.

A limited read checks the chain over the window and back to the earliest record the window
names (on an unbroken chain, the one record before it), so it stays O(window): what it returns
is the genuine tail, in its place, though a change wholly before the window shows only in a
longer read. It is a flow (see :mod:`aniki.sessions._driver`): it asks for the last N stored
records (``None``: all of them), as many times as it needs.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Any

from ...messages import Message
from ._envelope import GENESIS, AlteredDataError, Envelope, Opened, digest

__all__ = ["Chain", "NeedMore", "Read", "place"]

Read = Generator["int | None", Any, "tuple[Message, ...]"]
"""A read: yields how many of the last stored records to fetch (``None``: all), is sent them,
and returns the plaintext messages."""

_WIDEST = 4096
"""The most records a limited read fetches before the ones it returns, to check them; past
that, it reads the whole history."""


class NeedMore(Exception):
    """A limited read found a record naming one before the window: read more history."""


def place(
    stored: Sequence[Message],
    start: int,
    *,
    complete: bool,
    known: Callable[[Message], Opened | None],
    open_record: Callable[[Message, str], Opened],
    session_id: str,
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
    again); a record out of place is an :class:`~._envelope.AlteredDataError`.
    """
    check = _Check(stored, complete, known, open_record, session_id)
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
    ) -> None:
        self.stored, self.complete, self.session_id = stored, complete, session_id
        self.open_record = open_record
        self.checked: dict[int, Opened] = {}
        self.hashes: list[str] = []
        self.cached: list[Opened | None] = []
        self.first: dict[str, int] = {}
        for index, record in enumerate(stored):
            found = known(record)
            value = found.digest if found else digest(record)
            if value in self.first:
                raise AlteredDataError(
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
            raise AlteredDataError(
                f"{self.where(index)} was not written right after the record before it: "
                "records were removed from before it, inserted or reordered; refused"
            )
        if prev is None or prev == GENESIS:
            return -1
        if prev in self.first and self.first[prev] < index:
            return self.first[prev]
        if not self.complete:
            raise NeedMore
        raise AlteredDataError(
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
                raise AlteredDataError(
                    f"{self.where(index)} is not sealed but follows sealed records: it was inserted"
                )
            bound_before = bound_before or not unbound


class Chain:
    """An encrypted session's chain as one instance knows it: the last record, and the
    records its last reads opened (a conversation read every turn costs what is new, not the
    whole history)."""

    def __init__(self, envelope: Envelope, *, limited: bool) -> None:
        self.envelope = envelope
        self.limited = limited
        """Whether the store reads only its last records (``get_messages(limit=...)``)."""
        self.tail: tuple[Message, ...] | None = None
        """The last stored record (in a tuple, empty when there is none) as this instance
        last read or wrote it; ``None``: not known."""
        # Stored record -> opened, as the last whole read and the last limited read found.
        self._seen: tuple[dict[Message, Opened], dict[Message, Opened]] = ({}, {})

    def seal(
        self, batch: Sequence[Message], tail: Sequence[Message], *, onto_tail: bool = False
    ) -> list[Message]:
        """``batch`` sealed as following ``tail``'s last record (with ``onto_tail``, right
        after it: for a store that checks it in the append)."""
        prev = digest(tail[-1]) if tail else GENESIS
        sealed: list[Message] = []
        for message in batch:
            sealed.append(self.envelope.seal(message, prev=prev, onto_tail=onto_tail))
            prev = digest(sealed[-1])
        if sealed and not onto_tail:
            self.tail = (sealed[-1],)
        return sealed

    def read(self, limit: int | None) -> Read:
        """The history in plaintext, or (``limit``) its last ``limit`` messages: one record
        more is fetched, as the window's chain is checked from the record before it."""
        tail_only = limit is not None and self.limited
        stored = yield (limit + 1 if tail_only and limit is not None else None)
        return (yield from self.opened(stored, limit, tail_only=tail_only))

    def opened(self, stored: Sequence[Message], limit: int | None, *, tail_only: bool) -> Read:
        """``stored`` (all of it; with ``limit``, its last ``limit``) in plaintext, checked.
        With ``tail_only``, ``stored`` is only the last ``limit + 1`` records, or fewer (then
        all there are); more are read while a record names one before them (a fork, or
        unbound records): eight times as many each time, then the whole history."""
        if limit is None:
            return self.check(stored, 0, complete=True, whole=True)
        complete = not tail_only or len(stored) <= limit
        extra = 8
        while True:
            try:
                start = max(len(stored) - limit, 0)
                return self.check(stored, start, complete=complete, whole=False)
            except NeedMore:
                pass
            if extra > _WIDEST or not self.limited:
                stored, complete = (yield None), True
            else:
                stored = yield limit + extra
                complete = len(stored) < limit + extra
            extra *= 8

    def check(
        self, stored: Sequence[Message], start: int, *, complete: bool, whole: bool
    ) -> tuple[Message, ...]:
        """``stored[start:]`` in plaintext, once every record of it is checked: sealed for
        this session, its clear fields as sealed, no copy of another record, and in its place
        (see :func:`place`). Records the last whole read and the last limited read opened are
        not decrypted again; ``whole``: ``stored`` is the whole history.
        """
        whole_seen, window_seen = self._seen
        opened = place(
            stored,
            start,
            complete=complete,
            known=lambda record: whole_seen.get(record) or window_seen.get(record),
            open_record=self.envelope.open,
            session_id=self.envelope.session_id,
        )
        by_record = {stored[index]: record_opened for index, record_opened in opened.items()}
        self._seen = (by_record, window_seen) if whole else (whole_seen, by_record)
        self.tail = tuple(stored[-1:])
        return tuple(opened[index].plain for index in range(start, len(stored)))
