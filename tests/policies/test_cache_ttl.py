"""``cache_ttl``: a stepped window moves its cut when the provider's prompt cache has expired
(a message came longer than the cache's lifetime after the one before it), even though the
view still fits, and only then. Property-tested like the cuts, against a brute-force oracle,
over random histories with random pauses between messages."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aniki import Agent, Message, Runner, UserError
from aniki.sessions import InMemorySession
from aniki.sessions.policies import TokenBudgetSession, WindowedSession
from aniki.sessions.policies._select import unit_cost
from aniki.testing import MockProvider

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

TTL = 300.0
STORES = {"memory": InMemorySession, "plain": PlainSession, "async": AsyncMemorySession}
START = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)


class WordCounter:
    def count_message(self, message: Message) -> int:
        return word_cost(message)


class Clock:
    """The time stores stamp appends with, moved by the test."""

    def __init__(self) -> None:
        self.now = START

    @contextmanager
    def stamping(self) -> Iterator[None]:
        clock = self

        class Fixed(datetime):
            @classmethod
            def now(cls, tz: Any = None) -> Any:  # type: ignore[override]
                return clock.now

        with mock.patch("aniki._stamps.datetime", Fixed):
            yield


def timed(history: Sequence[Message], pauses: Sequence[float]) -> list[Message]:
    """``history`` with each message's time: the one before it plus its pause."""
    when, out = START, []
    for message, pause in zip(history, pauses, strict=True):
        when += timedelta(seconds=pause)
        out.append(dataclasses.replace(message, created_at=when))
    return out


def oracle(
    history: Sequence[Message], pauses: Sequence[float], limit: int, trim_to: int, cost: Any
) -> list[tuple[int, bool]]:
    """After each append: where the view starts and whether the cut moved. The cut stays
    while the view fits, and the cache is warm or the view holds at most ``trim_to``;
    otherwise it moves to the longest valid suffix within ``trim_to``. A token budget sends
    a message that alone costs more than it shortened."""
    cut, starts = 0, []
    every = as_sent(history, limit) if cost is word_cost else history
    for count in range(1, len(history) + 1):
        stored = every[:count]
        held = sum(cost(m) for m in stored[cut:])
        cold = count >= 2 and pauses[count - 1] > TTL
        moved = False
        if held > limit or (cold and held > trim_to):
            new = expected_start(stored, trim_to, cost)
            moved, cut = new != cut, new
        starts.append((cut, moved))
    return starts


async def replay(
    kind: str, history: list[Message], pauses: list[float], make: Any, clock: Clock
) -> list[tuple[Message, ...]]:
    inner = STORES[kind]("s")
    policy = make(inner)
    views = []
    for message, pause in zip(history, pauses, strict=True):
        clock.now += timedelta(seconds=pause)
        with clock.stamping():  # the store stamps the append with the clock's time
            await resolve(policy.add_message(message))
        views.append(tuple(await resolve(policy.get_messages())))
    return views


def check(
    views: list[tuple[Message, ...]],
    history: list[Message],
    pauses: list[float],
    limit: int,
    trim_to: int,
    cost: Any,
) -> None:
    previous: tuple[Message, ...] = ()
    every = as_sent(history, limit) if cost is word_cost else history
    for count, (view, (start, moved)) in enumerate(
        zip(views, oracle(history, pauses, limit, trim_to, cost), strict=True), start=1
    ):
        stored, sent = tuple(history[:count]), tuple(every[:count])
        assert view == sent[start:]
        assert allowed(stored, start)
        assert_provider_valid(view)
        if not moved:  # between cuts, the previous view plus what was appended
            assert view == (*previous, sent[-1])
        previous = view


pause_lists = st.lists(
    st.sampled_from([1.0, 30.0, 299.0, 301.0, 4000.0]), min_size=200, max_size=200
)


POLICIES: dict[str, tuple[int, int, Any, Any]] = {
    # the limits drawn, the policy (cache_ttl in seconds, or a timedelta), its cost
    "window": (
        2,
        15,
        lambda inner, limit, trim_to: WindowedSession(inner, limit, trim_to=trim_to, cache_ttl=TTL),
        unit_cost,
    ),
    "budget": (
        20,
        250,
        lambda inner, limit, trim_to: TokenBudgetSession(
            inner, limit, trim_to=trim_to, counter=WordCounter(), cache_ttl=timedelta(minutes=5)
        ),
        word_cost,
    ),
}


@pytest.mark.parametrize("policy", sorted(POLICIES))
@settings(max_examples=50, deadline=None)
@given(
    histories(max_turns=6),
    pause_lists,
    st.data(),
    st.sampled_from(sorted(STORES)),
)
def test_a_stepped_view_cuts_when_the_cache_is_cold(
    policy: str, history: list[Message], pauses: list[float], data: st.DataObject, kind: str
) -> None:
    least, most, made, cost = POLICIES[policy]
    limit = data.draw(st.integers(min_value=least, max_value=most), label="limit")
    trim_to = data.draw(st.integers(min_value=1, max_value=limit - 1), label="trim_to")
    history, pauses = tagged(history), pauses[: len(history)]
    history = timed(history, pauses)

    def make(inner: Any) -> Any:
        return made(inner, limit, trim_to)

    views = asyncio.run(replay(kind, history, pauses, make, Clock()))
    check(views, history, pauses, limit, trim_to, cost)


# --- in a run --------------------------------------------------------------------------------


async def test_a_user_back_after_the_cache_expired_gets_the_cut_then() -> None:
    clock = Clock()
    store = InMemorySession("chat")
    provider = MockProvider(handler=lambda request: "noted")
    reports = {}
    with clock.stamping():
        for ttl in (None, TTL):
            session = WindowedSession(store, 12, trim_to=4, cache_ttl=ttl)
            agent = Agent("A", model="m", provider=provider, session=session)
            for turn in range(4):  # 8 messages: within the limit, the cache warm
                clock.now += timedelta(seconds=20)
                await Runner().run(agent, message=f"question {turn}")
            clock.now += timedelta(minutes=10)  # the user comes back: the cache has expired
            result = await Runner().run(agent, message="back again")
            reports[ttl] = result.context_reports[-1]
            clock.now += timedelta(seconds=20)
            after = await Runner().run(agent, message="and then")
            assert after.context_reports[-1].prefix_kept  # the cut stays once moved
            store.clear()
    assert reports[None].prefix_kept and reports[None].sent_messages == 9
    assert not reports[TTL].prefix_kept and reports[TTL].sent_messages <= 4


def test_the_cut_is_kept_under_a_key_of_its_own() -> None:
    store = InMemorySession("k")
    assert WindowedSession(store, 40).cut_key == "aniki.cut.messages.40.20"
    assert WindowedSession(store, 40, cache_ttl=300).cut_key == "aniki.cut.messages.40.20.ttl300"
    budget = TokenBudgetSession(store, 4000, cache_ttl=timedelta(hours=1))
    assert budget.cut_key.endswith(".ttl3600") and budget.cache_ttl == 3600.0
    assert "cache_ttl=3600" in repr(budget)


@pytest.mark.parametrize("bad", [0, -5, math.nan, math.inf, "5m", True, timedelta(0)])
def test_a_cache_ttl_that_is_no_lifetime_is_refused(bad: Any) -> None:
    with pytest.raises(UserError, match="cache_ttl must be"):
        WindowedSession(InMemorySession("x"), 10, cache_ttl=bad)
