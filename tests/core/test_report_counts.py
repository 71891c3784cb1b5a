"""Every store and every policy says how many messages it holds, and whether a call's prefix
was kept: sync stores and their async twins alike, windowed reads included."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from aniki import (
    Agent,
    Runner,
    SummarizingSession,
    TokenBudgetSession,
    WindowedSession,
    tool,
)
from aniki.sessions.memory_async import AsyncInMemorySession
from aniki.testing import MockProvider
from aniki.tokens import EstimatingCounter
from tests.policies.stores import Store, make_store, resolve

from .helpers import drive

KINDS = [
    "memory",
    "async_memory",
    "sqlite",
    "async_sqlite",
    "file",
    "async_file",
    "redis",
    "async_redis",
    "postgres",
    "async_postgres",
]
POLICIES = ["none", "windowed", "sliding", "budget", "summarizing"]
TURNS = 16
"""Enough for the history to outgrow every policy's first fetch, so reads are windowed."""


@tool
def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: What to look up.
    """
    return f"{topic}: found " + "detail " * 6


@pytest.fixture(params=KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "async_memory":
        opened = Store("async_memory", AsyncInMemorySession, persistent=False, has_meta=True)
    else:
        opened = make_store(request.param, tmp_path)
    yield opened
    await opened.close()


def wrap(policy: str, inner: Any) -> Any:
    counter = EstimatingCounter()
    if policy == "none":
        return inner
    if policy == "windowed":
        return WindowedSession(inner, 6)
    if policy == "sliding":  # keeps no cut in meta: the window's place is tracked in memory
        return WindowedSession(inner, 6, trim_to=6)
    if policy == "budget":
        return TokenBudgetSession(inner, 200, counter=counter)
    summarizer = Agent("Summarizer", model="mock", provider=MockProvider(handler=lambda r: "gist"))
    return SummarizingSession(inner, summarizer, 400, counter=counter)


def script(provider: MockProvider, turn: int) -> None:
    if turn % 2:
        call = {"id": f"c{turn}", "name": "lookup", "arguments": {"topic": f"t{turn}"}}
        provider.enqueue_response(tool_calls=[call])
    provider.enqueue_response(f"answer {turn} " + "because " * 8)


def expected_counts(result: Any, stored: int, mode: str) -> list[int]:
    """What each call of ``result`` saw stored, given the store's count after the run: a run
    stores each turn as it ends, a stream only its user message until it completes."""
    before = stored - len(result.new_messages)
    replies = [i for i, m in enumerate(result.new_messages) if m.role == "assistant"]
    return [before + (i if mode == "run" else 1) for i in replies]


async def run_turns(
    agent: Agent, provider: MockProvider, session: Any, inner: Any, turns: range, mode: str = "run"
) -> bool:
    """Run ``turns``, checking every report against the store; whether any call was sent
    less than the whole history."""
    windowed = False
    for turn in turns:
        script(provider, turn)
        result = await drive(mode, Runner(), agent, message=f"question {turn}", session=session)
        expected = expected_counts(result, len(await resolve(inner.get_messages())), mode)
        reports = result.context_reports
        assert [r.stored_messages for r in reports] == expected, f"turn {turn}"
        assert all(type(r.prefix_kept) is bool for r in reports), f"turn {turn}: {reports}"
        windowed |= reports[0].sent_messages < expected[0]
    return windowed


@pytest.mark.parametrize("mode", ["run", "stream"])
@pytest.mark.parametrize("policy", POLICIES)
async def test_each_report_counts_the_stored_messages(store: Store, policy: str, mode: str) -> None:
    inner = store.open(f"counts-{policy}-{mode}")
    provider = MockProvider()
    agent = Agent("Helper", "Be brief.", model="mock", provider=provider, tools=[lookup])
    windowed = await run_turns(agent, provider, wrap(policy, inner), inner, range(TURNS), mode)
    assert windowed == (policy != "none")  # each policy sent less than the history at times


@pytest.mark.parametrize("policy", ["windowed", "sliding", "budget"])
async def test_a_policy_counts_a_history_it_did_not_write(store: Store, policy: str) -> None:
    # A long history stored bare: the policy's first read finds no cut to place its window.
    inner = store.open(f"counts-later-{policy}")
    provider = MockProvider()
    agent = Agent("Helper", model="mock", provider=provider, tools=[lookup])
    await run_turns(agent, provider, inner, inner, range(TURNS))
    await run_turns(agent, provider, wrap(policy, inner), inner, range(TURNS, TURNS + 4))
    if not store.has_meta or policy == "sliding":
        return
    # A cut stored before cuts kept their position: still found, and given one.
    key = wrap(policy, inner).cut_key
    record = await resolve(inner.get_meta(key))
    assert type(record["position"]) is int
    del record["position"]
    await resolve(inner.set_meta(key, record))
    await run_turns(agent, provider, wrap(policy, inner), inner, range(TURNS + 4, TURNS + 6))
    assert type((await resolve(inner.get_meta(key)))["position"]) is int
