"""A stored cut is a hint: one that does not start a valid view is treated as garbage.

A window's cut lives in the store's per-session meta, where anything may be written: by
hand, by another version, by a tool that edits the store. Whatever the meta holds, the view
a policy returns is valid for a provider (no tool result without the assistant message that
called it, no call without all its results), and a cut that would break that is ignored:
the view starts afresh, as if no cut were stored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from aniki import Message
from aniki.sessions.policies import TokenBudgetSession, WindowedSession
from aniki.sessions.policies._cut import CutRecord
from aniki.tokens import EstimatingCounter

from .histories import assistant, expected_start, result, user
from .stores import Store, resolve

COUNTER = EstimatingCounter()
POLICIES = ["windowed", "budget"]


def last_turn(tag: str) -> list[Message]:
    """A question answered with three parallel tool calls, then a reply."""
    return [
        user(f"look these up {tag}"),
        assistant("", f"x{tag}", f"y{tag}", f"z{tag}"),
        result(f"x{tag}", "found x"),
        result(f"y{tag}", "found y"),
        result(f"z{tag}", "found z"),
        assistant(f"all found {tag}"),
    ]


def conversation(turns: int, start: int = 0) -> list[Message]:
    messages: list[Message] = []
    for t in range(start, start + turns):
        messages.append(user(f"question {t} " + "why " * (t % 4)))
        if t % 3 == 1:
            messages += [assistant("", f"call{t}"), result(f"call{t}", f"found {t}")]
        messages.append(assistant(f"answer {t} " + "because " * (t % 5)))
    return messages


SHORT = [user("hello"), assistant("hi"), *last_turn("s")]
"""Fits every policy's limit: a fresh view is the whole history."""
LONG = [*conversation(14), *last_turn("l")]
"""Over every policy's limit, and longer than a policy's first fetch."""

WINDOW = 10
BUDGET = sum(COUNTER.count_message(m) for m in SHORT)


def ONE(message: Message) -> int:
    return 1


def policy_of(kind: str, inner: Any) -> Any:
    if kind == "windowed":
        return WindowedSession(inner, WINDOW)
    return TokenBudgetSession(inner, BUDGET, counter=COUNTER)


def cost_of(kind: str) -> tuple[int, int, Callable[[Message], int]]:
    """The policy's limit, its trim_to and what one message costs under it."""
    if kind == "windowed":
        return WINDOW, WINDOW // 2, ONE
    return BUDGET, BUDGET // 2, COUNTER.count_message


def afresh(kind: str, history: Sequence[Message]) -> tuple[Message, ...]:
    """The view with no cut stored: the whole history while it fits, else the longest valid
    suffix within trim_to."""
    limit, trim_to, cost = cost_of(kind)
    if sum(cost(m) for m in history) <= limit:
        return tuple(history)
    return tuple(history[expected_start(history, trim_to, cost) :])


def assert_valid(view: Sequence[Message]) -> None:
    """Every tool result follows its call in the view, and every call has all its results."""
    made: set[str] = set()
    answered: set[str] = set()
    for message in view:
        if message.role == "tool":
            assert message.tool_call_id in made, f"a result without its call: {list(view)}"
            answered.add(message.tool_call_id)  # type: ignore[arg-type]
        made.update(call.id for call in message.tool_calls)
    assert made <= answered, f"a call without its results: {list(view)}"


def index_of(history: Sequence[Message], role: str, content: str) -> int:
    return next(i for i, m in enumerate(history) if m.role == role and m.content == content)


def hostile_cuts(stored: Sequence[Message]) -> dict[str, Any]:
    """Meta values that point a cut where no view may start, or nowhere at all."""
    first = index_of(stored, "tool", "found x")
    valid = CutRecord.at(stored, first - 2).to_value()  # the last turn's question
    return {
        "at a tool message": CutRecord.at(stored, first).to_value(),
        "in the middle of a tool-call group": CutRecord.at(stored, first + 1).to_value(),
        "at the last result of a group": CutRecord.at(stored, first + 2).to_value(),
        "past the end": {**valid, "kept": len(stored) + 5},
        "at an unknown message": {**valid, "first": "0" * 32},
        "of a future version": {**valid, "version": 99},
        "with an empty run": {**valid, "kept": 0},
        "with a count as text": {**valid, "first_size": str(valid["first_size"])},
        "as a string": "aniki.cut at 3",
        "as a number": 3,
        "as a list": [3, 4],
    }


