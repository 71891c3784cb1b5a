"""An agent with an MCP server: its tools offered to the model, calls and what they return,
and every way a call can fail becoming a tool message the run goes on from."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence

import pytest

from aniki import Agent, Message, ModelRequest, Runner, ToolCall, ToolDefinition
from aniki.mcp import MCPServerStdio
from aniki.testing import MockProvider, MockReply
from tests.mcp.conftest import stdio


def calling(*turns: Sequence[ToolCall]) -> MockProvider:
    """A model that makes the calls of each turn in order, then answers "done"."""
    left = list(turns)

    def script(request: ModelRequest) -> MockReply:
        return MockReply(tool_calls=tuple(left.pop(0))) if left else MockReply(content="done")

    return MockProvider(handler=script)


def call(name: str, arguments: object = None, id: str = "call_1") -> ToolCall:
    return ToolCall(id, name, json.dumps(arguments if arguments is not None else {}))


def tool_messages(messages: Sequence[Message]) -> dict[str, str]:
    return {m.tool_call_id or "": m.content for m in messages if m.role == "tool"}


async def test_the_tools_are_offered_to_the_model_with_their_schemas(
    server: MCPServerStdio,
) -> None:
    provider = MockProvider([MockReply(content="hi")])
    agent = Agent("A", model="m", provider=provider, mcp_servers=[server])
    await Runner().run(agent, message="hello")
    offered = {tool.name: tool for tool in provider.requests[0].tools}
    assert offered["add"] == ToolDefinition(
        "add",
        "Add two numbers.",
        {
            "type": "object",
            "properties": {
                "a": {"title": "A", "type": "integer"},
                "b": {"title": "B", "type": "integer"},
            },
            "required": ["a", "b"],
            "title": "addArguments",  # kept: the schema is sent as the server gives it
        },
    )
    # MCP allows "." in a name; model APIs do not.
    assert offered["echo_args"].parameters["required"] == ["text"]
    assert {"pid", "boom", "slow", "crash", "grow", "picture"} <= set(offered)


async def test_a_call_passes_its_arguments_and_the_session_stores_the_result(
    server: MCPServerStdio,
) -> None:
    arguments = {"text": "héllo", "times": 3, "tags": ["a", "b"]}
    provider = calling([call("echo_args", arguments), call("add", {"a": 2, "b": 40}, "call_2")])
    agent = Agent("A", model="m", provider=provider, mcp_servers=[server])
    result = await Runner().run(agent, message="go")
    assert result.content == "done"
    stored = agent.session.get_messages()
    answers = tool_messages(stored)
    assert json.loads(answers["call_1"]) == arguments
    assert answers["call_2"] == "42"
    assert list(provider.requests[1].messages[-2:]) == list(stored[2:4])


async def test_a_tool_can_be_called_directly(server: MCPServerStdio) -> None:
    tools = {tool.name: tool for tool in await server.list_tools()}
    assert await tools["add"](a=1, b=2) == "3"


async def test_an_error_result_says_the_tool_failed_with_its_text(
    server: MCPServerStdio,
) -> None:
    provider = calling([call("fail", {"order": "A-17"})])
    agent = Agent("A", model="m", provider=provider, mcp_servers=[server])
    result = await Runner().run(agent, message="go")
    assert tool_messages(result.messages)["call_1"] == (
        "Error: the MCP tool 'fail' failed: Error executing tool fail: no order A-17"
    )
    assert result.content == "done"


async def test_a_tool_that_raises_on_the_server_and_a_protocol_error_become_tool_messages(
    server: MCPServerStdio,
) -> None:
    provider = calling([call("boom"), call("refuse", id="call_2"), call("nope", id="call_3")])
    agent = Agent("A", model="m", provider=provider, mcp_servers=[server])
    result = await Runner().run(agent, message="go")
    answers = tool_messages(result.messages)
    assert answers["call_1"].startswith("Error: the MCP tool 'boom' failed: ")
    assert answers["call_2"] == (
        f"Error: MCP server {server.name!r} refused the call to 'refuse': "
        "refused: no such thing (error -32602)."
    )
    assert answers["call_3"].startswith("Error: unknown tool 'nope'")  # aniki's own answer
    assert result.content == "done"


async def test_arguments_that_are_not_a_json_object_are_answered_without_a_call(
    server: MCPServerStdio,
) -> None:
    provider = calling(
        [ToolCall("call_1", "add", "{not json"), ToolCall("call_2", "add", "[1, 2]")]
    )
    agent = Agent("A", model="m", provider=provider, mcp_servers=[server])
    answers = tool_messages((await Runner().run(agent, message="go")).messages)
    assert answers["call_1"].startswith("Error: the arguments for 'add' are not valid JSON")
    assert answers["call_2"].startswith("Error: the arguments for 'add' must be a JSON object")


async def test_arguments_the_server_refuses_are_answered_with_its_reasons(
    server: MCPServerStdio,
) -> None:
    provider = calling([call("add", {"a": "x"})])
    agent = Agent("A", model="m", provider=provider, mcp_servers=[server])
    answer = tool_messages((await Runner().run(agent, message="go")).messages)["call_1"]
    assert answer.startswith("Error: the MCP tool 'add' failed: ")
    assert "a" in answer and "b" in answer


async def test_a_call_that_takes_too_long_times_out_and_the_run_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = stdio(timeout=1)
    try:
        provider = calling([call("slow", {"seconds": 30})], [call("add", {"a": 1, "b": 1})])
        agent = Agent("A", model="m", provider=provider, mcp_servers=[server])
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="aniki"):
            result = await Runner().run(agent, message="go")
        assert time.monotonic() - started < 8
        answers = [m.content for m in result.messages if m.role == "tool"]
        assert answers == ["Error: the MCP tool 'slow' did not answer within 1 s.", "2"]
        assert "did not answer within 1 s" in caplog.text
    finally:
        await server.close()


@pytest.mark.parametrize("attach", [False, True])
async def test_an_image_is_described_or_attached(attach: bool) -> None:
    server = stdio(attach_media=attach)
    try:
        provider = calling([call("picture")])
        agent = Agent("A", model="m", provider=provider, mcp_servers=[server])
        result = await Runner().run(agent, message="go")
        answer = next(m for m in result.messages if m.role == "tool")
        if attach:
            assert answer.content == "a red pixel\n[image (image/png, 69 bytes) attached]"
            assert [a.media_type for a in answer.attachments] == ["image/png"]
            assert answer.attachments[0].data is not None
            assert answer.attachments[0].data.startswith(b"\x89PNG")
        else:
            assert answer.content == "a red pixel\n[image (image/png, 69 bytes), not shown]"
            assert answer.attachments == ()
    finally:
        await server.close()
