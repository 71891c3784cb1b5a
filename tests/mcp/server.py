"""The MCP server the tests start, over stdio or streamable HTTP, written with the SDK.

    python server.py [--http PORT] [--pid-file PATH] [--start-delay SECONDS]
                     [--token TOKEN] [--stubborn]

``--pid-file`` appends the server's PID (and with ``--stubborn`` its child's) to a file as
soon as it starts; ``--token`` makes the HTTP server refuse requests without
``Authorization: Bearer TOKEN``; ``--stubborn`` makes it ignore SIGTERM, linger after its
stdin closes, and start a child process, as badly behaved servers do.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from mcp import MCPError

PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)


class CountingServer(MCPServer):
    """Counts the tool listings it answers (the `listings` tool says how many)."""

    listed = 0

    async def list_tools(self) -> Any:
        CountingServer.listed += 1
        return await super().list_tools()


server = CountingServer("test-server", log_level="ERROR")

WIRE = os.dup(1)
"""The stdout a stdio client reads (the SDK points fd 1 elsewhere while it serves)."""


@server.tool()
def listings() -> int:
    """How many times this server has listed its tools."""
    return CountingServer.listed


@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@server.tool(name="echo.args")
def echo_args(text: str, times: int = 1, tags: list[str] | None = None) -> str:
    """Return the arguments as JSON."""
    return json.dumps({"text": text, "times": times, "tags": tags})


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
def whoami(ctx: Context) -> str:
    """The Authorization header the request came with, and the SECRET variable."""
    headers = ctx.headers or {}
    return json.dumps(
        {"authorization": headers.get("authorization"), "secret": os.environ.get("SECRET")}
    )


@server.tool()
def boom() -> str:
    """Raise an exception."""
    raise ValueError("kaboom")


@server.tool()
def fail(order: str) -> str:
    """Fail the way a tool reports a failure to the model."""
    raise ToolError(f"no order {order}")


@server.tool()
def leak(ctx: Context) -> str:
    """Fail with a message quoting the Authorization header and the SECRET variable."""
    headers = ctx.headers or {}
    raise ToolError(f"auth={headers.get('authorization')} secret={os.environ.get('SECRET')}")


@server.tool()
def refuse() -> str:
    """Fail with a protocol error."""
    raise MCPError(-32602, "refused: no such thing")


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return "done"


@server.tool()
def big(size: int) -> str:
    """A text of `size` bytes."""
    return "x" * size


@server.tool()
async def stall() -> str:
    """Start an answer on stdout that never ends (the rest of the line never comes)."""
    os.write(WIRE, b'{"jsonrpc": "2.0", "id": 0, "result": {"content": [{"type": "text", "text": "')
    await asyncio.sleep(3600)
    return "never"


def _child() -> int:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]).pid


@server.tool()
def hold(seconds: float) -> str:
    """Start a child process, then block this server for `seconds` (a synchronous tool)."""
    _child()
    time.sleep(seconds)
    return "held"


@server.tool()
async def hold_async(seconds: float) -> str:
    """Start a child process, then wait `seconds` (an asynchronous tool)."""
    _child()
    await asyncio.sleep(seconds)
    return "held"


@server.tool()
def crash() -> str:
    """End this server's process at once."""
    os._exit(3)


@server.tool(structured_output=False)
def picture() -> list[Any]:
    """A one-pixel image and a caption."""
    return ["a red pixel", Image(data=PIXEL, format="png")]


@server.tool()
async def grow(ctx: Context) -> str:
    """Add a tool named `extra`, and say the tool list changed."""

    def extra(word: str) -> str:
        """Repeat a word."""
        return word * 2

    server.add_tool(extra, name="extra")
    await ctx.notify_tools_changed()  # to 2026-07-28 clients listening
    if ctx.protocol_version is not None and ctx.protocol_version < "2026":
        await ctx.session.send_tool_list_changed()  # to earlier clients
    return "grown"


def _require_token(app: Any, token: str) -> Any:
    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    return guarded


def _serve_http(port: int, token: str | None) -> None:
    import uvicorn

    app = server.streamable_http_app()
    guarded = _require_token(app, token) if token else app
    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int)
    parser.add_argument("--pid-file")
    parser.add_argument("--start-delay", type=float, default=0.0)
    parser.add_argument("--token")
    parser.add_argument("--stubborn", action="store_true")
    options = parser.parse_args()
    pids = [os.getpid()]
    if options.stubborn:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        pids.append(child.pid)
    if options.pid_file:
        with open(options.pid_file, "a") as file:
            file.write("".join(f"{pid}\n" for pid in pids))
    time.sleep(options.start_delay)
    if options.http is not None:
        _serve_http(options.http, options.token)
    else:
        server.run()
    if options.stubborn:
        time.sleep(600)


if __name__ == "__main__":
    main()
