"""A run's writes and reads over every store, bare and behind a policy.

A run appends and then reads twice per turn; Redis and PostgreSQL sessions do each pair in one
round trip (``_add_then_get``), and a SQLite session in one statement when no other writer
came between. These checks hold the fused path to the plain one: the same
history stored, the same messages returned, other writers' messages seen.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from aniki import Agent, EncryptedSession, Message, Runner, WindowedSession, tool
from aniki.sessions.policies import SummarizingSession, TokenBudgetSession
from aniki.sessions.postgres import _core as _postgres_core
from aniki.sessions.redis import _core as _redis_core
from aniki.sessions.redis import _scripts as _redis_scripts
from aniki.testing import MockProvider
from aniki.tokens import EstimatingCounter

from .histories import user
from .stores import Store, make_store, resolve

SERVERS = ("redis", "async_redis", "postgres", "async_postgres")
# SQLite in one statement when nobody wrote between; the local twins in one trip to their thread
FUSED = (*SERVERS, "sqlite", "async_sqlite", "async_file")

KEY = EncryptedSession.generate_key()

Wrap = Callable[[Any], Any]
POLICIES: dict[str, Wrap] = {
    "bare": lambda inner: inner,
    "windowed": lambda inner: WindowedSession(inner, 3),
    "budget": lambda inner: TokenBudgetSession(inner, 40, counter=EstimatingCounter()),
    "encrypted": lambda inner: EncryptedSession(inner, KEY),
    "windowed-encrypted": lambda inner: WindowedSession(EncryptedSession(inner, KEY), 3),
    "summarizing": lambda inner: SummarizingSession(
        inner,
        Agent("Summarizer", model="mock", provider=MockProvider(handler=lambda r: "gist")),
        2000,
        counter=EstimatingCounter(),
    ),
}
ROUND_TRIPS_PER_TURN = {"summarizing": 4}  # and 2 for the others; the summary's read adds 2


def whole(policy: str, store: Any) -> Any:
    """What reads the whole history in plain text under ``policy``."""
    return EncryptedSession(store, KEY) if "encrypted" in policy else store


@pytest.fixture(params=SERVERS)
async def server_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """The stores that fuse an append with the read after it."""
    opened = make_store(request.param, tmp_path)
    yield opened
    await opened.close()


def count_steps(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every round trip a Redis or PostgreSQL session makes from now on (one per step)."""
    steps: list[object] = []
    for module, name in ((_redis_core, "Eval"), (_postgres_core, "Query")):
        original = getattr(module, name)

        def counted(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            step = _original(*args, **kwargs)
            steps.append(step)
            return step

        monkeypatch.setattr(module, name, counted)
    return steps


async def fused(session: Any, messages: list[Message], *limit: int) -> tuple[Message, ...]:
    result: tuple[Message, ...] = await resolve(session._add_then_get(messages, *limit))
    return result


def contents(messages: Any) -> list[str]:
    return [m.content for m in messages]


async def test_the_server_stores_fuse_an_append_with_the_read_after_it(store: Store) -> None:
    session = store.open(f"fused-{uuid.uuid4().hex}")
    if store.kind not in FUSED:
        assert getattr(session, "_add_then_get", None) is None
        return
    assert contents(await fused(session, [user("a")])) == ["a"]
    other = store.open(session.id)
    await resolve(other.add_messages([user("b"), user("c")]))  # between two of ours
    assert contents(await fused(session, [user("d"), user("e")])) == ["a", "b", "c", "d", "e"]
    assert contents(await fused(session, [user("f")], 2)) == ["e", "f"]
    assert await fused(session, [user("g")], 0) == ()
    stored = tuple(await resolve(store.open(session.id).get_messages()))
    assert contents(stored) == ["a", "b", "c", "d", "e", "f", "g"]
    assert await resolve(session.get_messages()) == stored

    fresh = store.open(session.id)  # nothing cached: a limited read takes the tail only
    assert contents(await fused(fresh, [user("h")], 3)) == ["f", "g", "h"]
    await resolve(other.clear())
    assert contents(await fused(session, [user("new")])) == ["new"]  # the clear is seen


async def test_a_cleared_and_refilled_session_is_read_whole_again(server_store: Store) -> None:
    store = server_store
    session, other = store.open("refill"), store.open("refill")
    await fused(session, [user("old 1"), user("old 2")])
    await resolve(other.clear())
    await resolve(other.add_messages([user("x"), user("y"), user("z")]))
    assert contents(await fused(session, [user("mine")])) == ["x", "y", "z", "mine"]


@pytest.mark.parametrize("policy", POLICIES)
async def test_a_run_returns_the_history_it_stored(store: Store, policy: str) -> None:
    inner = store.open(f"run-{policy}")
    session = POLICIES[policy](inner)
    provider = MockProvider()
    agent = Agent("Helper", "Be brief.", model="mock", provider=provider)
    runner = Runner()
    for turn in range(4):
        provider.enqueue_response(f"answer {turn}")
        result = await runner.run(agent, message=f"question {turn}", session=session)
        assert result.messages == tuple(await resolve(session.get_messages()))
        sent = provider.requests[-1].messages[1:]  # after the system prompt
        assert sent[-1] == user(f"question {turn}")
        if policy in ("bare", "encrypted", "summarizing"):  # (under its budget here)
            assert sent == result.messages[:-1]  # the model saw the history up to its reply
        else:
            assert len(sent) <= 3 or policy == "budget"
    reopened = store.open(inner.id) if store.persistent else inner
    stored = contents(await resolve(whole(policy, reopened).get_messages()))
    if "encrypted" in policy:  # the store itself holds no plain text
        assert "question 0" not in contents(await resolve(reopened.get_messages()))
    assert stored == [text for t in range(4) for text in (f"question {t}", f"answer {t}")]


@pytest.mark.parametrize("policy", POLICIES)
async def test_a_turn_costs_two_round_trips_on_the_server_stores(
    server_store: Store, policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = server_store
    session = POLICIES[policy](store.open(f"trips-{policy}"))
    provider = MockProvider()
    agent = Agent("Helper", model="mock", provider=provider)
    provider.enqueue_response("warm")
    await Runner().run(agent, message="warm up", session=session)  # tables, scripts, caches
    steps = count_steps(monkeypatch)
    for turn in range(3):
        provider.enqueue_response(f"answer {turn}")
        await Runner().run(agent, message=f"question {turn}", session=session)
    meta = [step for step in steps if is_cut_step(step)]
    assert len(steps) - len(meta) == ROUND_TRIPS_PER_TURN.get(policy, 2) * 3
    # A window's cut that moves costs two more: a look at the stored cut (another process
    # may have moved it already), then the new one written.
    assert len(meta) % 2 == 0
    assert all(is_cut_step(step, write=i % 2 == 1) for i, step in enumerate(meta))
    if policy in ("windowed", "windowed-encrypted"):
        assert meta  # WindowedSession(3) over three turns of two messages moves its cut


def is_cut_step(step: Any, *, write: bool | None = None) -> bool:
    """Whether ``step`` reads (``write=False``) or writes (``True``) a window's cut."""
    if hasattr(step, "script"):  # a Redis step
        kinds = {_redis_scripts.GET_META: False, _redis_scripts.SET_META: True}
        kind = kinds.get(step.script)
        is_cut = any(isinstance(a, str) and a.startswith("aniki.cut.") for a in step.args)
    else:
        sql = step.statement
        kind = True if b"INSERT INTO" in sql and b"_meta" in sql else None
        if kind is None and b"SELECT value FROM" in sql:
            kind = False
        is_cut = str((step.params or {}).get("key", "")).startswith("aniki.cut.")
    return is_cut and kind is not None and (write is None or kind == write)


@pytest.mark.parametrize("kind", ["redis", "async_redis"])
async def test_a_resent_redis_batch_is_stored_once_and_the_read_still_answers(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(kind, tmp_path)
    try:
        session = store.open("resent")
        await fused(session, [user("first")])
        token = uuid.uuid4().hex
        monkeypatch.setattr(_redis_core, "new_token", lambda: token)  # the same batch, twice
        await fused(session, [user("once")])
        assert contents(await fused(session, [user("once")])) == ["first", "once"]
        assert contents(await resolve(store.open("resent").get_messages())) == ["first", "once"]
    finally:
        await store.close()


@pytest.mark.parametrize("policy", POLICIES)
async def test_a_streamed_run_sends_what_a_plain_run_sends(store: Store, policy: str) -> None:
    # A stream keeps its tool turns out of the store until it completes; a policy must still
    # count them against its bound, so both ways of running send the model the same requests.
    @tool
    def lookup(topic: str) -> str:
        return f"{topic}: " + "fact " * 30

    def script(provider: MockProvider) -> None:
        for step in range(3):
            provider.enqueue_response(
                tool_calls=[{"id": f"call-{step}", "name": "lookup", "arguments": {"topic": "x"}}]
            )
        provider.enqueue_response("done")

    sent: dict[str, list[tuple[Message, ...]]] = {}
    for mode in ("run", "stream"):
        inner = store.open(f"streamed-{policy}-{mode}")
        earlier = whole(policy, inner)
        for i in range(12):
            await resolve(earlier.add_message(user(f"earlier {i} " + "words " * 8)))
        provider = MockProvider()
        script(provider)
        agent = Agent("Helper", "Be brief.", model="mock", provider=provider, tools=[lookup])
        session = POLICIES[policy](inner)
        if mode == "run":
            result = await Runner().run(agent, message="now", session=session)
        else:
            async with Runner().stream(agent, message="now", session=session) as stream:
                async for _ in stream:
                    pass
            result = stream.result
        assert result is not None and result.content == "done"
        sent[mode] = [request.messages for request in provider.requests]
    assert sent["stream"] == sent["run"]


class Unfused:
    """A store as it is, less its fused append-and-read: the plain path to compare with."""

    def __init__(self, inner: Any) -> None:
        self._wrapped = inner

    def __getattr__(self, name: str) -> Any:
        if name == "_add_then_get":
            raise AttributeError(name)
        return getattr(self._wrapped, name)


async def test_a_summarizing_session_fused_or_not_sends_and_summarizes_the_same(
    server_store: Store,
) -> None:
    sent: dict[str, list[tuple[Message, ...]]] = {}
    summaries: dict[str, list[str]] = {}
    for mode in ("fused", "plain"):
        inner = server_store.open(f"summaries-{mode}")
        store = inner if mode == "fused" else Unfused(inner)
        summarizer_provider = MockProvider(
            handler=lambda request: f"gist of {len(request.messages)} messages"
        )
        summarizer = Agent("Summarizer", model="mock", provider=summarizer_provider)
        session = SummarizingSession(store, summarizer, 160, counter=EstimatingCounter())
        provider = MockProvider(handler=lambda request: "answer " + "words " * 6)
        agent = Agent("Helper", model="mock", provider=provider)
        for turn in range(14):
            await Runner().run(agent, message=f"question {turn} " + "more " * 5, session=session)
        sent[mode] = [request.messages for request in provider.requests]
        summaries[mode] = [r.messages[-1].content for r in summarizer_provider.requests]
    assert summaries["fused"], "the budget was meant to be small enough to summarize"
    assert sent["fused"] == sent["plain"]
    assert summaries["fused"] == summaries["plain"]
