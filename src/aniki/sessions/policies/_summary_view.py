"""What a summarizing read sends after its summary, and what a fold reads: pure, no I/O.

The messages after a summary (its *tail*) are sent as :class:`Tail` says: with
``clear_tool_results``, the old tool results as placeholders and the old attachments by
name (:mod:`._clearing`), over turns numbered from the start of the whole history, the
summarized part included. So a summary keeps how many turns it covers
(:attr:`~._summary.Summary.turns`), and the clearing line follows from the history alone:
every reader, policy object, process and restart sends the same tail, and between two
clearing steps each request is the previous one plus what was appended. The budget weighs
the tail as it is sent (placeholders, not results), and a message still larger than what
a summary leaves of the budget is then shortened (:mod:`._shorten`).

A fold reads the tail as it is sent, too: the placeholders, never the results they stand
for. The run's own model, asked in the conversation's terms, then reads exactly what its
last request sent, a prefix its provider's cache holds; a summarizer agent reads a
transcript a fraction of the size (see docs/policies.md for the measured bill).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...messages import Message
from ._clearing import ClearToolResults, clear, users_in
from ._select import Cost, select_start
from ._summary import Summary, chunk_ends

__all__ = ["FoldPlan", "Tail", "known_turns", "plan_fold"]


@dataclass(frozen=True, slots=True)
class Tail:
    """The messages after a summary (all of them, before the budget trims any), as stored
    and as a view sends them.

    Example::

        tail = Tail.of(history[summary.covered :], summary.turns, ClearToolResults())
        tail.sent  # the same messages, the old results as placeholders
    """

    stored: Sequence[Message]
    """The messages, as the store holds them."""
    sent: tuple[Message, ...]
    """The same messages, one for one, as a view sends them: old results cleared."""
    turns: int | None
    """How many turns (user messages) the history holds before them (``None``: unknown,
    which only a policy that does not clear allows)."""

    @classmethod
    def of(
        cls, stored: Sequence[Message], turns: int | None, clearing: ClearToolResults | None
    ) -> Tail:
        """The tail ``stored``, after ``turns`` turns of history, cleared by ``clearing``."""
        if clearing is None:
            return cls(stored, tuple(stored), turns)
        assert turns is not None, "a tail is cleared only once its turns are counted"
        replaced = clear(stored, turns, clearing)
        sent = tuple(replaced.get(id(message), message) for message in stored)
        return cls(stored, sent, turns)

    def after(self, done: int) -> Tail:
        """The tail once a summary covers its first ``done`` messages more. Its messages are
        sent as they were: the clearing line follows from the whole history's turns."""
        turns = None if self.turns is None else self.turns + users_in(self.stored[:done])
        return Tail(self.stored[done:], self.sent[done:], turns)


def known_turns(summary: Summary | None, counted: Summary | None) -> Summary | None:
    """``summary`` with the turn count ``counted`` holds when it is the same summary (a reader
    counted it over the whole history, which a record's count cannot overrule)."""
    if summary is not None and counted is not None and counted.same_as(summary):
        return counted
    return summary


@dataclass(frozen=True, slots=True)
class FoldPlan:
    """What a fold summarizes: the tail's first :attr:`evicted` messages, in chunks."""

    evicted: int
    """How many of the tail's first messages the new summary covers."""
    ends: list[int]
    """Where each summarizer call's chunk ends, ascending; the last is :attr:`evicted`
    (none: nothing to fold)."""


def plan_fold(tail: Tail, cost: Cost, keep_recent: int, max_tokens: int) -> FoldPlan:
    """The fold of all of ``tail`` but its most recent ``keep_recent`` tokens (as sent),
    in chunks of at most ``max_tokens``, never inside a tool exchange."""
    keep_from = select_start(tail.sent, keep_recent, cost)
    assert keep_from is not None  # a whole tail always decides
    return FoldPlan(keep_from, chunk_ends(tail.sent[:keep_from], cost, max_tokens))
