"""Tools from an MCP server (docs/mcp.md): the shop server beside this file is started as a
subprocess, and the agent's model calls its tools like any other."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from _model import model_and_provider

from aniki import Agent, ModelRequest, Runner, ToolCall
from aniki.mcp import MCPServerStdio
from aniki.testing import MockReply

SERVER = Path(__file__).with_name("_mcp_server.py")


def script(request: ModelRequest) -> MockReply:
    last = request.messages[-1]
    if last.role == "user":
        ask = ToolCall("call_1", "shop_order_status", '{"order_id": "A-1009"}')
        return MockReply(tool_calls=(ask,))
    return MockReply(content=f"Good news! {last.content}")


async def main() -> None:
    model, provider = model_and_provider(script)
    shop = MCPServerStdio(sys.executable, [str(SERVER)], name="shop", tool_prefix="shop_")
    agent = Agent(
        "Support",
        "Answer questions about orders with the shop's tools.",
        model=model,
        provider=provider,
        mcp_servers=[shop],
    )
    async with shop:  # starts the server; leaving ends its process
        tools = await shop.list_tools()
        print("tools from the MCP server:", ", ".join(tool.name for tool in tools))
        result = await Runner().run(agent, message="Where is my order A-1009?")
    for message in result.messages:
        calls = [f"{c.name}({c.arguments})" for c in message.tool_calls]
        print(f"{message.role:>9}: {message.content or ', '.join(calls)}")


if __name__ == "__main__":
    asyncio.run(main())
