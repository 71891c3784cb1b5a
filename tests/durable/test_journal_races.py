"""The run journal under races and tampering, over every built-in store.

A held approval (``refund`` awaits a decision, ``lookup`` ran at once) is resumed twice at
once, undone, cleared, forked, edited by hand, or replayed from an old copy of the journal;
two runs with one ``run_id`` start at once. In every case the approved tool body runs at most
once, the losers are refused, and the stored history stays one a provider accepts.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from aniki import Agent, Message, RunInProgressError, Runner, ToolCall, UserError, tool
from aniki._run.journal import KEY
from aniki.providers.base import ModelRequest
from aniki.sessions import EncryptedSession
from aniki.testing import MockProvider, MockReply
from tests.core.test_undo_during_turn import KINDS, Store, make_store, resolve

REFUND = ToolCall("call_refund", "refund", '{"order_id": "42"}')
LOOKUP = ToolCall("call_lookup", "lookup", '{"order_id": "42"}')
SLOW = ToolCall("call_slow", "slow", "{}")


@pytest.fixture(params=KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    made = make_store(request.param, tmp_path)
    yield made
    await made.close()


def approval_agent(ran: list[str]) -> Agent:
    """Asks to refund (held for approval) and look up in one turn, then answers."""

    @tool(requires_approval=True)
    async def refund(order_id: str) -> str:
        """Refund an order."""
        await asyncio.sleep(0.05)  # long enough for a second resume to overlap
        ran.append("refund")
        return f"refunded {order_id}"

    @tool
    def lookup(order_id: str) -> str:
        """Look an order up."""
        ran.append("lookup")
        return f"order {order_id}: shipped"

    def model(request: ModelRequest) -> MockReply:
        if request.messages[-1].role == "user":
            return MockReply(tool_calls=(REFUND, LOOKUP))
        return MockReply(content="Done")

    provider = MockProvider(handler=model)
    return Agent("Support", model="m", provider=provider, tools=[refund, lookup])


def check_history(messages: tuple[Message, ...] | list[Message]) -> None:
    """Every assistant tool call is answered right after it, each call id appears once, and
    no tool message answers a call that was not made just before."""
    seen: set[str] = set()
    index = 0
    while index < len(messages):
        message = messages[index]
        assert message.role != "tool", f"tool message {index} answers no call: {messages}"
        index += 1
        if message.role != "assistant" or not message.tool_calls:
            continue
        asked = [call.id for call in message.tool_calls]
        assert not seen & set(asked), f"call ids {asked} appear twice: {messages}"
        seen |= set(asked)
        answers = messages[index : index + len(asked)]
        assert [m.role for m in answers] == ["tool"] * len(asked), messages
        assert sorted(str(m.tool_call_id) for m in answers) == sorted(asked), messages
        index += len(asked)


async def hold(store: Store, session: Any, ran: list[str]) -> Agent:
    agent = approval_agent(ran)
    result = await Runner().run(agent, message="Refund order 42", session=session)
    assert [call.id for call in result.pending_approvals] == [REFUND.id]
    assert ran == ["lookup"]
    return agent


async def history(session: Any) -> list[Message]:
    return list(await resolve(session.get_messages()))


@pytest.mark.parametrize("objects", ["two", "one"])
async def test_two_concurrent_resumes_run_the_approved_call_once(
    store: Store, objects: str
) -> None:
    if objects == "two" and not store.shared:
        pytest.skip("an in-memory history is reached only through its one object")
    ran: list[str] = []
    first = store.session("race")
    agent = await hold(store, first, ran)
    second = store.session("race") if objects == "two" else first
    outcomes = await asyncio.gather(
        Runner().resume(agent, approve=[REFUND.id], session=first),
        Runner().resume(agent, approve=[REFUND.id], session=second),
        return_exceptions=True,
    )
    won = [o for o in outcomes if not isinstance(o, BaseException)]
    lost = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(won) == 1 and len(lost) == 1, outcomes
    assert isinstance(lost[0], (RunInProgressError, UserError)), repr(lost[0])
    assert ran.count("refund") == 1, ran
    stored = await history(store.session("race") if store.shared else first)
    check_history(stored)
    assert [m.role for m in stored] == ["user", "assistant", "tool", "tool", "assistant"]


async def _undo(store: Store, session: Any) -> Any:
    return await resolve(session.undo())


async def _clear(store: Store, session: Any) -> Any:
    return await resolve(session.clear())


async def _fork(store: Store, session: Any) -> Any:
    if not hasattr(session, "fork"):
        pytest.skip(f"{type(session).__name__} has no fork()")
    forked = await resolve(session.fork("race-copy"))
    store.opened.append(forked)
    return forked


@pytest.mark.parametrize("change", [_undo, _clear, _fork], ids=["undo", "clear", "fork"])
async def test_a_changed_conversation_refuses_the_held_call(store: Store, change: Any) -> None:
    ran: list[str] = []
    session = store.session("changed")
    agent = await hold(store, session, ran)
    if change is _undo and not hasattr(session, "undo"):
        pytest.skip(f"{type(session).__name__} has no undo()")
    changed = await change(store, session)
    target = changed if change is _fork else session
    with pytest.raises(UserError):
        await Runner().resume(agent, approve=[REFUND.id], session=target)
    assert ran == ["lookup"], "the refund ran after the conversation changed"
    check_history(await history(target))


async def test_an_entry_awaiting_a_call_never_made_is_refused(store: Store) -> None:
    ran: list[str] = []
    session = store.session("edited")
    agent = await hold(store, session, ran)
    owner = meta_owner(session)
    journal = await resolve(owner.get_meta(KEY))
    (entry,) = [e for e in journal["runs"].values() if e.get("state") == "held"]
    entry["awaiting"] = ["call_forged"]
    await resolve(owner.set_meta(KEY, journal))
    for approve in (["call_forged"], [REFUND.id]):
        with pytest.raises(UserError):
            await Runner().resume(agent, approve=approve, session=session)
    assert ran == ["lookup"], "a forged entry made a tool run"
    check_history(await history(session))


def meta_owner(session: Any, *, raw: bool = False) -> Any:
    """The object whose meta holds the journal: the first in the chain of wrapped sessions
    with ``get_meta`` (with ``raw``, below any encryption: the value as stored, sealed)."""
    found = session
    while not hasattr(found, "get_meta") or (raw and isinstance(found, EncryptedSession)):
        found = found.inner
    return found


async def test_a_replayed_journal_does_not_run_the_call_again(store: Store) -> None:
    ran: list[str] = []
    session = store.session("replay")
    agent = await hold(store, session, ran)
    owner = meta_owner(session, raw=True)
    saved = await resolve(owner.get_meta(KEY))
    assert saved is not None
    done = await Runner().resume(agent, approve=[REFUND.id], session=session)
    assert done.content == "Done"
    await resolve(owner.set_meta(KEY, saved))
    with pytest.raises((UserError, RunInProgressError)):
        await Runner().resume(agent, approve=[REFUND.id], session=session)
    assert ran.count("refund") == 1, ran
    check_history(await history(session))


@pytest.mark.parametrize("objects", ["two", "one"])
async def test_two_runs_with_one_run_id_at_once(store: Store, objects: str) -> None:
    if objects == "two" and not store.shared:
        pytest.skip("an in-memory history is reached only through its one object")
    ran: list[str] = []

    @tool
    async def slow() -> str:
        """Take a while."""
        ran.append("slow")
        await asyncio.sleep(0.3)
        return "slow done"

    def model(request: ModelRequest) -> MockReply:
        if request.messages[-1].role == "user":
            return MockReply(tool_calls=(SLOW,))
        return MockReply(content="Done")

    agent = Agent("Worker", model="m", provider=MockProvider(handler=model), tools=[slow])
    first = store.session("same-run")
    second = store.session("same-run") if objects == "two" else first
    outcomes = await asyncio.gather(
        Runner().run(agent, message="go", session=first, run_id="run-1"),
        Runner().run(agent, message="go", session=second, run_id="run-1"),
        return_exceptions=True,
    )
    lost = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(lost) == 1 and isinstance(lost[0], RunInProgressError), outcomes
    assert ran == ["slow"], ran
    check_history(await history(store.session("same-run") if store.shared else first))


def once_agent(ran: list[str], during: Any = None) -> Agent:
    """Asks for the idempotent ``slow`` once, then answers; ``during()`` is awaited inside
    the tool's first call, after its side effect."""

    @tool(idempotent=True)
    async def slow() -> str:
        """Take a while."""
        ran.append("slow")
        if during is not None and len(ran) == 1:
            await during()
        return "slow done"

    def model(request: ModelRequest) -> MockReply:
        if request.messages[-1].role == "user":
            return MockReply(tool_calls=(SLOW,))
        return MockReply(content="Done")

    return Agent("Worker", model="m", provider=MockProvider(handler=model), tools=[slow])


