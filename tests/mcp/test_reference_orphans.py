"""No MCP server outlives the process that started it: ``kill -9`` of that process while a
tool runs ends the stdio server and what it started, whether the tool blocks the server (a
synchronous tool, which reads no end of input) or not (an asynchronous one), on the test
server and on the reference server. Processes are found in ``/proc``, not by name."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.mcp.conftest import SERVER, alive, wait_gone
from tests.mcp.reference import installed

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

AGENT = """
import asyncio, json, sys
from aniki.mcp import MCPServerStdio

command, args, tool, arguments = json.loads(sys.argv[1])


async def main():
    server = MCPServerStdio(command, args)
    tools = {tool.name: tool for tool in await server.list_tools()}
    print("ready", flush=True)
    await tools[tool](**arguments)


asyncio.run(main())
"""


def children() -> dict[int, list[int]]:
    """Every process's children, by parent PID."""
    found: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rpartition(")")[2].split()[1])
            found.setdefault(parent, []).append(int(entry.name))
    return found


def descendants(pid: int) -> set[int]:
    tree, found, left = children(), set(), [pid]
    while left:
        for child in tree.get(left.pop(), []):
            if alive(child):
                found.add(child)
                left.append(child)
    return found


def wait_for(pid: int, count: int, within: float = 20.0) -> set[int]:
    """The live descendants of ``pid`` once there are ``count`` of them."""
    deadline = time.monotonic() + within
    while len(found := descendants(pid)) < count:
        assert time.monotonic() < deadline, f"{len(found)} of {count} processes after {within} s"
        time.sleep(0.05)
    return found


def case(name: str) -> tuple[str, list[str], str, dict[str, Any], int]:
    """The server command, its arguments, the tool to call, its arguments, and how many
    processes there are while it runs (the watchdog, the server, what the server started)."""
    if name == "sync tool":
        return sys.executable, [str(SERVER)], "hold", {"seconds": 120}, 3
    if name == "async tool":
        return sys.executable, [str(SERVER)], "hold_async", {"seconds": 120}, 3
    node, *args = installed().everything_stdio
    return node, args, "trigger-long-running-operation", {"duration": 120, "steps": 1}, 2


@pytest.mark.parametrize("name", ["sync tool", "async tool", "reference server"])
def test_kill_9_of_the_process_that_started_a_server_leaves_no_process(
    name: str, tmp_path: Path
) -> None:
    command, args, tool, arguments, count = case(name)
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    agent = subprocess.Popen(
        [sys.executable, str(script), json.dumps([command, args, tool, arguments])],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).parents[2],
    )
    try:
        assert agent.stdout is not None and agent.stdout.readline() == b"ready\n"
        found = wait_for(agent.pid, count)
        time.sleep(0.5)  # the call is under way
        os.kill(agent.pid, signal.SIGKILL)
        agent.wait(10)
        left = [pid for pid in found if not wait_gone(pid, within=5)]
        assert not left, f"still running after the kill: {left}"
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait(10)
