"""SummarizingSession: when summaries are made, what they fold, where they live, failures."""

from __future__ import annotations

import asyncio
import itertools
import logging
from pathlib import Path

import pytest

from aniki import Agent, Message, Runner, UserError
from aniki.sessions import InMemorySession
from aniki.sessions.policies import SummarizingSession
from aniki.sessions.policies._summary import SUMMARY_KEY, summary_message
from aniki.sessions.sqlite import SQLiteSession
from aniki.testing import MockProvider
from aniki.tokens import EstimatingCounter

from .histories import assert_provider_valid, assistant, expected_start, result, user
from .stores import PlainSession
from .summaries import Summarizer, tagged

COUNTER = EstimatingCounter()
BUDGET = 300


def turns(count: int, start: int = 0) -> list[Message]:
    messages = []
    for t in range(start, start + count):
        messages += [
            user(f"question {t} " + "word " * 20),
            assistant(f"answer {t} " + "word " * 20),
        ]
    return messages


def cost(messages: tuple[Message, ...] | list[Message]) -> int:
    return sum(COUNTER.count_message(m) for m in messages)


def policy(inner: object, summarizer: Summarizer, **options: object) -> SummarizingSession:
    return SummarizingSession(inner, summarizer.agent, BUDGET, counter=COUNTER, **options)  # type: ignore[arg-type]


async def test_no_summary_while_the_history_fits() -> None:
    summarizer = Summarizer()
    session = policy(InMemorySession(), summarizer)
    await session.add_messages(turns(2))
    assert await session.get_messages() == tuple(turns(2))
    assert summarizer.calls == 0
    assert await session.summary() is None


async def test_one_summary_per_budget_crossing_leaving_half_the_budget() -> None:
    summarizer = Summarizer()
    inner = InMemorySession()
    session = policy(inner, summarizer)
    history = tagged(turns(40))
    calls_at: list[int] = []
    for count, message in enumerate(history, start=1):
        await session.add_message(message)
        before = summarizer.calls
        view = await session.get_messages()
        assert await session.get_messages() == view  # reading twice never summarizes twice
        if summarizer.calls > before:
            assert summarizer.calls == before + 1
            calls_at.append(count)
            assert cost(view) <= BUDGET // 2
        assert cost(view) <= BUDGET
        assert view[1:] == tuple(history[count - len(view) + 1 : count])
    assert len(calls_at) >= 3
    # Between two summaries, at least half a budget of new conversation arrives.
    for earlier, later in itertools.pairwise(calls_at):
        assert cost(history[earlier:later]) >= BUDGET // 2 - cost(history[later - 1 : later])


async def test_each_summary_folds_the_previous_one_and_only_new_messages() -> None:
    summarizer = Summarizer()
    inner = InMemorySession()
    session = policy(inner, summarizer)
    history = tagged(turns(30))
    for message in history:
        await session.add_message(message)
        await session.get_messages()
    assert summarizer.calls >= 2
    folded = summarizer.all_folded()
    assert folded == list(range(len(folded)))  # every message once, in order, none again
    assert summarizer.previous[0] is None
    for n, previous in enumerate(summarizer.previous[1:], start=1):
        assert previous == f"summary number {n}"
    stored = await session.summary()
    assert stored is not None and stored.covered == len(folded)
    assert inner.get_meta(SUMMARY_KEY)["covered"] == len(folded)
    assert inner.get_messages() == tuple(history)  # the stored history is never rewritten


async def test_the_summarizer_runs_apart_from_the_conversation() -> None:
    summarizer = Summarizer()
    session = policy(InMemorySession(), summarizer)
    await session.add_messages(turns(5))
    await session.get_messages()
    assert summarizer.calls == 1
    assert summarizer.agent.session.get_messages() == ()  # its own session stays empty


