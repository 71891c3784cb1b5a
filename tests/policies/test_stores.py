"""The three policies over every store: sync and async, with and without limit or meta."""

from __future__ import annotations

from collections.abc import Sequence

from aniki import Agent, Message
from aniki.sessions.policies import SummarizingSession, TokenBudgetSession, WindowedSession
from aniki.testing import MockProvider
from aniki.tokens import EstimatingCounter

from .histories import assistant, expected_start, result, stepped_views, user
from .stores import Store, resolve

COUNTER = EstimatingCounter()


def ONE(message: Message) -> int:
    return 1


def script(turns: int) -> list[Message]:
    """A conversation with plain turns, parallel calls, and chained calls."""
    messages: list[Message] = []
    for t in range(turns):
        messages.append(user(f"question {t}: " + "please " * (t % 5)))
        if t % 3 == 1:
            messages += [
                assistant("", f"a{t}", f"b{t}"),
                result(f"b{t}"),
                result(f"a{t}", "x " * 9),
            ]
        if t % 3 == 2:
            messages += [assistant("step", f"c{t}"), result(f"c{t}"), assistant("", f"d{t}")]
            messages.append(result(f"d{t}", "long result " * 6))
        messages.append(assistant(f"answer {t} " + "words " * (t % 7)))
    return messages


async def test_windows_and_budgets_follow_the_rules_at_every_point(store: Store) -> None:
    inner = store.open("rules")
    windowed = WindowedSession(inner, 4)
    sliding = WindowedSession(inner, 4, trim_to=4)
    budget = TokenBudgetSession(inner, 60, counter=COUNTER)
    history = script(9)
    steps = stepped_views(history, 4, 2, lambda m: 1)
    budget_steps = stepped_views(history, 60, 30, COUNTER.count_message)
    for count, message in enumerate(history, start=1):
        await resolve(windowed.add_message(message))  # writes pass through to the store
        stored = tuple(await resolve(inner.get_messages()))
        assert stored == tuple(history[:count])
        window = await resolve(windowed.get_messages())
        assert window == stored[steps[count - 1][0] :]
        assert await resolve(sliding.get_messages()) == stored[expected_start(stored, 4, ONE) :]
        kept = await resolve(budget.get_messages())
        assert kept == stored[budget_steps[count - 1][0] :]


async def test_writes_clear_and_id_pass_through(store: Store) -> None:
    inner = store.open("passthrough")
    policy = WindowedSession(inner, 2)
    assert policy.id == inner.id
    assert policy.inner is inner
    await resolve(policy.add_messages([user("one"), user("two"), user("three")]))
    assert len(await resolve(inner.get_messages())) == 3
    assert [m.content for m in await resolve(policy.get_messages())] == ["three"]
    await resolve(policy.clear())
    assert tuple(await resolve(inner.get_messages())) == ()


def _summarizer() -> tuple[Agent, MockProvider]:
    count = 0

    def reply(request: object) -> str:
        nonlocal count
        count += 1
        return f"summary number {count}"

    provider = MockProvider(handler=reply)
    return Agent("Summarizer", model="mock", provider=provider), provider


async def _fill(session: SummarizingSession, messages: Sequence[Message]) -> None:
    for message in messages:
        await session.add_message(message)


async def test_summaries_are_stored_with_the_history_and_reused(store: Store) -> None:
    inner = store.open("summary")
    agent, provider = _summarizer()
    session = SummarizingSession(inner, agent, 200, counter=COUNTER)
    await _fill(session, script(12))
    view = await session.get_messages()
    calls = len(provider.requests)  # a long history is folded in several bounded calls
    assert calls >= 1
    assert view[0].role == "system" and view[0].content.endswith(f"summary number {calls}")
    assert await session.get_messages() == view  # the same history: no new summary
    assert len(provider.requests) == calls

    # A new policy, and for persistent stores a new store instance (a restart).
    reopened = store.open("summary") if store.persistent else inner
    fresh_agent, fresh_provider = _summarizer()
    again = SummarizingSession(reopened, fresh_agent, 200, counter=COUNTER)
    if store.has_meta:
        assert await again.get_messages() == view
        assert fresh_provider.requests == []
    else:  # kept in memory only: the new policy makes its own summary
        assert (await again.get_messages())[0].content.endswith(f"summary number {calls}")
        assert len(fresh_provider.requests) == calls
    assert tuple(await resolve(reopened.get_messages())) == tuple(script(12))
