"""MCP servers over streamable HTTP: headers, calls, refreshes, and a server that goes away."""

from __future__ import annotations

import asyncio
import json
import traceback

import pytest

from aniki import Agent, Runner
from aniki.mcp import MCPServerError, MCPServerHTTP
from aniki.mcp._link import Link
from aniki.testing import MockProvider
from tests.mcp.conftest import TOKEN, HTTPServer
from tests.mcp.test_calls import call, calling, tool_messages


async def test_tools_are_offered_and_called_with_the_headers(http_server: HTTPServer) -> None:
    async with http_server.client() as server:
        provider = calling([call("whoami"), call("add", {"a": 20, "b": 22}, "call_2")])
        agent = Agent("A", model="m", provider=provider, mcp_servers=[server])
        result = await Runner().run(agent, message="go")
    answers = tool_messages(result.messages)
    assert json.loads(answers["call_1"])["authorization"] == f"Bearer {TOKEN}"
    assert answers["call_2"] == "42"
    assert "add" in {tool.name for tool in provider.requests[0].tools}


async def test_a_tool_list_change_reaches_an_http_client(own_http_server: HTTPServer) -> None:
    async with own_http_server.client() as server:
        tools = {tool.name: tool for tool in await server.list_tools()}
        assert "extra" not in tools
        assert await tools["grow"]() == "grown"
        await asyncio.sleep(0.2)
        tools = {tool.name: tool for tool in await server.list_tools()}
        assert await tools["extra"](word="xy") == "xyxy"
        assert await tools["listings"]() == "2"


async def test_a_server_that_went_away_is_reached_again_on_the_next_call(
    own_http_server: HTTPServer,
) -> None:
    provider = MockProvider()
    provider.enqueue_response(tool_calls=[call("add", {"a": 1, "b": 1})])
    provider.enqueue_response(tool_calls=[call("add", {"a": 2, "b": 2}, "call_2")])
    provider.enqueue_response(tool_calls=[call("add", {"a": 3, "b": 3}, "call_3")])
    provider.enqueue_response(content="done")
    server = own_http_server.client()
    down = asyncio.Event()

    async def middleware(ctx: object, request: object, call_next: object) -> object:
        if len(provider.requests) == 1:  # after the first call: take the server down
            await asyncio.to_thread(own_http_server.kill)
            down.set()
        if len(provider.requests) == 2:  # after the failed call: bring it back
            await asyncio.to_thread(own_http_server.start)
        return await call_next(request)  # type: ignore[operator]

    agent = Agent("A", model="m", provider=provider, mcp_servers=[server], middleware=[middleware])
    try:
        result = await Runner().run(agent, message="go")
    finally:
        await server.close()
    answers = tool_messages(result.messages)
    assert down.is_set()
    assert answers["call_1"] == "2"
    assert answers["call_2"].startswith("Error: ") and repr(server.name) in answers["call_2"]
    assert answers["call_3"] == "6"
    assert result.content == "done"


async def test_a_refused_connection_is_an_error_without_the_token(
    http_server: HTTPServer, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "Bearer wrong-secret-value-31337"
    server = MCPServerHTTP(http_server.url, headers={"Authorization": wrong})
    with pytest.raises(MCPServerError) as caught:
        await server.connect()
    assert str(caught.value).startswith(f"could not connect to MCP server {server.name!r}")
    shown = "".join(traceback.format_exception(caught.value))
    for text in (shown, repr(server), caplog.text):
        assert "wrong-secret-value-31337" not in text


async def test_an_unreachable_server_is_an_error() -> None:
    server = MCPServerHTTP("http://127.0.0.1:9/mcp", connect_timeout=5)
    with pytest.raises(MCPServerError) as caught:
        await server.list_tools()
    assert str(caught.value).startswith("could not connect to MCP server '127.0.0.1:9/mcp'")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_server_restarted_between_calls_is_reached_again_unseen(
    mode: str, own_http_server: HTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On 2025-11-25 the restarted server does not know the session and answers 404: the
    # call, which it did not run, goes again over a new session. 2026-07-28 has no sessions.
    monkeypatch.setattr(Link, "mode", mode)
    async with own_http_server.client() as server:
        tools = {tool.name: tool for tool in await server.list_tools()}
        first = await tools["pid"]()
        await asyncio.to_thread(own_http_server.kill)
        await asyncio.to_thread(own_http_server.start)
        assert await tools["add"](a=2, b=3) == "5"
        assert await tools["pid"]() != first
