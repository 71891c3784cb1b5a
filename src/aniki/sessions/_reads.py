"""What a read of a session reports about itself: :class:`ReadInfo` (what the last read
saw, for the run's context reports) and :class:`Page` (a slice read in one snapshot)."""

from __future__ import annotations

from dataclasses import dataclass

from ..messages import Message

__all__ = ["Page", "ReadInfo"]


@dataclass(frozen=True, slots=True)
class ReadInfo:
    """What a session's last read saw, for the run's context reports."""

    stored: int | None
    """How many messages the store held at that read (``None``: unknown)."""
    summarized: int = 0
    """How many of the oldest stored messages a summary stands for."""
    prefix_kept: bool = True
    """Whether the view starts where the previous read's did (the cut did not move)."""
    summary: bool = False
    """Whether the view starts with a summary (a system message no store holds)."""
    shortened: int = 0
    """How many messages of the view were sent shortened (each alone over the budget)."""


@dataclass(frozen=True, slots=True)
class Page:
    """A slice of a session's history, read in one consistent snapshot.

    Example::

        page = read_page(session, -50, 50)  # the last 50 messages
        page.total, page.start, len(page.messages)  # (100000, 99950, 50)
    """

    total: int
    """How many messages the session held at the time of the read."""
    start: int
    """The index of ``messages[0]`` in the whole history (from 0); for an empty page, where
    it would have started (``total`` when the page asked for lies past the end)."""
    messages: tuple[Message, ...]
    """The messages, oldest first."""
