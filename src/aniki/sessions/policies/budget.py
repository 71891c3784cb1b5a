"""``TokenBudgetSession``: the most recent messages that fit a token budget, in steps."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from ...messages import Message
from ...tokens import TokenCounter, counter_for_model
from ._checks import check_cache_ttl, check_clearing, check_positive, check_trim_to
from ._clearing import ClearToolResults
from ._cut import Found, Placement
from ._policy import CountsTokens, SessionT, SuffixPolicy
from ._shorten import Shortener

__all__ = ["TokenBudgetSession"]

_FRESH_FETCH = 16
"""Messages asked for first when no cut is known: doubled until the budget is covered."""


class TokenBudgetSession(SuffixPolicy[SessionT], CountsTokens):
    """A view of a session that returns the most recent messages fitting ``max_tokens``.

    The view's start (the *cut*) stays where it is while the view fits ``max_tokens``: each
    read returns the previous read's messages plus what was appended, so a provider's prompt
    cache serves everything but the new turn. When an append takes the view over the
    budget, the cut moves forward once, to leave at most ``trim_to`` tokens (default: half
    of ``max_tokens``); ``trim_to=max_tokens`` slides the window every turn instead, which
    sends fewer tokens but has almost none of them served from cache. The cut is kept in the
    inner store's per-session meta, so another object, process or restart reads the same
    view (over a store without ``get_meta``, in this object only). ``cache_ttl`` (seconds, or
    a ``timedelta``) is the provider's prompt-cache lifetime: when a message comes longer
    than that after the one before it, the cache has expired and the whole request is paid
    again anyway, so the cut moves then, to leave at most ``trim_to``, even if the view fits.

    Tokens are counted by ``counter`` (default: :func:`~aniki.tokens.counter_for_model` for
    ``model``, an estimate when no model is given), and each message's count is remembered,
    so a read costs about the size of the window, not of the history. The window never
    splits a tool exchange; when even the last exchange is over the budget, it is returned
    whole; but a single message that costs more than ``max_tokens`` by itself is sent
    shortened: its text cut to fit, with a note saying so (the stored message stays whole).
    ``max_tokens`` is the history's share of a request: leave room for the instructions,
    the tool definitions and the reply. Over an ``AsyncSession`` the methods are awaited.

    Example::

        session = TokenBudgetSession(SQLiteSession("chat-42"), 8_000, model="gpt-4o-mini")
        agent = Agent("Assistant", model="gpt-4o-mini", session=session)
    """

    def __init__(
        self,
        inner: SessionT,
        max_tokens: int,
        *,
        trim_to: int | None = None,
        model: str | None = None,
        counter: TokenCounter | None = None,
        cache_ttl: float | timedelta | None = None,
        clear_tool_results: ClearToolResults | bool | None = None,
    ) -> None:
        limit = check_positive("max_tokens", max_tokens)
        trim = check_trim_to(trim_to, limit, "max_tokens")
        clearing = check_clearing(clear_tool_results)
        super().__init__(inner, limit, trim, check_cache_ttl(cache_ttl), clearing)
        self.max_tokens = limit
        """The most tokens a read returns (unless the last exchange alone is larger)."""
        self._counter = counter if counter is not None else counter_for_model(model)
        self._fit = Shortener(limit, lambda: self._counter)

    @property
    def cut_key(self) -> str:
        """The meta key the cut is kept under: the budget, ``trim_to`` and the counter's
        kind, e.g. ``"aniki.cut.tokens.4000.2000.EstimatingCounter"``."""
        counter = self.counter
        kind = type(counter).__name__
        encoding = getattr(counter, "encoding", None)
        if isinstance(encoding, str):
            kind += f".{encoding}"
        return f"aniki.cut.tokens.{self.max_tokens}.{self.trim_to}.{kind}{self._key_suffix()}"

    def _cost(self, message: Message) -> int:
        weight = self._counter.count_message(message)
        return weight if weight <= self._fit.below else self._fit.cost(message, weight)

    def _place(
        self, found: Found | None, window: Sequence[Message], complete: bool, kept: int
    ) -> Placement | None:
        self._fit.synced()  # its counter may have been replaced since the last read
        return super()._place(found, window, complete, kept)

    def _settle(
        self, found: Found | None, placement: Placement, window: Sequence[Message], kept: int
    ) -> tuple[tuple[Message, ...], Any]:
        view, cut = super()._settle(found, placement, window, kept)
        view, shortened = self._fit.apply(view)
        if shortened and self._last_read is not None:
            self._last_read = replace(self._last_read, shortened=shortened)
        return view, cut

    def _fresh_fetch(self) -> int:
        return _FRESH_FETCH

    def __repr__(self) -> str:
        return (
            f"TokenBudgetSession({self._inner!r}, max_tokens={self.max_tokens}, "
            f"trim_to={self.trim_to}{self._options_repr()})"
        )
