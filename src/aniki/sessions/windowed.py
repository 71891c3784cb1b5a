"""``WindowedSession``: only the most recent messages, never splitting a tool exchange."""

from __future__ import annotations

from collections.abc import Sequence

from ..messages import Message
from ._policy import ReadPlan, SessionT, SuffixPolicy, check_positive, plan_suffix
from ._select import select_start

__all__ = ["WindowedSession"]


class WindowedSession(SuffixPolicy[SessionT]):
    """A view of a session that returns at most its ``max_messages`` most recent messages.

    The window never starts inside a tool exchange: when the cut would leave tool results
    without the assistant message that called them, it moves forward past them. When even the
    last exchange is longer than ``max_messages``, that exchange is returned whole. Writes go
    to ``inner`` untouched; the stored history is never rewritten. Over an ``AsyncSession``
    the methods are awaited, as the inner store's are.

    Example::

        store = InMemorySession()
        session = WindowedSession(store, max_messages=20)
        agent = Agent("Assistant", model="gpt-4o-mini", session=session)
        len(session.get_messages()) <= 20   # True (unless one exchange is longer)
    """

    def __init__(self, inner: SessionT, max_messages: int) -> None:
        super().__init__(inner)
        self.max_messages = check_positive("max_messages", max_messages)
        """The most messages a read returns (unless one exchange alone is longer)."""

    def _plan(self) -> ReadPlan:
        limit = self.max_messages

        def select(window: Sequence[Message], complete: bool) -> int | None:
            return select_start(window, limit, complete=complete)

        # One message more than the window shows whether the window is full.
        return plan_suffix(select, self._first_fetch(limit + 1))

    def __repr__(self) -> str:
        return f"WindowedSession({self._inner!r}, max_messages={self.max_messages})"