async def test_a_replayed_running_entry_is_not_run_again(store: Store) -> None:
    """The journal as it stood while the call ran (claimed, no result), written back after
    the run ended: ``recover`` finds the turn stored and runs nothing."""
    ran: list[str] = []
    session = store.session("replay-running")
    owner = meta_owner(session, raw=True)
    saved: list[Any] = []

    async def save() -> None:
        saved.append(await resolve(owner.get_meta(KEY)))

    agent = once_agent(ran, save)
    assert (await Runner().run(agent, message="go", session=session)).content == "Done"
    await resolve(owner.set_meta(KEY, saved[0]))
    await Runner().recover(agent, session=session)
    assert ran == ["slow"], "a replayed claim made the tool run again"
    stored = await history(session)
    check_history(stored)
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]


async def test_a_fork_made_during_a_run_has_no_run_to_recover(store: Store) -> None:
    ran: list[str] = []
    session = store.session("fork-live")
    if not hasattr(session, "fork"):
        pytest.skip(f"{type(session).__name__} has no fork()")
    forks: list[Any] = []

    async def fork() -> None:
        forks.append(await resolve(session.fork("fork-live-copy")))
        store.opened.append(forks[-1])

    agent = once_agent(ran, fork)
    assert (await Runner().run(agent, message="go", session=session)).content == "Done"
    recovered = await Runner().recover(agent, session=forks[0])
    assert ran == ["slow"], f"recover on the fork ran the call again ({len(recovered)} runs)"
    assert recovered == []
