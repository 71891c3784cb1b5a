"""``TokenBudgetSession``: the most recent messages that fit a token budget."""

from __future__ import annotations

from collections.abc import Sequence

from ..messages import Message
from ..tokens import TokenCounter, counter_for_model
from ._policy import ReadPlan, SessionT, SuffixPolicy, check_positive, plan_suffix
from ._select import select_start

__all__ = ["TokenBudgetSession"]

_FETCH_MARGIN = 16
"""Messages fetched beyond the last read's window: room for what a turn or two appends."""


class TokenBudgetSession(SuffixPolicy[SessionT]):
    """A view of a session that returns the most recent messages fitting ``max_tokens``.

    Tokens are counted by ``counter`` (default: :func:`~aniki.tokens.counter_for_model` for
    ``model``, an estimate when no model is given), and each message's count is remembered, so
    a read costs about the size of the window, not of the history. The window never splits a
    tool exchange; when even the last exchange is over the budget, it is returned whole.
    ``max_tokens`` is the history's share of a request: leave room for the instructions, the
    tool definitions and the reply. Over an ``AsyncSession`` the methods are awaited.

    Example::

        session = TokenBudgetSession(SQLiteSession("chat-42"), 8_000, model="gpt-4o-mini")
        agent = Agent("Assistant", model="gpt-4o-mini", session=session)
    """

    def __init__(
        self,
        inner: SessionT,
        max_tokens: int,
        *,
        model: str | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        super().__init__(inner)
        self.max_tokens = check_positive("max_tokens", max_tokens)
        """The most tokens a read returns (unless the last exchange alone is larger)."""
        self.counter: TokenCounter = counter if counter is not None else counter_for_model(model)
        """Counts each message's tokens."""
        self._last_size = 0

    def _plan(self) -> ReadPlan:
        limit = self.max_tokens
        cost = self.counter.count_message

        def select(window: Sequence[Message], complete: bool) -> int | None:
            return select_start(window, limit, cost, complete=complete)

        plan = plan_suffix(select, self._first_fetch(self._last_size + _FETCH_MARGIN))
        view = yield from plan
        self._last_size = len(view)
        return view

    def __repr__(self) -> str:
        return f"TokenBudgetSession({self._inner!r}, max_tokens={self.max_tokens})"
