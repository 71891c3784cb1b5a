"""The condition a run puts on its writes: the question it answers is still stored.

A run stores its user message, calls the model (seconds, sometimes minutes), then stores the
reply. Another worker may ``undo()`` (or ``clear()``) the session meanwhile; the reply must
then not be stored after whatever the undo left. Every built-in store keeps a *mark* that
changes whenever messages are removed (its generation: bumped by a clear, an undo and an
import), and checks it in the same atomic step as an append (one SQLite transaction, one
Redis script, one PostgreSQL statement, under the session file's lock, under a lock in
memory): so the check costs no extra read, and nothing slips between check and write.

A run hands its :class:`TurnGuard` to :func:`guarding` around each of its writes. The
store under every wrapper (history policies, ``EncryptedSession``, the async twins, a
user's own) meets it in the context, so no wrapper passes it on: the first write a store
makes under the guard (the user message) records the store's mark, and each later one is
made only while the mark is unchanged; else the store raises :class:`HistoryMoved`,
having written nothing. A write outside :func:`guarding` is never checked. A store
without marks (a custom one) ignores the guard: its writes are unconditional, as before.
"""

from __future__ import annotations

from collections.abc import Hashable
from contextvars import ContextVar
from dataclasses import dataclass, field

__all__ = ["HistoryMoved", "TurnGuard", "admit", "expected_mark", "guarding", "in_force"]


class HistoryMoved(Exception):
    """A store refused a guarded write, having written nothing: messages were removed from
    the session (an undo, a clear, an import) since the guard's first write."""


@dataclass(eq=False, slots=True)
class TurnGuard:
    """The marks of the stores one run writes to, as each had it at the run's first write."""

    marks: dict[object, Hashable] = field(default_factory=dict)
    """By store object (the one that checks, under any wrappers)."""


_GUARD: ContextVar[TurnGuard | None] = ContextVar("aniki_turn_guard", default=None)


class guarding:  # lower case: used as a function, `with guarding(guard):`
    """Make ``guard`` the one the writes inside the block meet (``None``: leave it as it is,
    so that a wrapper's own call into the run's session I/O keeps the run's guard).

    A class rather than a generator: it wraps every write of a run, and costs half as much
    this way."""

    __slots__ = ("_guard", "_token")

    def __init__(self, guard: TurnGuard | None) -> None:
        self._guard = guard

    def __enter__(self) -> None:
        self._token = None if self._guard is None else _GUARD.set(self._guard)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _GUARD.reset(self._token)


def in_force() -> bool:
    """Whether a guard is in force: a store then learns its mark inside the write's step."""
    return _GUARD.get() is not None


def expected_mark(store: object) -> Hashable | None:
    """The mark a guarded write by ``store`` must find; ``None``: any (no guard, or this is
    the store's first write under it). For a store whose server checks the condition."""
    guard = _GUARD.get()
    return None if guard is None else guard.marks.get(store)


def admit(store: object, current: Hashable) -> None:
    """Called by ``store`` in the atomic step of a write, with its mark as it is now: records
    it on the first guarded write, and raises :class:`HistoryMoved` when it changed since."""
    guard = _GUARD.get()
    if guard is not None and guard.marks.setdefault(store, current) != current:
        raise HistoryMoved
