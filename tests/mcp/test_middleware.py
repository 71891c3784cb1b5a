"""Tool middleware sees an MCP server's calls like any other: it can change the arguments
the server receives and what the model is sent."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable

from aniki import Agent, Context, Message, Runner, ToolCall
from aniki.mcp import MCPServerStdio
from tests.mcp.test_calls import call, calling, tool_messages


async def test_middleware_wraps_an_mcp_call(server: MCPServerStdio) -> None:
    seen: list[str] = []

    async def doubling_b(
        ctx: Context, called: ToolCall, call_next: Callable[[ToolCall], Awaitable[Message]]
    ) -> str:
        arguments = json.loads(called.arguments)
        arguments["b"] *= 2
        answer = await call_next(dataclasses.replace(called, arguments=json.dumps(arguments)))
        seen.append(answer.content)
        return f"sum: {answer.content}"

    provider = calling([call("add", {"a": 2, "b": 20})])
    agent = Agent(
        "A", model="m", provider=provider, mcp_servers=[server], tool_middleware=[doubling_b]
    )
    await Runner().run(agent, message="go")
    assert seen == ["42"]  # the server added 2 and 40
    assert tool_messages(agent.session.get_messages()) == {"call_1": "sum: 42"}