async def test_summary_survives_a_restart_over_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    first = Summarizer()
    session = policy(SQLiteSession("chat", db), first)
    history = tagged(turns(5))
    await session.add_messages(history)
    view = await session.get_messages()
    assert first.calls == 1

    after_restart = Summarizer()
    reopened = policy(SQLiteSession("chat", db), after_restart)
    assert await reopened.get_messages() == view
    assert after_restart.calls == 0  # reused, never recomputed

    more = tagged(turns(30))[len(history) :]
    for message in more:
        await reopened.add_message(message)
        await reopened.get_messages()
    assert after_restart.calls >= 1
    assert after_restart.previous[0] == "summary number 1"  # folded on top of the stored one
    assert first.all_folded() + after_restart.all_folded() == list(
        range(len(first.all_folded() + after_restart.all_folded()))
    )


async def test_a_failing_summarizer_falls_back_to_the_token_window(
    caplog: pytest.LogCaptureFixture,
) -> None:
    summarizer = Summarizer()
    summarizer.fail_next = 1
    inner = InMemorySession()
    session = policy(inner, summarizer)
    history = turns(5)
    await session.add_messages(history)
    with caplog.at_level(logging.WARNING, logger="aniki"):
        view = await session.get_messages()
    assert "the summarizer is down" in caplog.text
    assert view == tuple(history[expected_start(history, BUDGET, COUNTER.count_message) :])
    assert await session.summary() is None
    assert inner.get_messages() == tuple(history)  # nothing lost

    await session.get_messages()
    assert summarizer.calls == 1  # not retried until the history grows
    await session.add_message(user("and now?"))
    view = await session.get_messages()
    assert summarizer.calls == 2
    assert view[0] == summary_message("summary number 1")


async def test_an_empty_summary_counts_as_a_failure(caplog: pytest.LogCaptureFixture) -> None:
    provider = MockProvider(handler=lambda request: "   ")
    session = SummarizingSession(
        InMemorySession(), Agent("S", model="m", provider=provider), BUDGET, counter=COUNTER
    )
    await session.add_messages(turns(5))
    with caplog.at_level(logging.WARNING, logger="aniki"):
        view = await session.get_messages()
    assert "empty summary" in caplog.text
    history = turns(5)
    assert view == tuple(history[expected_start(history, BUDGET, COUNTER.count_message) :])


async def test_a_long_summary_is_cut_to_its_share() -> None:
    summarizer = Summarizer(verbose=500)
    session = policy(InMemorySession(), summarizer)
    await session.add_messages(turns(5))
    view = await session.get_messages()
    assert view[0].content.endswith("[...]")
    assert COUNTER.count_message(view[0]) <= session.summary_tokens
    assert cost(view) <= BUDGET // 2


async def test_a_cleared_or_replaced_history_drops_the_summary() -> None:
    summarizer = Summarizer()
    inner = InMemorySession()
    session = policy(inner, summarizer)
    await session.add_messages(turns(5))
    await session.get_messages()
    await session.clear()
    assert inner.get_meta(SUMMARY_KEY) is None
    await session.add_message(user("hello again"))
    assert await session.get_messages() == (user("hello again"),)

    await session.add_messages(turns(5))
    await session.get_messages()
    record = inner.get_meta(SUMMARY_KEY)
    inner.clear()  # behind the policy's back, keeping the stale record
    inner.set_meta(SUMMARY_KEY, record)
    inner.add_messages(turns(3, start=100))
    assert await session.get_messages() == tuple(turns(3, start=100))


async def test_a_store_without_meta_keeps_the_summary_in_memory() -> None:
    summarizer = Summarizer()
    session = policy(PlainSession("p"), summarizer)
    await session.add_messages(turns(5))
    view = await session.get_messages()
    assert summarizer.calls == 1
    assert await session.get_messages() == view
    assert summarizer.calls == 1


async def test_mid_run_the_trailing_exchange_keeps_its_call() -> None:
    summarizer = Summarizer()
    session = policy(InMemorySession(), summarizer)
    history = [*turns(10), user("look it up"), assistant("", "a", "b"), result("a", "r " * 200)]
    await session.add_messages(history)
    view = await session.get_messages()
    assert view[0].role == "system"
    assert view[-2:] == tuple(history[-2:])
    assert_provider_valid(view[1:])


