"""What a session can do, as ``capabilities_of`` finds it: every built-in store and its async
twin say whether their calls block, a wrapper is as blocking as what it wraps and can do what
its inner store can, and a run reports what every store holds."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from aniki import Agent, InMemorySession, Message, MessageLike, Runner
from aniki.messages import to_message
from aniki.sessions import EncryptedSession, SummarizingSession, WindowedSession
from aniki.sessions._capabilities import capabilities_of, reads_of
from aniki.sessions.memory_async import AsyncInMemorySession
from aniki.testing import MockProvider
from aniki.tokens import EstimatingCounter
from tests.policies.stores import Store, make_store

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
BLOCKING = {"sqlite", "file", "redis", "postgres"}
KEY = EncryptedSession.generate_key()


@pytest.fixture(params=KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Each built-in store in turn (servers skipped when absent, outside CI)."""
    if request.param == "async_memory":
        opened = Store("async_memory", AsyncInMemorySession, persistent=False, has_meta=True)
    else:
        opened = make_store(request.param, tmp_path)
    yield opened
    await opened.close()


def summarizing(inner: Any, max_tokens: int = 400) -> SummarizingSession:
    summarizer = Agent("Summarizer", model="mock", provider=MockProvider(handler=lambda r: "gist"))
    return SummarizingSession(inner, summarizer, max_tokens, counter=EstimatingCounter())


async def test_every_store_says_what_it_can_do(store: Store) -> None:
    session = store.open("capabilities")
    can = capabilities_of(session)
    assert can.blocking is (store.kind in BLOCKING)
    assert can.limited
    for method in (can.add_messages, can.get_meta, can.set_meta, can.swap_meta, can.undo):
        assert method is not None
    assert (can.page is not None) is not store.kind.startswith("async")
    if "memory" not in store.kind:
        assert can.add_after is not None and can.replace is not None and can.close is not None
    assert can.view_with is None and can.last_read is None and can.inner is None


async def test_a_wrapper_is_as_blocking_as_its_store(store: Store) -> None:
    session = store.open("wrapped")
    blocking = capabilities_of(session).blocking
    for wrapper in (WindowedSession(session, 4), EncryptedSession(session, KEY)):
        can = capabilities_of(wrapper)
        assert can.blocking is blocking
        assert can.inner is session
        assert capabilities_of(WindowedSession(wrapper, 4)).blocking is blocking
    assert capabilities_of(summarizing(session)).blocking is False  # awaited; it offloads


@pytest.mark.parametrize("wrap", ["bare", "encrypted"])
async def test_a_run_reports_what_every_store_holds(store: Store, wrap: str) -> None:
    inner = store.open(f"reports-{wrap}")
    session = inner if wrap == "bare" else EncryptedSession(inner, KEY)
    agent = Agent("A", model="mock", provider=MockProvider(handler=lambda request: "ok"))
    for turn in range(3):
        result = await Runner().run(agent, message=f"question {turn}", session=session)
        [report] = result.context_reports
        assert report.stored_messages == 2 * turn + 1
        assert report.prefix_kept is not None


class Plain:
    """Exactly the four members of ``Session``."""

    def __init__(self) -> None:
        self.id = "plain"
        self.messages: list[Message] = []

    def add_message(self, message: MessageLike) -> None:
        self.messages.append(to_message(message))

    def get_messages(self) -> Sequence[Message]:
        return tuple(self.messages)

    def clear(self) -> None:
        self.messages.clear()


class AsyncPlain:
    def __init__(self) -> None:
        self.id = "async-plain"

    async def add_message(self, message: MessageLike) -> None: ...

    async def get_messages(self) -> Sequence[Message]:
        return ()

    async def clear(self) -> None: ...


class Reading(InMemorySession):
    """Replaces ``get_messages``, so may do I/O: its base's ``blocking`` no longer says."""

    def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        return super().get_messages(limit)


class Keeping(InMemorySession):
    """Keeps its base's reads, and cannot undo."""

    undo = None  # type: ignore[assignment]


class Proxy:
    """Forwards every member to a store: asked per instance."""

    def __init__(self, inner: Any) -> None:
        self._wrapped = inner

    def __getattr__(self, name: str) -> Any:
        if name == "_page":
            raise AttributeError(name)
        return getattr(self._wrapped, name)


def test_a_custom_session_blocks_unless_its_reads_are_coroutines() -> None:
    plain = capabilities_of(Plain())
    assert plain.blocking and not plain.limited
    assert plain.add_messages is None and plain.get_meta is None and plain.undo is None
    assert reads_of(Plain())(3) is None  # it may be a view: it cannot say what it holds
    assert capabilities_of(AsyncPlain()).blocking is False
    assert capabilities_of(InMemorySession()).blocking is False
    assert capabilities_of(Reading()).blocking is True
    keeping = capabilities_of(Keeping())
    assert keeping.blocking is False and keeping.undo is None and keeping.get_meta is not None


def test_a_proxy_is_asked_per_instance() -> None:
    store = InMemorySession()
    can = capabilities_of(Proxy(store))
    assert can.get_meta is not None and can.undo is not None and can.limited
    assert can.page is None  # hidden by this proxy
    assert can.blocking is True  # its class does not say; its reads are not coroutines
    assert capabilities_of(Proxy(AsyncInMemorySession())).blocking is False


def test_an_encrypted_session_can_do_what_its_store_can() -> None:
    over_plain = capabilities_of(EncryptedSession(Plain(), KEY))
    assert over_plain.limited and over_plain.get_meta is not None  # kept in this process
    assert over_plain.swap_meta is None and over_plain.undo is None
    assert over_plain.add_then_get is None
    over_memory = capabilities_of(EncryptedSession(InMemorySession(), KEY))
    assert over_memory.swap_meta is not None and over_memory.undo is not None
    assert over_memory.add_then_get is None  # InMemorySession has no fused append-and-read


async def test_a_policy_says_whether_its_view_starts_with_a_summary() -> None:
    store = InMemorySession()
    for index in range(30):
        store.add_message(Message("user", f"question {index} " + "words " * 10))
        store.add_message(Message("assistant", f"answer {index} " + "words " * 10))
    policy = summarizing(store)
    view = await policy.get_messages()
    info = reads_of(policy)(len(view) - 1)
    assert info is not None and info.summary and info.summarized > 0
    assert view[0].role == "system"
    windowed = WindowedSession(store, 6)
    windowed.get_messages()
    info = reads_of(windowed)(6)
    assert info is not None and not info.summary and info.stored == 60
