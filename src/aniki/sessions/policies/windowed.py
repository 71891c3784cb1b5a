"""``WindowedSession``: the most recent messages, in steps, never splitting a tool exchange."""

from __future__ import annotations

from datetime import timedelta

from ...messages import Message
from ._checks import check_cache_ttl, check_clearing, check_positive, check_trim_to
from ._clearing import ClearToolResults
from ._policy import SessionT, SuffixPolicy
from ._select import unit_cost

__all__ = ["WindowedSession"]


class WindowedSession(SuffixPolicy[SessionT]):
    """A view of a session that returns at most its ``max_messages`` most recent messages.

    The view's start (the *cut*) stays where it is while the view holds at most
    ``max_messages``: each read returns the previous read's messages plus what was appended,
    so a provider's prompt cache serves everything but the new turn. When an append takes
    the view over ``max_messages``, the cut moves forward once, to leave at most ``trim_to``
    messages (default: half of ``max_messages``); ``trim_to=max_messages`` slides the window
    by one message every turn instead, which defeats prompt caching. The cut is kept in the
    inner store's per-session meta, so another object, process or restart reads the same
    view (over a store without ``get_meta``, in this object only).

    ``cache_ttl`` (seconds, or a ``timedelta``) is the provider's prompt-cache lifetime: when
    a message comes longer than that after the one before it (the user came back after the
    cache expired, so the whole request is paid again anyway), the cut moves then, to leave
    at most ``trim_to``, even though the view still fits: the free moment to cut.

    The window never starts inside a tool exchange: when a cut would leave tool results
    without the assistant message that called them, it moves forward past them. When even
    the last exchange is longer than ``max_messages``, that exchange is returned whole.
    Writes go to ``inner`` untouched; the stored history is never rewritten. Over an
    ``AsyncSession`` the methods are awaited, as the inner store's are.

    Example::

        store = InMemorySession()
        session = WindowedSession(store, max_messages=20)
        agent = Agent("Assistant", model="gpt-4o-mini", session=session)
        len(session.get_messages()) <= 20   # True (unless one exchange is longer)
    """

    def __init__(
        self,
        inner: SessionT,
        max_messages: int,
        *,
        trim_to: int | None = None,
        cache_ttl: float | timedelta | None = None,
        clear_tool_results: ClearToolResults | bool | None = None,
    ) -> None:
        limit = check_positive("max_messages", max_messages)
        trim = check_trim_to(trim_to, limit, "max_messages")
        clearing = check_clearing(clear_tool_results)
        super().__init__(inner, limit, trim, check_cache_ttl(cache_ttl), clearing)
        self.max_messages = limit
        """The most messages a read returns (unless one exchange alone is longer)."""

    @property
    def cut_key(self) -> str:
        """The meta key the cut is kept under, e.g. ``"aniki.cut.messages.40.20"``."""
        return f"aniki.cut.messages.{self.max_messages}.{self.trim_to}{self._key_suffix()}"

    def _cost(self, message: Message) -> int:
        return unit_cost(message)

    def _fresh_fetch(self) -> int:
        # One message more than the window shows whether the history fits it.
        return self.max_messages + 1

    def __repr__(self) -> str:
        return (
            f"WindowedSession({self._inner!r}, max_messages={self.max_messages}, "
            f"trim_to={self.trim_to}{self._options_repr()})"
        )