async def test_windowed_reads_find_the_summary_after_other_writers_and_repeats(
    tmp_path: Path,
) -> None:
    db = tmp_path / "chat.db"
    summarizer = Summarizer()
    session = policy(SQLiteSession("chat", db), summarizer)
    other_writer = SQLiteSession("chat", db)
    history = tagged(turns(5))
    await session.add_messages(history)
    await session.get_messages()
    # Many messages behind the policy's back, then identical ones: the recent window cannot
    # place the summary by itself, and the policy must read everything to be sure.
    other_writer.add_messages(tagged(turns(45))[len(history) :])
    for _ in range(3):
        other_writer.add_messages([user("same"), assistant("same")] * 12)
        view = await session.get_messages()
        stored = other_writer.get_messages()
        summary = await session.summary()
        assert summary is not None and summary.ends_with(stored[summary.covered - 1])
        assert summarizer.all_folded() == list(range(min(summary.covered, 90)))
        assert view[1:] == stored[len(stored) - len(view) + 1 :]
        assert cost(view) <= BUDGET


class LimitSpy(InMemorySession):
    """Records the ``limit`` of every read."""

    def __init__(self) -> None:
        super().__init__()
        self.limits: list[int | None] = []

    def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        self.limits.append(limit)
        return super().get_messages(limit)


async def test_once_a_summary_exists_reads_fetch_only_the_recent_window() -> None:
    summarizer = Summarizer()
    spy = LimitSpy()
    session = policy(spy, summarizer)
    history = tagged(turns(60))
    view: tuple[Message, ...] = ()
    for message in history:
        await session.add_message(message)
        summarized = await session.summary() is not None
        spy.limits.clear()
        shown_before = len(view)
        view = await session.get_messages()
        if summarized:  # one read: what was shown, the new message, a margin
            assert len(spy.limits) == 1
            assert spy.limits[0] is not None and spy.limits[0] <= shown_before + 18
    late_reads = []
    for message in tagged(turns(70))[len(history) :]:
        await session.add_message(message)
        spy.limits.clear()
        await session.get_messages()
        late_reads += spy.limits
    assert None not in late_reads  # never the whole history again
    assert summarizer.all_folded() == list(range(len(summarizer.all_folded())))


async def test_concurrent_reads_summarize_once() -> None:
    async def slow(request: object) -> str:
        await asyncio.sleep(0.01)
        return "one summary"

    provider = MockProvider(handler=slow)
    session = SummarizingSession(
        InMemorySession(), Agent("S", model="m", provider=provider), BUDGET, counter=COUNTER
    )
    await session.add_messages(turns(5))
    first, second = await asyncio.gather(session.get_messages(), session.get_messages())
    assert first == second
    assert len(provider.requests) == 1


async def test_inside_a_run_every_request_fits_the_budget() -> None:
    summarizer = Summarizer()
    model = MockProvider(handler=lambda request: "a reply of a few words " * 3)
    store = InMemorySession()
    session = policy(store, summarizer)
    agent = Agent("Assistant", "Be kind.", model="m", provider=model, session=session)
    runner = Runner()
    for t in range(40):
        await runner.run(agent, message=f"message {t} " + "word " * 15)
    assert summarizer.calls >= 3
    for request in model.requests:
        history = request.messages[1:]  # after the instructions
        assert cost(history) <= BUDGET
    assert model.requests[-1].messages[1].content.startswith("Summary of the earlier")
    assert len(store.get_messages()) == 80  # everything is still stored


@pytest.mark.parametrize("keep_recent", [0, 150, 200, -1])
def test_keep_recent_must_leave_room_for_the_summary(keep_recent: int) -> None:
    with pytest.raises(UserError, match="keep_recent"):
        policy(InMemorySession(), Summarizer(), keep_recent=keep_recent)


def test_sync_stores_must_be_sessions() -> None:
    with pytest.raises(UserError, match="wraps a Session"):
        SummarizingSession(object(), Summarizer().agent, BUDGET)  # type: ignore[arg-type]
