"""An MCP server, written with the SDK, whose tool sends log messages and progress while it
runs (the reference server's simulated logging runs on a timer, outside any call).

    python features_server.py
"""

from __future__ import annotations

import warnings

from mcp.server.mcpserver import Context, MCPServer

warnings.filterwarnings(
    "ignore", "The logging capability is deprecated"
)  # still what 2025 clients use

server = MCPServer("features-server", log_level="ERROR")


@server.tool()
async def chatty(ctx: Context) -> str:
    """Log a warning, report progress twice, then answer."""
    await ctx.warning("halfway there, token=sk-test-0123456789", logger_name="worker")
    await ctx.report_progress(1, 2, "first half")
    await ctx.report_progress(2, 2, "second half")
    return "talked"


if __name__ == "__main__":
    server.run()
