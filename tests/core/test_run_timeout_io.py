"""A run's ``timeout=`` covers its session I/O too, and a sync store never blocks the loop."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from aniki import Agent, InMemorySession, Message, Runner, RunTimeoutError
from aniki.messages import MessageLike, to_message
from aniki.sessions import SummarizingSession, TokenBudgetSession, WindowedSession
from aniki.testing import MockProvider

from .helpers import MODES, drive

TIMEOUT = 0.5
SLACK = 0.5


class SlowStore:
    """A synchronous store whose calls, from the ``block_from``-th on, wait for :attr:`release`.

    Calls are counted in order (the first is 0), each append as one call.
    """

    def __init__(self, block_from: int | None = None) -> None:
        self.id = "slow"
        self.messages: list[Message] = []
        self.block_from = block_from
        self.calls = 0
        self.release = threading.Event()
        self.blocked = threading.Event()
        self.threads: set[int] = set()

    def _enter(self) -> None:
        self.threads.add(threading.get_ident())
        index, self.calls = self.calls, self.calls + 1
        if self.block_from is not None and index >= self.block_from:
            self.blocked.set()
            self.release.wait(timeout=20)

    def add_message(self, message: MessageLike) -> None:
        self._enter()
        self.messages.append(to_message(message))

    def get_messages(self) -> Sequence[Message]:
        self._enter()
        return tuple(self.messages)

    def clear(self) -> None:
        self._enter()
        self.messages.clear()


@pytest.fixture
def stores() -> Iterator[list[SlowStore]]:
    made: list[SlowStore] = []
    yield made
    for store in made:  # never leave a worker thread waiting
        store.release.set()


def agent_on(session: Any, *, tools: Sequence[Any] = ()) -> Agent:
    provider = MockProvider(handler=lambda request: "the reply")
    return Agent("A", model="m", provider=provider, session=session, tools=tools)


async def timed_out(mode: str, agent: Agent, timeout: float = TIMEOUT) -> float:
    """Seconds until the run raised ``RunTimeoutError`` (it must)."""
    started = time.monotonic()
    with pytest.raises(RunTimeoutError) as info:
        await drive(mode, Runner(), agent, message="go", timeout=timeout)
    assert info.value.timeout == timeout
    return time.monotonic() - started


# For a store with the four seed methods only, a run makes these calls in order: append the
# user message (0), read (1), append the reply (2), read (3). A stream makes the same calls,
# the reply's append being its commit.
@pytest.mark.parametrize("block_from", [0, 1, 2, 3], ids=["user", "read", "reply", "snapshot"])
@pytest.mark.parametrize("mode", MODES)
async def test_a_sync_store_that_hangs_cannot_outlast_the_timeout(
    mode: str, block_from: int, stores: list[SlowStore]
) -> None:
    store = SlowStore(block_from)
    stores.append(store)
    elapsed = await timed_out(mode, agent_on(store))
    assert elapsed < TIMEOUT + SLACK
    assert store.blocked.is_set()
    assert threading.get_ident() not in store.threads  # the loop's thread never did the I/O
    store.release.set()
    await asyncio.sleep(0.2)  # a write under way completes in the background, whole
    assert [m.content for m in store.messages] in (["go"], ["go", "the reply"])


@pytest.mark.parametrize(
    "wrap",
    [
        lambda s: WindowedSession(s, 10),
        lambda s: TokenBudgetSession(s, 1000),
        lambda s: SummarizingSession(s, agent_on(InMemorySession()), 1000),
    ],
    ids=["windowed", "token_budget", "summarizing"],
)
@pytest.mark.parametrize("mode", MODES)
async def test_a_policy_over_a_hanging_sync_store_cannot_outlast_the_timeout(
    mode: str, wrap: Any, stores: list[SlowStore]
) -> None:
    store = SlowStore(2)
    stores.append(store)
    elapsed = await timed_out(mode, agent_on(wrap(store)))
    assert elapsed < TIMEOUT + SLACK
    assert store.blocked.is_set()


async def test_a_turn_stored_while_the_deadline_passes_is_stored_whole(
    stores: list[SlowStore],
) -> None:
    # The tool turn's batch (assistant call + tool result) is one write: it may finish after
    # RunTimeoutError was raised, but never half of it.
    def noop() -> str:
        return "done"

    store = SlowStore(2)
    stores.append(store)
    provider = MockProvider()
    provider.enqueue_response(tool_calls=[{"id": "c", "name": "noop"}])
    provider.enqueue_response(content="never asked")
    agent = Agent("A", model="m", provider=provider, session=store, tools=[noop])
    with pytest.raises(RunTimeoutError):
        await Runner().run(agent, message="go", timeout=TIMEOUT)
    store.release.set()
    await asyncio.sleep(0.2)
    assert [m.role for m in store.messages] == ["user", "assistant", "tool"]


async def test_the_event_loop_keeps_running_during_a_sync_store_call(
    stores: list[SlowStore],
) -> None:
    store = SlowStore(0)
    stores.append(store)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    run = asyncio.create_task(Runner().run(agent_on(store), message="go"))
    await asyncio.sleep(0.3)
    assert store.blocked.is_set() and not run.done()
    assert ticks >= 10  # the loop went on while the store call was blocked
    store.release.set()
    result = await asyncio.wait_for(run, 5)
    ticker.cancel()
    assert result.content == "the reply"
    assert [m.content for m in store.messages] == ["go", "the reply"]


class SlowAsyncStore:
    """An async store whose calls wait (on the loop) for :attr:`release`."""

    def __init__(self) -> None:
        self.id = "slow-async"
        self.release = asyncio.Event()

    async def add_message(self, message: MessageLike) -> None:
        await self.release.wait()

    async def get_messages(self) -> Sequence[Message]:
        await self.release.wait()
        return ()

    async def clear(self) -> None:
        await self.release.wait()


@pytest.mark.parametrize("mode", ["run", "stream"])
async def test_an_async_store_that_hangs_cannot_outlast_the_timeout(mode: str) -> None:
    store = SlowAsyncStore()
    elapsed = await timed_out(mode, agent_on(store))
    assert elapsed < TIMEOUT + SLACK
    elapsed = await timed_out(mode, agent_on(WindowedSession(store, 10)))
    assert elapsed < TIMEOUT + SLACK


@pytest.mark.parametrize("mode", MODES)
async def test_an_in_memory_session_is_served_on_the_loop(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No I/O, so no thread hop: every call runs in the thread that runs the event loop.
    threads: set[int] = set()
    original = InMemorySession.add_messages

    def add_messages(self: InMemorySession, messages: Any) -> None:
        threads.add(threading.get_ident())
        original(self, messages)

    monkeypatch.setattr(InMemorySession, "add_messages", add_messages)
    loop_threads: set[int] = set()

    def reply(request: Any) -> str:
        loop_threads.add(threading.get_ident())
        return "ok"

    for session in (InMemorySession(), WindowedSession(InMemorySession(), 10)):
        agent = Agent("A", model="m", provider=MockProvider(handler=reply), session=session)
        await drive(mode, Runner(), agent, message="go")
    assert threads and threads == loop_threads