async def fill(store: Store, name: str, history: Sequence[Message]) -> Any:
    inner = store.open(name)
    await resolve(inner.add_messages(history))
    return inner


@pytest.mark.parametrize("kind", POLICIES)
@pytest.mark.parametrize("history", [SHORT, LONG], ids=["fits", "over"])
async def test_a_cut_that_starts_no_valid_view_is_ignored(
    store: Store, kind: str, history: list[Message]
) -> None:
    if not store.has_meta:
        pytest.skip("a store without meta keeps no cut")
    expected = afresh(kind, history)
    for number, case in enumerate(hostile_cuts(history)):
        inner = await fill(store, f"hints-{kind}-{number}", history)
        # A record names messages by fingerprint, and a stored message's includes its id.
        value = hostile_cuts(await resolve(inner.get_messages()))[case]
        key = policy_of(kind, inner).cut_key
        await resolve(inner.set_meta(key, value))
        view = tuple(await resolve(policy_of(kind, inner).get_messages()))
        assert_valid(view)
        assert view == expected, f"a cut {case}: {[m.content for m in view]}"
        again = tuple(await resolve(policy_of(kind, inner).get_messages()))
        assert again == expected, f"a cut {case}, read again"


@pytest.mark.parametrize("kind", POLICIES)
async def test_a_cut_of_an_undone_turn_is_ignored(store: Store, kind: str) -> None:
    if not store.has_meta:
        pytest.skip("a store without meta keeps no cut")
    inner = await fill(store, f"hints-undo-{kind}", [*LONG, *last_turn("u")])
    if not callable(getattr(inner, "undo", None)):
        pytest.skip("a store without undo()")
    stored = await resolve(inner.get_messages())
    question = len(LONG)  # the turn undone next: a valid start until it is gone
    key = policy_of(kind, inner).cut_key
    await resolve(inner.set_meta(key, CutRecord.at(stored, question).to_value()))
    await resolve(inner.undo())
    view = tuple(await resolve(policy_of(kind, inner).get_messages()))
    assert_valid(view)
    assert view == afresh(kind, LONG)


@pytest.mark.parametrize("kind", POLICIES)
async def test_a_reader_that_finds_a_hostile_cut_while_moving_ignores_it(
    store: Store, kind: str
) -> None:
    # A reader checks the stored cut again before moving its own: another process may have
    # moved it. What it finds there is a hint too.
    if not store.has_meta:
        pytest.skip("a store without meta keeps no cut")
    inner = store.open(f"hints-moving-{kind}")
    reader = policy_of(kind, inner)
    limit, _, cost = cost_of(kind)
    tail = last_turn("m")
    for turn in range(40):  # until the tail will take the view over the limit
        await resolve(inner.add_messages(conversation(1, start=turn)))
        view = tuple(await resolve(reader.get_messages()))
        if sum(cost(m) for m in (*view, *tail)) > limit:
            break
    else:
        raise AssertionError("the view never filled up")
    await resolve(inner.add_messages(tail))
    stored = await resolve(inner.get_messages())
    first = index_of(stored, "tool", "found x")
    await resolve(inner.set_meta(reader.cut_key, CutRecord.at(stored, first).to_value()))
    view = tuple(await resolve(reader.get_messages()))
    assert_valid(view)
    assert view[0].role != "tool", [m.content for m in view]


@pytest.mark.parametrize("kind", POLICIES)
@pytest.mark.parametrize("history", [SHORT, LONG], ids=["fits", "over"])
async def test_a_cut_whose_position_does_not_hold_is_ignored(
    store: Store, kind: str, history: list[Message]
) -> None:
    if not store.has_meta:
        pytest.skip("a store without meta keeps no cut")
    positions: list[Any] = [-3, 0, True, "7", 2.0]
    if history is SHORT:  # a whole history shows where the cut lies
        positions += [1, len(history) + 5]
    for number, position in enumerate(positions):
        inner = await fill(store, f"hints-position-{kind}-{number}", history)
        stored = await resolve(inner.get_messages())
        question = index_of(stored, "tool", "found x") - 2  # a valid start
        value = {**CutRecord.at(stored, question).to_value(), "position": position}
        await resolve(inner.set_meta(policy_of(kind, inner).cut_key, value))
        view = tuple(await resolve(policy_of(kind, inner).get_messages()))
        assert view == afresh(kind, history), f"position {position!r}"
