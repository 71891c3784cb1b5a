"""Random conversation histories and an independent, brute-force oracle for the policies."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from hypothesis import strategies as st

from aniki import Message, ToolCall
from aniki.sessions.policies._shorten import Shortener

Cost = Callable[[Message], int]


def user(text: str) -> Message:
    return Message(role="user", content=text)


def assistant(text: str = "", *call_ids: str) -> Message:
    calls = tuple(ToolCall(id=c, name=f"tool_{c}", arguments='{"q": 1}') for c in call_ids)
    return Message(role="assistant", content=text, tool_calls=calls)


def result(call_id: str, text: str = "ok") -> Message:
    return Message(role="tool", content=text, tool_call_id=call_id)


@st.composite
def histories(draw: st.DrawFn, max_turns: int = 6) -> list[Message]:
    """Turns of: a user message, zero or more chained rounds of single or parallel tool calls
    (results in any order, call ids sometimes reused across exchanges), then a final reply
    (sometimes missing, as when a run stopped)."""
    fresh = itertools.count()
    words = st.integers(min_value=1, max_value=60)
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append(Message(role="system", content="be brief " * draw(words)))
    for turn in range(draw(st.integers(min_value=0, max_value=max_turns))):
        messages.append(user(f"u{turn} " + "word " * draw(words)))
        for _round in range(draw(st.integers(min_value=0, max_value=3))):
            width = draw(st.integers(min_value=1, max_value=3))
            if draw(st.integers(min_value=0, max_value=4)) == 0:
                ids = draw(
                    st.lists(
                        st.sampled_from(["r0", "r1", "r2", "r3"]),
                        min_size=width,
                        max_size=width,
                        unique=True,
                    )
                )
            else:
                ids = [f"c{next(fresh)}" for _ in range(width)]
            text = "thinking " * draw(st.integers(min_value=0, max_value=5))
            messages.append(assistant(text.strip(), *ids))
            for call_id in draw(st.permutations(ids)):
                messages.append(result(call_id, "result " * draw(words)))
        if draw(st.integers(min_value=0, max_value=5)) > 0:
            messages.append(assistant(f"a{turn} " + "reply " * draw(words)))
    return messages


def caller_of(history: Sequence[Message], index: int) -> int | None:
    """The index of the assistant message that made the call a tool message answers."""
    call_id = history[index].tool_call_id
    for i in range(index - 1, -1, -1):
        if any(call.id == call_id for call in history[i].tool_calls):
            return i
    return None


def _callers(history: Sequence[Message]) -> list[int | None]:
    return [caller_of(history, j) if m.role == "tool" else None for j, m in enumerate(history)]


def allowed(history: Sequence[Message], start: int) -> bool:
    """Whether ``history[start:]`` keeps every tool result with the call it answers."""
    callers = _callers(history)
    return all(c is None or c >= start for c in callers[start:])


def expected_start(history: Sequence[Message], limit: int, cost: Cost) -> int:
    """The start the rules ask for: the longest valid suffix within ``limit``; when none
    fits, the shortest valid non-empty one."""
    if not history:
        return 0
    callers = _callers(history)
    valid = [s for s in range(len(history)) if all(c is None or c >= s for c in callers[s:])]
    fitting = [s for s in valid if sum(cost(m) for m in history[s:]) <= limit]
    return min(fitting) if fitting else max(valid)


def stepped_views(
    history: Sequence[Message], limit: int, trim_to: int, cost: Cost
) -> list[tuple[int, bool]]:
    """The oracle: after each append, where the view starts and whether the cut moved.

    Brute force over the whole history, independent of the code under test: the cut stays
    while the view from it fits; otherwise it moves to the longest valid suffix within
    ``trim_to`` (or the shortest valid one when none fits)."""
    cut, starts = 0, []
    for count in range(1, len(history) + 1):
        stored = history[:count]
        moved = False
        if sum(cost(m) for m in stored[cut:]) > limit:
            new = expected_start(stored, trim_to, cost)
            moved, cut = new != cut, new
        starts.append((cut, moved))
    return starts


def assert_provider_valid(view: Sequence[Message]) -> None:
    """No tool result without the assistant call before it, in the view itself."""
    open_calls: set[str] = set()
    for message in view:
        if message.role == "tool":
            assert message.tool_call_id in open_calls, f"orphan tool result in {view}"
        open_calls.update(call.id for call in message.tool_calls)


def word_cost(message: Message) -> int:
    """A simple deterministic token cost for the property tests."""
    return 3 + len(message.content.split()) + sum(2 for _ in message.tool_calls)


class _Words:
    def count_message(self, message: Message) -> int:
        return word_cost(message)


def as_sent(history: Sequence[Message], allowance: int) -> list[Message]:
    """``history`` as a token budget sends it, its costs counted by :func:`word_cost`: each
    message that alone costs more than ``allowance`` shortened by the policies' own rule
    (tested on its own in ``test_oversize.py``), the others as they are."""
    words = _Words()
    shortener = Shortener(allowance, lambda: words)
    return [shortener.shortened(message) or message for message in history]
