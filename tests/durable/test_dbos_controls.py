"""Tool middleware and guardrails in a run that DBOS makes durable: the history is the one a
plain run with the same controls writes, and a tripped input guardrail stops the workflow
with ``GuardrailTripped`` having stored only the user message."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from aniki import Agent, Context, GuardrailTripped, Message, Runner, ToolCall
from aniki.durable import DurableAgent
from aniki.sessions import open_session
from aniki.testing import MockProvider

from .test_dbos import _launch, _reply, backend, first, second

__all__ = ["backend"]  # the fixture, shared with test_dbos

Next = Callable[[ToolCall], Awaitable[Message]]


async def tagged(ctx: Context, call: ToolCall, call_next: Next) -> str:
    answer = await call_next(call)
    return f"[{call.name}] {answer.content}"


def polite(ctx: Context, message: Message) -> str | None:
    return None if "please" in message.content else "ask politely"


def _agent() -> Agent[Any]:
    return Agent(
        "Guarded",
        model="m",
        provider=MockProvider(handler=_reply),
        tools=[first, second],
        tool_middleware=[tagged],
        input_guardrails=[polite],
    )


async def test_a_durable_run_goes_through_the_middleware_and_guardrails(
    backend: tuple[str, str],
) -> None:
    system_db, store = backend
    durable = DurableAgent(_agent(), store)
    _launch(system_db)
    result = await durable.run("go, please", session_id="s1", run_id="run-1")
    assert result.content == "done"
    stored = tuple(open_session(store, "s1").get_messages())
    assert [m.content for m in stored if m.role == "tool"] == ["[first] 4", "[second] ok"]
    plain = open_session("memory:", "plain")
    await Runner().run(_agent(), message="go, please", session=plain)
    assert [(m.role, m.content) for m in stored] == [
        (m.role, m.content) for m in plain.get_messages()
    ]

    with pytest.raises(GuardrailTripped, match="ask politely"):
        await durable.run("go", session_id="s2", run_id="run-2")
    assert [m.role for m in open_session(store, "s2").get_messages()] == ["user"]
