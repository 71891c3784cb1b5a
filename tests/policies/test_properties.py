"""Property tests: every policy over random histories, read after every append (mid-run too)."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from aniki import Message
from aniki.sessions import InMemorySession
from aniki.sessions._select import unit_cost
from aniki.sessions._summary import summary_message
from aniki.sessions.budget import TokenBudgetSession
from aniki.sessions.summarizing import SummarizingSession
from aniki.sessions.windowed import WindowedSession

from .histories import allowed, assert_provider_valid, expected_start, histories, word_cost
from .stores import AsyncMemorySession, PlainSession, resolve
from .summaries import Summarizer, tagged

STORES = {"memory": InMemorySession, "plain": PlainSession, "async": AsyncMemorySession}
store_kinds = st.sampled_from(sorted(STORES))


class WordCounter:
    def count_message(self, message: Message) -> int:
        return word_cost(message)


def check_suffix(
    view: tuple[Message, ...], stored: tuple[Message, ...], limit: int, cost: Any
) -> None:
    start = expected_start(stored, limit, cost)
    assert view == stored[start:]  # contiguous, most recent, maximal, valid
    assert allowed(stored, start)
    assert_provider_valid(view)
    if sum(cost(m) for m in view) > limit:  # over the limit only when nothing valid fits
        assert all(
            sum(cost(m) for m in stored[s:]) > limit
            for s in range(len(stored))
            if allowed(stored, s)
        )


async def replay(policy: Any, inner: Any, history: list[Message], limit: int, cost: Any) -> None:
    for count, message in enumerate(history, start=1):
        await resolve(policy.add_message(message))
        stored = tuple(await resolve(inner.get_messages()))
        assert stored == tuple(history[:count])
        check_suffix(tuple(await resolve(policy.get_messages())), stored, limit, cost)


@settings(max_examples=80, deadline=None)
@given(histories(), st.integers(min_value=1, max_value=15), store_kinds)
def test_windowed_session(history: list[Message], max_messages: int, kind: str) -> None:
    inner = STORES[kind]("w")
    policy = WindowedSession(inner, max_messages)
    asyncio.run(replay(policy, inner, history, max_messages, unit_cost))


@settings(max_examples=80, deadline=None)
@given(histories(), st.integers(min_value=1, max_value=250), store_kinds)
def test_token_budget_session(history: list[Message], max_tokens: int, kind: str) -> None:
    inner = STORES[kind]("b")
    policy = TokenBudgetSession(inner, max_tokens, counter=WordCounter())
    asyncio.run(replay(policy, inner, history, max_tokens, word_cost))


async def replay_summaries(kind: str, history: list[Message], max_tokens: int) -> None:
    inner = STORES[kind]("s")
    summarizer = Summarizer()
    policy = SummarizingSession(inner, summarizer.agent, max_tokens, counter=WordCounter())
    for count, message in enumerate(history, start=1):
        await policy.add_message(message)
        view = await policy.get_messages()
        stored = tuple(await resolve(inner.get_messages()))
        assert stored == tuple(history[:count])  # never rewritten
        summary = await policy.summary()
        covered = summary.covered if summary else 0
        head: tuple[Message, ...] = (summary_message(summary.text),) if summary else ()
        assert view[: len(head)] == head
        tail = stored[covered:]
        budget = max(max_tokens - sum(word_cost(m) for m in head), 0)
        assert view[len(head) :] == tail[expected_start(tail, budget, word_cost) :]
        assert allowed(stored, covered)  # a summary ends between exchanges
        assert_provider_valid(view[len(head) :])
        # Incremental: every covered message folded exactly once, in order.
        assert summarizer.all_folded() == list(range(covered))


@settings(max_examples=60, deadline=None)
@given(histories(max_turns=8), st.integers(min_value=20, max_value=400), store_kinds)
def test_summarizing_session(history: list[Message], max_tokens: int, kind: str) -> None:
    asyncio.run(replay_summaries(kind, tagged(history), max_tokens))
