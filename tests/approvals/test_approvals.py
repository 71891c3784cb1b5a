"""Tool calls that need approval: the run stops before them, the held turn lives in the
store (never in the history), and resume approves or denies each call."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from aniki import Agent, InMemorySession, Message, RunCompleted, Runner, UserError, tool
from aniki.sessions import SQLiteSession
from aniki.testing import MockProvider

from .scripted import LOOKUP, REFUND, calls, make_agent, roles

JOURNAL = "aniki.runs"


def _dead_pid() -> int:
    """The id of a process that has ended."""
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(child.stdout)


def held(session: object) -> bool:
    """Whether the session's run journal holds a turn waiting for approval."""
    journal = session.get_meta(JOURNAL)  # type: ignore[attr-defined]
    return journal is not None and any(
        entry.get("state") == "held" for entry in journal["runs"].values()
    )


async def test_a_run_stops_before_the_call_and_resume_approves_it(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    agent = make_agent(log)
    session = SQLiteSession("chat", tmp_path / "chat.db")
    result = await Runner().run(agent, message="Refund order 42", session=session)

    assert result.pending_approvals == (REFUND,)
    assert result.content == "" and result.output is None
    assert calls(log) == [["lookup", "42"]]  # the call needing no approval ran at once
    assert roles(session.get_messages()) == ["user"]  # the history stays valid for a provider
    assert held(session)

    done = await Runner().resume(agent, approve=[REFUND.id], session=session)
    assert done.pending_approvals == ()
    assert done.content == "Done: refunded 42 | order 42: shipped"
    assert calls(log) == [["lookup", "42"], ["refund", "42"]]
    stored = session.get_messages()
    assert roles(stored) == ["user", "assistant", "tool", "tool", "assistant"]
    assert [m.tool_call_id for m in stored[2:4]] == [REFUND.id, LOOKUP.id]  # the model's order
    assert not held(session)
    with pytest.raises(UserError, match="no tool call awaits approval"):
        await Runner().resume(agent, approve=[REFUND.id], session=session)


async def test_a_denied_call_is_answered_and_never_run(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    agent = make_agent(log)
    session = InMemorySession()
    await Runner().run(agent, message="Refund order 42", session=session)
    done = await Runner().resume(agent, deny=[REFUND.id], session=session)
    assert calls(log) == [["lookup", "42"]]
    denial = session.get_messages()[2]
    assert denial.tool_call_id == REFUND.id and "denied" in denial.content
    assert "denied" in done.content


async def test_bad_decisions_are_refused_and_keep_the_held_turn(tmp_path: Path) -> None:
    agent = make_agent(tmp_path / "calls.log")
    session = InMemorySession()
    await Runner().run(agent, message="Refund order 42", session=session)
    runner = Runner()
    for approve, deny, words in [
        (["nope"], [], "no tool call with id 'nope'"),
        ([REFUND.id], [REFUND.id], "both approved and denied"),
        ([], [], "neither approved nor denied"),
        (REFUND.id, [], "not one string"),
    ]:
        with pytest.raises(UserError, match=words):
            await runner.resume(agent, approve=approve, deny=deny, session=session)
    other = Agent("Other", model="m", provider=MockProvider(), tools=list(agent.tools.values()))
    with pytest.raises(UserError, match="asked for by agent 'Support'"):
        await runner.resume(other, approve=[REFUND.id], session=session)
    assert held(session)
    assert roles(session.get_messages()) == ["user"]


async def test_a_stream_that_stops_for_approval_keeps_the_turn_at_its_end(
    tmp_path: Path,
) -> None:
    agent = make_agent(tmp_path / "calls.log")
    session = SQLiteSession("chat", tmp_path / "chat.db")
    events = [e async for e in Runner().stream(agent, message="Refund order 42", session=session)]
    assert isinstance(events[-1], RunCompleted)
    assert events[-1].result.pending_approvals == (REFUND,)
    assert held(session)
    done = await Runner().resume(agent, approve=[REFUND.id], session=session)
    assert done.content.startswith("Done: refunded 42")


async def test_an_aborted_stream_holds_nothing(tmp_path: Path) -> None:
    agent = make_agent(tmp_path / "calls.log")
    session = SQLiteSession("chat", tmp_path / "chat.db")
    stream = Runner().stream(agent, message="Refund order 42", session=session)
    await stream.abort()
    assert not held(session)


async def test_a_turn_stored_before_a_crash_is_not_stored_twice(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    agent = make_agent(log)
    session = SQLiteSession("chat", tmp_path / "chat.db")
    await Runner().run(agent, message="Refund order 42", session=session)
    # As if a resume had taken the turn, run the refund, stored the turn, and its process
    # had died before the run went on:
    journal = session.get_meta(JOURNAL)
    ((run_id, entry),) = journal["runs"].items()
    turn = entry["turns"][-1]
    refunded = Message("tool", "refunded 42", tool_call_id=REFUND.id)
    turn["calls"][REFUND.id] = {"result": refunded.to_dict()}
    dead = _dead_pid()
    entry.update(
        state="running",
        decided={REFUND.id: True},
        token="gone",
        holder={"host": socket.gethostname(), "pid": dead, "start": "1"},
    )
    session.set_meta(JOURNAL, journal)
    stored = [Message.from_dict(turn["response"]), refunded]
    stored += [Message.from_dict(c["result"]) for k, c in turn["calls"].items() if k != REFUND.id]
    session.add_messages(stored)

    with pytest.raises(UserError, match=r"Runner\.recover finishes it"):
        await Runner().resume(agent, approve=[REFUND.id], session=session)
    (done,) = await Runner().recover(agent, session=session)
    assert done.run_id == run_id
    assert roles(session.get_messages()) == ["user", "assistant", "tool", "tool", "assistant"]
    assert calls(log) == [["lookup", "42"]]  # the refund is not made a second time
    assert done.content.startswith("Done: refunded 42")
    assert not held(session)
    assert await Runner().recover(agent, session=session) == []


async def test_a_store_without_meta_says_it_cannot_hold_calls() -> None:
    class Plain:
        id = "plain"

        def __init__(self) -> None:
            self.messages: list[object] = []

        def add_message(self, message: object) -> None:
            self.messages.append(message)

        def get_messages(self) -> tuple[object, ...]:
            return tuple(self.messages)

        def clear(self) -> None:
            self.messages.clear()

    @tool(requires_approval=True)
    def refund(order_id: str) -> str:
        """Refund an order."""
        return order_id

    provider = MockProvider()
    provider.enqueue_response(tool_calls=[REFUND])
    agent = Agent("Support", model="m", provider=provider, tools=[refund])
    with pytest.raises(UserError, match="keeps no derived state"):
        await Runner().run(agent, message="Refund", session=Plain())  # type: ignore[arg-type]


def test_requires_approval_must_be_a_bool() -> None:
    with pytest.raises(UserError, match="requires_approval"):
        tool(requires_approval="yes")  # type: ignore[call-overload]
