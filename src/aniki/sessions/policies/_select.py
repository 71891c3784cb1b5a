"""Which most-recent messages a history policy keeps: pure logic, no I/O.

Every policy returns a contiguous, most-recent suffix ``history[start:]``. A suffix is valid
for a provider when each ``tool`` message in it is preceded, inside the suffix, by the
assistant message that made the call. Because a suffix runs to the end, an assistant call in it
always keeps every result already stored, so the one thing to check is that ``start`` does not
fall inside an exchange (after an assistant call, before or on one of its results).

:func:`select_start` scans backwards from the end and stops as soon as the answer is known, so
its cost follows the size of the window it keeps, not the length of the history. It also works
on a partial view (the last messages of a longer history): then it says when it needs more.

A ``tool`` message whose call is nowhere in the history (a history written by hand) cannot be
made valid; such results are ignored when deciding where a cut may fall, rather than forcing
the whole history to be kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ...messages import Message

__all__ = ["Cost", "cut_points", "opens", "select_start", "unit_cost", "within"]

Cost = Callable[[Message], int]
"""The weight of one message under a limit: ``1`` for a message count, its tokens for a budget."""


def unit_cost(message: Message) -> int:
    """Every message weighs one: the cost for a limit on the number of messages."""
    return 1


@dataclass(slots=True)
class _Scan:
    best: int | None = None
    """The smallest allowed start whose suffix fits the limit."""
    shortest: int | None = None
    """The largest allowed start below the end: the shortest valid non-empty suffix."""
    stopped: bool = False
    """Whether the scan stopped early because no earlier start could fit."""
    unmatched: frozenset[str] = frozenset()
    """Tool-call ids still waiting for their assistant call where the scan ended."""


def _scan(history: Sequence[Message], limit: int, cost: Cost, ignore: frozenset[str]) -> _Scan:
    scan = _Scan()
    waiting: set[str] = set()
    total = 0
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        total += cost(message)
        if message.role == "tool":
            if message.tool_call_id not in ignore:
                waiting.add(message.tool_call_id)  # type: ignore[arg-type]
        elif message.tool_calls:
            waiting.difference_update(call.id for call in message.tool_calls)
        if not waiting:
            if scan.shortest is None:
                scan.shortest = index
            if total <= limit:
                scan.best = index
        if total > limit and scan.shortest is not None:
            scan.stopped = True
            break
    scan.unmatched = frozenset(waiting)
    return scan


def within(messages: Sequence[Message], limit: int, cost: Cost) -> bool:
    """Whether ``messages`` together cost at most ``limit`` (counted only as far as needed)."""
    total = 0
    for message in messages:
        total += cost(message)
        if total > limit:
            return False
    return True


def select_start(
    history: Sequence[Message],
    limit: int,
    cost: Cost = unit_cost,
    *,
    complete: bool = True,
) -> int | None:
    """The start of the suffix of ``history`` a policy keeps.

    That suffix is the longest valid one whose costs add up to at most ``limit``; when no
    non-empty valid suffix fits, it is the shortest valid non-empty one (an exchange is never
    split, so a single long exchange is kept whole). An empty history gives ``0``.

    Args:
        history: the messages, oldest first: the whole history, or only its last part.
        limit: the most the kept messages may cost.
        cost: the cost of one message (default: one per message).
        complete: whether ``history`` is the whole history. When it is not and the answer
            depends on earlier messages, ``None`` is returned: fetch more and call again.
    """
    scan = _scan(history, limit, cost, frozenset())
    if not scan.stopped:
        if not complete:
            return None
        if scan.unmatched:
            # Results whose call is nowhere in the history: see the module docstring.
            scan = _scan(history, limit, cost, scan.unmatched)
    if scan.best is not None:
        return scan.best
    return scan.shortest if scan.shortest is not None else len(history)


def cut_points(history: Sequence[Message]) -> list[int]:
    """Every index where ``history`` may be cut without splitting an exchange, ascending.

    ``0`` and ``len(history)`` are always included. Results whose call is nowhere in
    ``history`` do not constrain the cuts.
    """
    if not history:
        return [0]
    calls_seen: set[str] = set()
    for message in history:
        calls_seen.update(call.id for call in message.tool_calls)
    waiting: set[str] = set()
    points = [len(history)]
    for index in range(len(history) - 1, 0, -1):
        message = history[index]
        if message.role == "tool" and message.tool_call_id in calls_seen:
            waiting.add(message.tool_call_id)
        elif message.tool_calls:
            waiting.difference_update(call.id for call in message.tool_calls)
        if not waiting:
            points.append(index)
    points.append(0)
    points.reverse()
    return points


def opens(window: Sequence[Message], start: int, complete: bool) -> bool | None:
    """Whether a view may start at ``window[start]``: no tool result in ``window[start:]``
    answers a call made before it. ``None`` when a partial window holds a result whose call it
    does not show: the call lies before the window, or nowhere (then the result cannot be
    made valid, and is ignored as :func:`select_start` ignores it); fetch more to tell.

    A stored start (a window's cut, a summary's end) is checked with it before it is trusted.
    """
    made: set[str] = set()
    earlier: set[str] | None = None
    for message in window[start:]:
        if message.role == "tool" and message.tool_call_id not in made:
            if earlier is None:
                earlier = {call.id for m in window[:start] for call in m.tool_calls}
            if message.tool_call_id in earlier:
                return False
            if not complete:
                return None
        made.update(call.id for call in message.tool_calls)
    return True
