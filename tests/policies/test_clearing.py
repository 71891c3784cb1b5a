"""``clear_tool_results``: old tool results (and attachments) cleared from what a window sends,
in steps, never breaking a tool-call pair. Property-tested like the cuts, against a brute-force
oracle written from the documented rule, read after every append, with new policy objects
too; then what a run sends, the stored history untouched, and the arguments."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aniki import Agent, Attachment, Message, Runner, ToolCall, UserError
from aniki.sessions import ClearToolResults, InMemorySession
from aniki.sessions.policies import TokenBudgetSession, WindowedSession
from aniki.sessions.policies._select import unit_cost
from aniki.testing import MockProvider, MockReply

from .histories import (
    allowed,
    as_sent,
    assert_provider_valid,
    expected_start,
    histories,
    word_cost,
)
from .stores import AsyncMemorySession, PlainSession, resolve
from .summaries import tagged

STORES = {"memory": InMemorySession, "plain": PlainSession, "async": AsyncMemorySession}


class WordCounter:
    def count_message(self, message: Message) -> int:
        return word_cost(message)


def placeholder(name: str, size: int) -> str:
    """The documented placeholder of a cleared result."""
    return (
        f"[The result of {name} was cleared from the context to save space "
        f"({size:,} characters). Call {name} again if you need it.]"
    )


def sent_as(history: Sequence[Message], rules: ClearToolResults) -> list[Message]:
    """What each stored message is sent as, by the rule: the results (long enough) of every
    turn up to ``((T - keep) // every) * every`` replaced by their placeholders."""
    turns = sum(1 for m in history if m.role == "user")
    line = max(0, (turns - rules.keep_turns) // rules.every * rules.every)
    out, turn, names = [], 0, {}
    for message in history:
        turn += message.role == "user"
        for call in message.tool_calls:
            names[call.id] = call.name
        if turn <= line and message.role == "tool" and len(message.content) >= rules.min_chars:
            text = placeholder(names[message.tool_call_id or ""], len(message.content))
            message = Message("tool", text, tool_call_id=message.tool_call_id)
        out.append(message)
    return out


def oracle(
    history: Sequence[Message], limit: int, trim_to: int, cost: Any, rules: ClearToolResults
) -> list[tuple[list[Message], bool, bool]]:
    """After each append: the view, whether the cut moved, and whether a clearing changed
    what the previous view sent (its prefix broke without a cut). A token budget sends a
    message that alone costs more than it shortened, once the old results are cleared."""
    cut, views, previous = 0, [], None
    for count in range(1, len(history) + 1):
        sent = sent_as(history[:count], rules)
        if cost is word_cost:
            sent = as_sent(sent, limit)
        moved = False
        if sum(cost(m) for m in sent[cut:]) > limit:
            new = expected_start(sent, trim_to, cost)
            moved, cut = new != cut, new
        view = sent[cut:]
        cleared = not moved and previous is not None and view[: len(previous)] != previous
        views.append((view, moved, cleared))
        previous = view
    return views


async def replay(kind: str, history: list[Message], make: Any, fresh: bool) -> list[Any]:
    inner = STORES[kind]("c")
    policy = make(inner)
    views = []
    for message in history:
        await resolve(policy.add_message(message))
        if fresh:  # a new object per read: the cut, and its turn count, come from meta
            policy = make(inner)
        views.append(tuple(await resolve(policy.get_messages())))
    return views


def check(
    views: list[Any], history: list[Message], expected: list[Any], rules: ClearToolResults
) -> None:
    clearings = 0
    for count, (view, (wanted, _, cleared)) in enumerate(
        zip(views, expected, strict=True), start=1
    ):
        assert list(view) == wanted
        assert_provider_valid(view)
        assert allowed(history[:count], count - len(view))
        clearings += cleared
    turns = sum(1 for m in history if m.role == "user")
    assert clearings <= turns // rules.every + 1  # a clearing at most once every `every` turns


rules_strategy = st.builds(
    ClearToolResults,
    keep_turns=st.integers(min_value=1, max_value=3),
    every=st.integers(min_value=1, max_value=3),
    min_chars=st.sampled_from([0, 20, 60]),
)


POLICIES: dict[str, tuple[int, int, Any, Any]] = {
    # the limits drawn, the policy, its cost
    "window": (
        2,
        20,
        lambda inner, limit, trim_to, rules: WindowedSession(
            inner, limit, trim_to=trim_to, clear_tool_results=rules
        ),
        unit_cost,
    ),
    "budget": (
        30,
        300,
        lambda inner, limit, trim_to, rules: TokenBudgetSession(
            inner, limit, trim_to=trim_to, counter=WordCounter(), clear_tool_results=rules
        ),
        word_cost,
    ),
}


@pytest.mark.parametrize("policy", sorted(POLICIES))
@settings(max_examples=70, deadline=None)
@given(
    histories(max_turns=9),
    rules_strategy,
    st.data(),
    st.sampled_from(sorted(STORES)),
    st.booleans(),
)
def test_a_stepped_view_sends_old_results_cleared_in_steps(
    policy: str,
    history: list[Message],
    rules: ClearToolResults,
    data: st.DataObject,
    kind: str,
    fresh: bool,
) -> None:
    least, most, made, cost = POLICIES[policy]
    limit = data.draw(st.integers(min_value=least, max_value=most), label="limit")
    trim_to = data.draw(st.integers(min_value=1, max_value=limit), label="trim_to")
    fresh = fresh and kind != "plain"  # a store without meta keeps the cut in the object
    history = tagged(history)

    def make(inner: Any) -> Any:
        return made(inner, limit, trim_to, rules)

    views = asyncio.run(replay(kind, history, make, fresh))
    check(views, history, oracle(history, limit, trim_to, cost, rules), rules)


# --- in a run --------------------------------------------------------------------------------


def _results(request: Any) -> list[str]:
    return [m.content for m in request.messages if m.role == "tool"]


async def test_a_run_sends_placeholders_and_the_store_keeps_every_result() -> None:
    store = InMemorySession("agent")
    sent: list[Any] = []
    turn = 0

    def model(request: Any) -> Any:
        sent.append(request)
        if request.messages[-1].role == "user":
            return MockReply(
                tool_calls=(ToolCall(id=f"c{turn}", name="fetch_page", arguments="{}"),)
            )
        return "done"

    def fetch_page() -> str:
        """Fetch the page."""
        return f"page {turn} " + "lorem ipsum " * 200

    session = TokenBudgetSession(
        store, 100_000, clear_tool_results=ClearToolResults(keep_turns=1, every=2)
    )
    agent = Agent("A", model="m", provider=MockProvider(handler=model), tools=[fetch_page])
    for turn in range(5):
        result = await Runner().run(agent, message=f"read page {turn}", session=session)
    results = _results(sent[-1])  # the last request: turn 5 of 5, the line at turn 4
    assert [r.startswith("[The result of fetch_page was cleared") for r in results] == [
        True,
        True,
        True,
        True,
        False,
    ]
    assert "2,407 characters" in results[0]  # len("page 0 ") + 200 * len("lorem ipsum ")
    stored = [m.content for m in store.get_messages() if m.role == "tool"]
    assert all(text.startswith("page ") for text in stored)  # nothing stored was rewritten
    report = result.context_reports[0]
    assert not report.prefix_kept  # the clearing moved at turn 5: the prefix broke once
    assert result.context_reports[1].prefix_kept


def test_an_old_attachment_is_sent_as_its_name() -> None:
    store = InMemorySession("pics")
    photo = Attachment("image/png", data=b"\x89PNG" + bytes(64), name="cat.png")
    store.add_message(Message("user", "look", attachments=(photo,)))
    store.add_message(Message("assistant", "a cat"))
    for n in range(3):
        store.add_messages([Message("user", f"q{n}"), Message("assistant", f"a{n}")])
    view = WindowedSession(store, 40, clear_tool_results=ClearToolResults(1, 1)).get_messages()
    assert view[0].attachments == ()
    assert view[0].content == "look\n[image cat.png cleared from the context to save space]"
    assert store.get_messages()[0].attachments == (photo,)


def test_the_cut_is_kept_under_a_key_of_its_own() -> None:
    store = InMemorySession("k")
    assert TokenBudgetSession(store, 4000, clear_tool_results=True).cut_key.endswith(
        ".EstimatingCounter.clear1.2.400"
    )
    assert WindowedSession(store, 40, clear_tool_results=False).cut_key == (
        "aniki.cut.messages.40.20"
    )


@pytest.mark.parametrize(
    ("made", "message"),
    [
        (lambda: ClearToolResults(keep_turns=0), "keep_turns must be a whole number of at least 1"),
        (lambda: ClearToolResults(every=True), "every must be"),
        (lambda: ClearToolResults(min_chars=-1), "min_chars must be"),
        (
            lambda: WindowedSession(InMemorySession("x"), 5, clear_tool_results="yes"),
            "clear_tool_results must be True, False, None or a ClearToolResults",
        ),
    ],
)
def test_bad_arguments_say_what_to_fix(made: Any, message: str) -> None:
    with pytest.raises(UserError, match=message):
        made()
