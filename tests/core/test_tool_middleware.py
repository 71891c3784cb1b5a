"""Tool middleware: around every tool call (local, MCP, an agent as a tool), in every way of
running, the runner's outside the agent's; it may change the arguments or the result, or
refuse; what it returns is what the model is sent and the session stores."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from aniki import (
    Agent,
    Context,
    Message,
    ModelRequest,
    Runner,
    SQLiteSession,
    ToolCall,
    ToolCallCompleted,
    ToolCallStarted,
    ToolError,
    UserError,
    tool,
)
from aniki.testing import MockProvider, MockReply

from .helpers import MODES, drive

Next = Callable[[ToolCall], Awaitable[Message]]


def calling(*calls: ToolCall, answer: str = "done") -> MockProvider:
    """A model that asks for ``calls`` in its first turn, then answers ``answer``."""

    def script(request: ModelRequest) -> MockReply:
        asked = any(m.role == "tool" for m in request.messages)
        return MockReply(content=answer) if asked else MockReply(tool_calls=calls)

    return MockProvider(handler=script)


def call(name: str, id: str = "call_1", **arguments: Any) -> ToolCall:
    return ToolCall(id, name, json.dumps(arguments))


ran: list[int] = []


@tool
def double(n: int) -> int:
    """Double a number."""
    ran.append(n)
    return 2 * n


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


def doubling(*middleware: Any, n: int = 1, **options: Any) -> Agent:
    """An agent whose model asks to double ``n`` once, with ``middleware`` around the call."""
    provider = calling(call("double", n=n))
    return Agent(
        "A", model="m", provider=provider, tools=[double], tool_middleware=middleware, **options
    )


def tool_results(session: Any) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in session.get_messages() if m.role == "tool"}


@pytest.mark.parametrize("mode", MODES)
async def test_the_runners_middleware_wraps_the_agents_and_both_see_each_call(
    mode: str, tmp_path: Path
) -> None:
    seen: list[str] = []

    def recording(label: str) -> Any:
        async def middleware(ctx: Context, called: ToolCall, call_next: Next) -> Message:
            assert ctx.get("user") == "u-1"
            seen.append(f"{label}>{called.name}{called.arguments}")
            answer = await call_next(called)
            seen.append(f"{label}<{answer.content}")
            return answer

        return middleware

    session = SQLiteSession("mw", tmp_path / "mw.db")
    agent = Agent(
        "A",
        model="m",
        provider=calling(call("double", n=4)),
        tools=[double],
        tool_middleware=[recording("agent")],
    )
    runner = Runner(tool_middleware=[recording("runner")])
    result = await drive(
        mode, runner, agent, message="go", session=session, context={"user": "u-1"}
    )
    assert result.content == "done"
    assert seen == ['runner>double{"n": 4}', 'agent>double{"n": 4}', "agent<8", "runner<8"]
    assert tool_results(session) == {"call_1": "8"}


@pytest.mark.parametrize("mode", MODES)
async def test_a_middleware_changes_the_arguments_and_the_result(mode: str, tmp_path: Path) -> None:
    async def clamp(ctx: Context, called: ToolCall, call_next: Next) -> Message:
        arguments = json.loads(called.arguments)
        arguments["n"] = min(arguments["n"], 10)
        answer = await call_next(dataclasses.replace(called, arguments=json.dumps(arguments)))
        return dataclasses.replace(answer, content=f"{answer.content} (clamped)")

    provider = calling(call("double", n=1000))
    session = SQLiteSession("args", tmp_path / "a.db")
    agent = Agent("A", model="m", provider=provider, tools=[double], tool_middleware=[clamp])
    await drive(mode, Runner(), agent, message="go", session=session)
    assert ran == [10]
    assert tool_results(session) == {"call_1": "20 (clamped)"}
    stored_call = session.get_messages()[1].tool_calls[0]
    assert json.loads(stored_call.arguments) == {"n": 1000}  # what the model asked, kept
    assert provider.requests[1].messages[-1].content == "20 (clamped)"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", ["returns a string", "raises ToolError"])
async def test_a_refused_call_never_runs_and_the_model_is_told_why(
    mode: str, how: str, tmp_path: Path
) -> None:
    async def no_big_numbers(ctx: Context, called: ToolCall, call_next: Next) -> Message | str:
        if json.loads(called.arguments)["n"] > 100:
            if how == "raises ToolError":
                raise ToolError("Refused: n must be at most 100.")
            return "Refused: n must be at most 100."
        return await call_next(called)

    provider = calling(call("double", n=7), call("double", "call_2", n=7000))
    session = SQLiteSession("refuse", tmp_path / "r.db")
    agent = Agent(
        "A", model="m", provider=provider, tools=[double], tool_middleware=[no_big_numbers]
    )
    result = await drive(mode, Runner(), agent, message="go", session=session)
    assert result.content == "done"
    assert ran == [7]
    assert tool_results(session) == {"call_1": "14", "call_2": "Refused: n must be at most 100."}


@pytest.mark.parametrize("mode", MODES)
async def test_a_middleware_that_raises_ends_the_run_and_the_turn_is_not_stored(
    mode: str, tmp_path: Path
) -> None:
    async def broken(ctx: Context, called: ToolCall, call_next: Next) -> Message:
        raise RuntimeError("audit log unreachable")

    session = SQLiteSession("boom", tmp_path / "b.db")
    agent = doubling(broken)
    with pytest.raises(RuntimeError, match="audit log unreachable"):
        await drive(mode, Runner(), agent, message="go", session=session)
    assert [m.role for m in session.get_messages()] == ["user"]
    assert ran == []


@pytest.mark.parametrize(
    ("returned", "error"),
    [
        (42, "returned int"),
        (Message("tool", "x", tool_call_id="other"), "answer to call 'other'"),
    ],
)
async def test_a_middleware_returning_something_else_is_a_user_error(
    returned: object, error: str
) -> None:
    async def odd(ctx: Context, called: ToolCall, call_next: Next) -> Any:
        return returned

    agent = doubling(odd)
    with pytest.raises(UserError, match=error):
        await Runner().run(agent, message="go")


@pytest.mark.parametrize("change", [{"id": "forged"}, {"name": "other"}])
async def test_a_middleware_may_not_change_the_calls_id_or_tool(change: dict[str, str]) -> None:
    async def forging(ctx: Context, called: ToolCall, call_next: Next) -> Message:
        return await call_next(dataclasses.replace(called, **change))

    agent = doubling(forging)
    with pytest.raises(UserError, match="not its id or tool"):
        await Runner().run(agent, message="go")
    assert ran == []


async def test_a_stream_sends_the_models_call_and_the_answer_the_middleware_gave() -> None:
    async def rewrite(ctx: Context, called: ToolCall, call_next: Next) -> str:
        answer = await call_next(called)
        return f"<{answer.content}>"

    agent = doubling(rewrite, n=3)
    events = [event async for event in Runner().stream(agent, message="go")]
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    completed = [e for e in events if isinstance(e, ToolCallCompleted)]
    assert [e.tool_call.arguments for e in started] == ['{"n": 3}']
    assert [e.message.content for e in completed] == ["<6>"]


async def test_the_output_cap_applies_to_what_the_middleware_returns() -> None:
    seen: list[int] = []

    async def padding(ctx: Context, called: ToolCall, call_next: Next) -> str:
        answer = await call_next(called)
        seen.append(len(answer.content))
        return answer.content * 500

    agent = doubling(padding, n=11111, max_tool_output=1000)
    await Runner().run(agent, message="go")
    stored = tool_results(agent.session)["call_1"]
    assert seen == [5]  # the middleware saw the tool's whole result
    assert stored.startswith("22222" * 200) and "Output cut" in stored
    assert len(stored) < 1400


async def test_an_agent_called_as_a_tool_goes_through_the_middleware() -> None:
    helper = Agent("Helper", model="m", provider=MockProvider([MockReply(content="42")]))
    names: list[str] = []

    async def naming(ctx: Context, called: ToolCall, call_next: Next) -> Message:
        names.append(called.name)
        return await call_next(called)

    provider = calling(call("helper", request="what is six times seven?"))
    agent = Agent(
        "A", model="m", provider=provider, tools=[helper.as_tool()], tool_middleware=[naming]
    )
    await Runner().run(agent, message="go")
    assert names == ["helper"]
    assert tool_results(agent.session) == {"call_1": "42"}


async def test_after_a_handoff_the_new_agents_middleware_applies() -> None:
    seen: list[str] = []

    def labelled(label: str) -> Any:
        async def middleware(ctx: Context, called: ToolCall, call_next: Next) -> Message:
            seen.append(label)
            return await call_next(called)

        return middleware

    def script(request: ModelRequest) -> MockReply:
        tools_answered = sum(m.role == "tool" for m in request.messages)
        if tools_answered == 0:
            return MockReply(tool_calls=(call("transfer_to_b"),))
        if tools_answered == 1:
            return MockReply(tool_calls=(call("double", "call_2", n=2),))
        return MockReply(content="done")

    provider = MockProvider(handler=script)
    second = Agent(
        "B", model="m", provider=provider, tools=[double], tool_middleware=[labelled("b")]
    )
    first = Agent(
        "A", model="m", provider=provider, handoffs=[second], tool_middleware=[labelled("a")]
    )
    result = await Runner(tool_middleware=[labelled("runner")]).run(first, message="go")
    assert result.last_agent == "B"
    assert seen == ["runner", "b"]  # a handoff is no tool call: no middleware saw it


@pytest.mark.parametrize("given", ["not a list", [42]])
def test_tool_middleware_must_be_functions(given: Any) -> None:
    with pytest.raises(UserError, match="tool_middleware takes"):
        Agent("A", model="m", provider=MockProvider(), tool_middleware=given)
    with pytest.raises(UserError, match="tool_middleware takes"):
        Runner(tool_middleware=given)
