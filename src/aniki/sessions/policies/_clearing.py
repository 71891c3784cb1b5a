"""Old tool results and attachments, cleared from what a window sends, in steps: pure, no I/O.

An agent's context is mostly tool results: kilobytes a call, several calls a turn, rarely
needed again once the turn that asked for them is over, yet re-sent every turn (cached or
not) and pushing the conversation itself out of the budget. :class:`ClearToolResults` has a
window send, in place of each old result, a short placeholder that names the call and what
was cleared (the tool call and its result stay a pair: the provider sees a valid exchange),
and an old attachment by its name. The stored history is untouched.

**In steps, like the cut.** Turns are numbered from the start of the history (a turn starts
at each user message). With ``keep_turns=K`` and ``every=S``, once the conversation is at
turn ``T`` the results of turns up to ``L = ((T - K) // S) * S`` are cleared: ``L`` moves
once every ``S`` turns, by ``S`` turns, so between two clearings every request's history is
the previous one plus what was appended (a prompt cache serves it), and the last ``K`` to
``K + S - 1`` turns are always sent whole. ``L`` is a function of the history alone: every
reader, process and restart clears the same results. A window knows the turn its view
starts at from its cut, which keeps it in the store's meta beside its position; a
summarizing session, from its summary, whose record keeps how many turns it covers.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ...errors import UserError
from ...messages import Message

__all__ = ["ClearToolResults", "clear", "users_in"]


@dataclass(frozen=True, slots=True)
class ClearToolResults:
    """Clear old tool results (and attachments) from what a window sends, in steps.

    Pass it as ``clear_tool_results=`` to :class:`~aniki.sessions.TokenBudgetSession`,
    :class:`~aniki.sessions.WindowedSession` or :class:`~aniki.sessions.SummarizingSession`
    (``True`` for these defaults).

    Example::

        TokenBudgetSession(store, 16_000, model="gpt-4o-mini",
                           clear_tool_results=ClearToolResults(keep_turns=1, every=2))
    """

    keep_turns: int = 1
    """The most recent turns whose results are always sent whole (at least 1): with 1, a
    result is sent whole through the turn that asked for it, then cleared."""
    every: int = 2
    """How many turns the clearing moves by, at once (at least 1). A clearing breaks the
    cached prefix where the newly cleared results start, so everything after them is sent
    again uncached: the kept turns' results included. Measured on a tool-heavy trace (see
    docs/policies.md), keeping 1 turn bills far less than keeping 2, and moving by 1, 2 or
    4 turns bills within 6 % of each other for a window; a summarizing session bills less
    with 1 (fewer whole results pile up, so it summarizes less often)."""
    min_chars: int = 400
    """A result shorter than this many characters is kept: its placeholder would save
    little."""

    def __post_init__(self) -> None:
        for name, least in (("keep_turns", 1), ("every", 1), ("min_chars", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise UserError(
                    f"ClearToolResults {name} must be a whole number of at least {least}, "
                    f"got {value!r}"
                )

    @property
    def key(self) -> str:
        """What it adds to a window's meta key: a window that clears keeps its own cut."""
        return f".clear{self.keep_turns}.{self.every}.{self.min_chars}"

    def line(self, turn: int) -> int:
        """The last turn whose results are cleared once the conversation is at ``turn``."""
        return max(0, (turn - self.keep_turns) // self.every * self.every)


def users_in(messages: Sequence[Message]) -> int:
    """How many turns start in ``messages`` (its user messages)."""
    return sum(1 for message in messages if message.role == "user")


def clear(
    window: Sequence[Message], first_turn: int, rules: ClearToolResults
) -> dict[int, Message]:
    """What a view over ``window`` sends in place of its old messages, by the ``id()`` of
    the message replaced. ``first_turn``: the turn ``window``'s first message is in, when it
    is not a user message (the user messages before it). Messages before the history's first
    user message count with its first turn."""
    line = rules.line(first_turn + users_in(window))
    if line == 0 or line < first_turn:  # nothing cleared yet, or all of it is newer
        return {}
    replaced: dict[int, Message] = {}
    names: dict[str, str] = {}
    turn = first_turn
    for message in window:
        if message.role == "user":
            turn += 1
        if turn > line:
            break
        for call in message.tool_calls:
            names[call.id] = call.name
        # The message's id and time key the caches too: equal messages keep their own.
        stamp = (message.id, message.created_at)
        if message.role == "tool" and len(message.content) >= rules.min_chars:
            name = names.get(message.tool_call_id or "", "the tool")
            replaced[id(message)] = _placeholder(message, name, stamp)
        elif message.attachments:
            replaced[id(message)] = _without_attachments(message, stamp)
    return replaced


@functools.lru_cache(maxsize=8192)
def _placeholder(message: Message, name: str, stamp: object) -> Message:
    """The result ``message`` of a call to ``name``, cleared (the same text every time, so
    the request's prefix is the same at every read)."""
    text = (
        f"[The result of {name} was cleared from the context to save space "
        f"({len(message.content):,} characters). Call {name} again if you need it.]"
    )
    return replace(message, content=text, attachments=())


@functools.lru_cache(maxsize=8192)
def _without_attachments(message: Message, stamp: object) -> Message:
    """``message`` with each attachment replaced by a line naming it."""
    notes = []
    for attachment in message.attachments:
        what = attachment.name or attachment.media_type
        notes.append(f"[{attachment.kind} {what} cleared from the context to save space]")
    content = "\n".join(part for part in (message.content, *notes) if part)
    return replace(message, content=content, attachments=())
