"""Property tests: every policy over random histories, read after every append (mid-run too)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from aniki import Message
from aniki.sessions import InMemorySession
from aniki.sessions.policies import SummarizingSession, TokenBudgetSession, WindowedSession
from aniki.sessions.policies._select import unit_cost
from aniki.sessions.policies._summary import summary_message

from .histories import (
    allowed,
    as_sent,
    assert_provider_valid,
    expected_start,
    histories,
    stepped_views,
    word_cost,
)
from .stores import AsyncMemorySession, PlainSession, resolve
from .summaries import Summarizer, tagged

STORES = {"memory": InMemorySession, "plain": PlainSession, "async": AsyncMemorySession}
store_kinds = st.sampled_from(sorted(STORES))


class WordCounter:
    def count_message(self, message: Message) -> int:
        return word_cost(message)


def sent_forms(messages: Sequence[Message], limit: int, cost: Any) -> tuple[Message, ...]:
    """``messages`` as a policy sends them: a token budget shortens each message that alone
    costs more than it; a window of messages sends them as they are."""
    return tuple(as_sent(messages, limit) if cost is word_cost else messages)


def check_suffix(
    view: tuple[Message, ...], stored: tuple[Message, ...], limit: int, cost: Any
) -> None:
    sent = sent_forms(stored, limit, cost)
    start = expected_start(sent, limit, cost)
    assert view == sent[start:]  # contiguous, most recent, maximal, valid
    assert allowed(stored, start)
    assert_provider_valid(view)
    if sum(cost(m) for m in view) > limit:  # over the limit only when nothing valid fits
        assert all(
            sum(cost(m) for m in sent[s:]) > limit for s in range(len(sent)) if allowed(sent, s)
        )


async def replay(policy: Any, inner: Any, history: list[Message], limit: int, cost: Any) -> None:
    """A one-step slide (``trim_to`` = the limit): every view is the longest valid suffix."""
    for count, message in enumerate(history, start=1):
        await resolve(policy.add_message(message))
        stored = tuple(await resolve(inner.get_messages()))
        assert stored == tuple(history[:count])
        check_suffix(tuple(await resolve(policy.get_messages())), stored, limit, cost)


@settings(max_examples=80, deadline=None)
@given(histories(), st.integers(min_value=1, max_value=15), store_kinds)
def test_windowed_session_sliding(history: list[Message], max_messages: int, kind: str) -> None:
    inner = STORES[kind]("w")
    policy = WindowedSession(inner, max_messages, trim_to=max_messages)
    asyncio.run(replay(policy, inner, history, max_messages, unit_cost))


@settings(max_examples=80, deadline=None)
@given(histories(), st.integers(min_value=1, max_value=250), store_kinds)
def test_token_budget_session_sliding(history: list[Message], max_tokens: int, kind: str) -> None:
    inner = STORES[kind]("b")
    policy = TokenBudgetSession(inner, max_tokens, trim_to=max_tokens, counter=WordCounter())
    asyncio.run(replay(policy, inner, history, max_tokens, word_cost))


def check_stepped(
    views: list[tuple[Message, ...]],
    history: list[Message],
    limit: int,
    trim_to: int,
    cost: Any,
) -> None:
    every = sent_forms(history, limit, cost)
    oracle = stepped_views(every, limit, trim_to, cost)
    previous: tuple[Message, ...] = ()
    regular, cuts, growth = True, 0, 0
    for count, (view, (start, moved)) in enumerate(zip(views, oracle, strict=True), start=1):
        stored, sent = tuple(history[:count]), every[:count]
        assert view == sent[start:]
        assert allowed(stored, start)
        assert_provider_valid(view)
        if sum(cost(m) for m in view) > limit:  # over the limit only when nothing valid fits
            assert all(
                sum(cost(m) for m in sent[s:]) > limit for s in range(len(sent)) if allowed(sent, s)
            )
        growth += cost(sent[-1])
        if moved:
            cuts += 1
            # A cut leaves at most trim_to, unless no valid suffix is that short.
            if sum(cost(m) for m in view) > trim_to:
                regular = False
        else:
            # Between cuts the view is the previous one plus what was appended.
            assert view == (*previous, sent[-1])
        previous = view
    if regular and limit > trim_to:
        assert cuts <= growth // (limit - trim_to + 1) + 1


async def replay_stepped(
    kind: str,
    history: list[Message],
    limit: int,
    trim_to: int,
    make: Any,
    cost: Any,
    fresh_objects: bool,
) -> None:
    inner = STORES[kind]("s")
    policy = make(inner, trim_to)
    views = []
    for message in history:
        await resolve(policy.add_message(message))
        if fresh_objects:  # a new policy object per read: the cut comes from the store's meta
            policy = make(inner, trim_to)
        views.append(tuple(await resolve(policy.get_messages())))
    check_stepped(views, history, limit, trim_to, cost)


@settings(max_examples=100, deadline=None)
@given(
    histories(max_turns=10),
    st.integers(min_value=1, max_value=15),
    st.data(),
    store_kinds,
    st.booleans(),
)
def test_windowed_session_steps(
    history: list[Message], limit: int, data: st.DataObject, kind: str, fresh: bool
) -> None:
    trim_to = data.draw(st.integers(min_value=1, max_value=limit), label="trim_to")
    if fresh and kind == "plain":  # a store without meta cannot hand the cut to a new object
        fresh = False

    def make(inner: Any, trim: int) -> Any:
        return WindowedSession(inner, limit, trim_to=trim)

    asyncio.run(replay_stepped(kind, tagged(history), limit, trim_to, make, unit_cost, fresh))


@settings(max_examples=100, deadline=None)
@given(
    histories(max_turns=10),
    st.integers(min_value=1, max_value=250),
    st.data(),
    store_kinds,
    st.booleans(),
)
def test_token_budget_session_steps(
    history: list[Message], limit: int, data: st.DataObject, kind: str, fresh: bool
) -> None:
    trim_to = data.draw(st.integers(min_value=1, max_value=limit), label="trim_to")
    if fresh and kind == "plain":
        fresh = False

    def make(inner: Any, trim: int) -> Any:
        return TokenBudgetSession(inner, limit, trim_to=trim, counter=WordCounter())

    asyncio.run(replay_stepped(kind, tagged(history), limit, trim_to, make, word_cost, fresh))


@settings(max_examples=60, deadline=None)
@given(histories(max_turns=10), st.integers(min_value=2, max_value=12), store_kinds)
def test_repeated_messages_keep_views_valid_and_prefixes_stable(
    history: list[Message], limit: int, kind: str
) -> None:
    """Untagged histories repeat messages, so a cut's run of messages may occur twice; the
    view may then start at another occurrence, but it stays valid, within the limit, and
    begins with the previous view whenever the cut did not move."""
    inner = STORES[kind]("d")
    policy = WindowedSession(inner, limit)

    async def go() -> None:
        previous: tuple[Message, ...] = ()
        for count, message in enumerate(history, start=1):
            await resolve(policy.add_message(message))
            view = tuple(await resolve(policy.get_messages()))
            stored = tuple(history[:count])
            start = len(stored) - len(view)
            assert view == stored[start:]
            assert allowed(stored, start)
            assert_provider_valid(view)
            if len(view) > limit:
                assert not any(allowed(stored, s) for s in range(len(stored) - limit, len(stored)))
            if view[: len(previous)] != previous:  # a cut: it leaves at most trim_to if it can
                shortest = range(max(len(stored) - policy.trim_to, 0), len(stored))
                assert len(view) <= policy.trim_to or not any(allowed(stored, s) for s in shortest)
            previous = view

    asyncio.run(go())


async def replay_summaries(kind: str, history: list[Message], max_tokens: int) -> None:
    inner = STORES[kind]("s")
    summarizer = Summarizer()
    policy = SummarizingSession(inner, summarizer.agent, max_tokens, counter=WordCounter())
    previous: tuple[bytes, ...] = ()
    previous_summary = None
    for count, message in enumerate(history, start=1):
        await policy.add_message(message)
        view = await policy.get_messages()
        # Until the next summary, the summary message and the kept messages stay
        # byte-identical: each request is the previous one plus what was appended.
        sent = tuple(json.dumps(m.to_dict(), sort_keys=True).encode() for m in view)
        if await policy.summary() == previous_summary:
            assert sent[: len(previous)] == previous
            assert len(sent) == len(previous) + 1
        previous, previous_summary = sent, await policy.summary()
        stored = tuple(await resolve(inner.get_messages()))
        assert stored == tuple(history[:count])  # never rewritten
        summary = await policy.summary()
        covered = summary.covered if summary else 0
        head: tuple[Message, ...] = (summary_message(summary.text),) if summary else ()
        assert view[: len(head)] == head
        # A message over what any summary leaves of the budget is sent shortened.
        sent = as_sent(stored, max_tokens - policy.summary_tokens)
        tail = sent[covered:]
        budget = max(max_tokens - sum(word_cost(m) for m in head), 0)
        assert view[len(head) :] == tuple(tail[expected_start(tail, budget, word_cost) :])
        assert allowed(stored, covered)  # a summary ends between exchanges
        assert_provider_valid(view[len(head) :])
        # Incremental: every covered message folded exactly once, in order (a message the
        # summarizer was sent shortened to its note alone shows no tag).
        shown = [i for i in range(covered) if sent[i].content.startswith(f"<m{i}>")]
        assert summarizer.all_folded() == shown


@settings(max_examples=60, deadline=None)
@given(histories(max_turns=8), st.integers(min_value=20, max_value=400), store_kinds)
def test_summarizing_session(history: list[Message], max_tokens: int, kind: str) -> None:
    asyncio.run(replay_summaries(kind, tagged(history), max_tokens))
