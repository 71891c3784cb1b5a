"""Recovery against the official reference servers: an HTTP server that restarted (and
answers the old session with 400 and error -32000, not 404) is reached again, and a call that
timed out leaves the connection usable, or is reset when its state is unknown."""

from __future__ import annotations

import pytest

from aniki import Agent, Runner
from aniki.mcp import MCPServerStdio
from tests.mcp.conftest import alive, stdio, wait_gone
from tests.mcp.reference import EverythingHTTP, everything_stdio
from tests.mcp.test_calls import call, calling, tool_messages


async def test_a_restarted_http_server_is_reached_again_and_the_call_sent_once_more(
    everything_http: EverythingHTTP,
) -> None:
    server = everything_http.client()
    provider = calling(
        [call("echo", {"message": "one"})], [call("echo", {"message": "two"}, "call_2")]
    )
    agent = Agent("A", model="m", provider=provider, mcp_servers=[server])
    try:
        tools = {tool.name: tool for tool in await server.list_tools()}
        assert await tools["echo"](message="before") == "Echo: before"
        everything_http.restart()  # it forgets the session: 400, error -32000
        assert await tools["echo"](message="after") == "Echo: after"
        everything_http.restart()
        result = await Runner().run(agent, message="go")  # lists the tools, then calls
        answers = tool_messages(result.messages)
        assert answers == {"call_1": "Echo: one", "call_2": "Echo: two"}
    finally:
        await server.close()


@pytest.mark.parametrize("kind", ["stdio", "http"])
async def test_a_call_that_times_out_leaves_the_connection_usable(
    kind: str, request: pytest.FixtureRequest
) -> None:
    if kind == "stdio":
        server = everything_stdio(timeout=1.0)
    else:
        server = request.getfixturevalue("everything_http").client(timeout=1.0)
    try:
        tools = {tool.name: tool for tool in await server.list_tools()}
        slow = tools["trigger-long-running-operation"]
        answer = await slow(duration=30, steps=1)
        assert (
            answer
            == "Error: the MCP tool 'trigger-long-running-operation' did not answer within 1 s."
        )
        assert await tools["echo"](message="next") == "Echo: next"  # no close() needed
    finally:
        await server.close()


async def test_a_result_that_never_ends_resets_the_connection_and_the_next_call_works() -> None:
    server: MCPServerStdio = stdio(timeout=1.0)
    try:
        tools = {tool.name: tool for tool in await server.list_tools()}
        first = int(await tools["pid"]())
        assert await tools["stall"]() == "Error: the MCP tool 'stall' did not answer within 1 s."
        assert wait_gone(first)  # its state unknown (half a message sent): ended
        second = int(await tools["pid"]())
        assert second != first and alive(second)
    finally:
        await server.close()
