"""A server's life: connected on first use, kept across runs, restarted after it dies,
closed by ``close()`` and at exit, never left running by a cancelled run."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from aniki import Agent, Runner, UserError
from aniki.mcp import MCPServerError, MCPServerStdio
from aniki.mcp._link import Link
from aniki.testing import MockProvider
from tests.mcp.conftest import SERVER, alive, read_pids, stdio, wait_gone
from tests.mcp.test_calls import call, calling, tool_messages


async def pid_of(server: MCPServerStdio) -> int:
    tools = {tool.name: tool for tool in await server.list_tools()}
    return int(await tools["pid"]())


async def test_connected_on_first_use_kept_across_runs_and_ended_by_close(
    server: MCPServerStdio,
) -> None:
    provider = calling([call("pid")], [call("pid", id="call_2")])
    agent = Agent("A", model="m", provider=provider, mcp_servers=[server])
    first = await Runner().run(agent, message="one")
    second = await Runner().run(agent, message="two")
    pid = int(tool_messages(first.messages)["call_1"])
    assert int(tool_messages(second.messages)["call_2"]) == pid
    assert alive(pid)
    await server.close()
    assert wait_gone(pid)
    assert await pid_of(server) != pid  # used again after close: started again


async def test_async_with_connects_and_closes() -> None:
    async with stdio() as server:
        pid = await pid_of(server)
        assert alive(pid)
    assert wait_gone(pid)


async def test_a_server_that_ignores_the_end_of_its_input_is_killed_with_its_children(
    tmp_path: Path,
) -> None:
    pids = tmp_path / "pids"
    server = stdio("--stubborn", "--pid-file", str(pids))
    await server.connect()
    own, child = read_pids(pids, count=2)
    assert alive(own) and alive(child)
    started = time.monotonic()
    await server.close()
    assert not alive(own) and wait_gone(child, within=2)
    assert time.monotonic() - started < 10


async def test_a_server_that_dies_mid_run_is_started_again_on_the_next_call(
    server: MCPServerStdio,
) -> None:
    provider = calling([call("pid")], [call("crash", id="call_2")], [call("pid", id="call_3")])
    agent = Agent("A", model="m", provider=provider, mcp_servers=[server])
    result = await Runner().run(agent, message="go")
    answers = tool_messages(result.messages)
    assert answers["call_2"] == (
        f"Error: MCP server {server.name!r} closed the connection during the call to "
        "'crash'; it is connected again on the next call."
    )
    first, second = int(answers["call_1"]), int(answers["call_3"])
    assert first != second and not alive(first) and alive(second)
    assert result.content == "done"


async def test_a_server_killed_between_runs_is_started_again_unseen(
    server: MCPServerStdio,
) -> None:
    first = await pid_of(server)
    os.kill(first, signal.SIGKILL)
    assert await asyncio.to_thread(wait_gone, first)  # the loop runs meanwhile, and sees it
    await asyncio.sleep(0.1)
    provider = calling([call("pid")])
    agent = Agent("A", model="m", provider=provider, mcp_servers=[server])
    result = await Runner().run(agent, message="go")
    second = int(tool_messages(result.messages)["call_1"])
    assert second != first and alive(second)


async def test_a_run_cancelled_while_the_server_starts_leaves_no_process(
    tmp_path: Path,
) -> None:
    pids = tmp_path / "pids"
    server = stdio("--start-delay", "30", "--pid-file", str(pids))
    agent = Agent("A", model="m", provider=calling(), mcp_servers=[server])
    run = asyncio.ensure_future(Runner().run(agent, message="go"))
    (pid,) = await asyncio.to_thread(read_pids, pids)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert await asyncio.to_thread(wait_gone, pid)


# The loop closes while the SDK's stdio transport is still ending the watchdog (it gives the
# server 1.5 s after SIGTERM); asyncio then reports the transport's finalizer. What this test
# asserts is that no process is left, which holds.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_run_cancelled_mid_call_leaves_no_process_once_its_loop_ends() -> None:
    server = stdio()
    pids: list[int] = []

    async def main() -> None:
        pids.append(await pid_of(server))
        agent = Agent("A", model="m", provider=calling([call("slow", {"seconds": 30})]))
        agent.mcp_servers = (server,)
        run = asyncio.ensure_future(Runner().run(agent, message="go"))
        await asyncio.sleep(1.0)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        assert alive(pids[0])  # the connection outlives a run, not its loop

    asyncio.run(main())
    assert wait_gone(pids[0])


async def test_a_server_that_does_not_start_in_time_is_an_error_and_is_ended(
    tmp_path: Path,
) -> None:
    pids = tmp_path / "pids"
    server = stdio("--start-delay", "30", "--pid-file", str(pids), connect_timeout=1)
    agent = Agent("A", model="m", provider=calling(), mcp_servers=[server])
    with pytest.raises(MCPServerError, match=r"did not connect within 1 s \(connect_timeout=\)"):
        await Runner().run(agent, message="go")
    (pid,) = read_pids(pids)
    assert wait_gone(pid)


async def test_a_server_that_cannot_start_is_an_error_naming_it() -> None:
    server = MCPServerStdio("no-such-command-here", ["serve"])
    agent = Agent("A", model="m", provider=calling(), mcp_servers=[server])
    with pytest.raises(MCPServerError) as caught:
        await Runner().run(agent, message="go")
    assert caught.value.server == "no-such-command-here serve"
    assert str(caught.value).startswith(
        "could not connect to MCP server 'no-such-command-here serve': FileNotFoundError"
    )


async def test_two_servers_offering_one_name_are_refused_unless_prefixed() -> None:
    async with stdio(name="one") as one, stdio(name="two") as two:
        clashing = Agent("A", model="m", provider=calling(), mcp_servers=[one, two])
        with pytest.raises(UserError, match=r"two tools named '\w+' \(one from MCP server 'two'\)"):
            await Runner().run(clashing, message="go")
        two.tool_prefix = "two_"
        two.invalidate_tools()
        provider = calling([call("two_add", {"a": 1, "b": 2})])
        agent = Agent("A", model="m", provider=provider, mcp_servers=[one, two])
        result = await Runner().run(agent, message="go")
        assert tool_messages(result.messages)["call_1"] == "3"
        assert {"add", "two_add"} <= {tool.name for tool in provider.requests[0].tools}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_tool_list_is_cached_until_the_server_says_it_changed(
    mode: str, server: MCPServerStdio, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "auto" speaks 2026-07-28 with this server (aniki listens for changes); "legacy" the
    # 2025-11-25 handshake (the server sends them unasked).
    monkeypatch.setattr(Link, "mode", mode)
    provider = MockProvider()
    provider.enqueue_response(tool_calls=[call("listings")])
    provider.enqueue_response(tool_calls=[call("grow", id="call_2")])
    provider.enqueue_response(content="grown")
    provider.enqueue_response(tool_calls=[call("extra", {"word": "ab"}, "call_3")])
    provider.enqueue_response(tool_calls=[call("listings", id="call_4")])
    provider.enqueue_response(content="done")
    agent = Agent("A", model="m", provider=provider, mcp_servers=[server])
    first = await Runner().run(agent, message="one")
    assert server._link is not None and server._link.client is not None
    assert (server._link.client.protocol_version >= "2026") == (mode == "auto")
    assert tool_messages(first.messages)["call_1"] == "1"
    assert all("extra" not in {t.name for t in request.tools} for request in provider.requests)
    await asyncio.sleep(0.2)  # the notification comes on its own
    second = await Runner().run(agent, message="two")
    assert "extra" in {tool.name for tool in provider.requests[-1].tools}
    answers = tool_messages(second.messages)
    assert answers["call_3"] == "abab"
    assert answers["call_4"] == "2"  # listed twice in all: at the start, after the change


async def test_without_the_cache_every_run_lists_the_tools() -> None:
    async with stdio(cache_tools=False) as server:
        for _ in range(3):
            await server.list_tools()
        tools = {tool.name: tool for tool in await server.list_tools()}
        assert await tools["listings"]() == "4"


def test_run_sync_keeps_the_server_and_another_loop_can_close_it() -> None:
    server = stdio()
    agent = Agent(
        "A",
        model="m",
        provider=calling([call("pid")], [call("pid", id="call_2")]),
        mcp_servers=[server],
    )
    first = Runner().run_sync(agent, message="one")
    second = Runner().run_sync(agent, message="two")
    pid = int(tool_messages(first.messages)["call_1"])
    assert int(tool_messages(second.messages)["call_2"]) == pid
    asyncio.run(server.close())  # the connection lives on run_sync's loop
    assert wait_gone(pid)


EXITS = {
    "run_sync": """
        result = Runner().run_sync(agent, message="go")
        print(result.messages[2].content, flush=True)
    """,
    "asyncio.run": """
        result = asyncio.run(Runner().run(agent, message="go"))
        print(result.messages[2].content, flush=True)
    """,
    "killed": """
        result = Runner().run_sync(agent, message="go")
        print(result.messages[2].content, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """,
}


@pytest.mark.parametrize("how", sorted(EXITS))
@pytest.mark.parametrize("stubborn", [False, True], ids=["polite", "stubborn"])
def test_no_server_outlives_the_python_process(how: str, stubborn: bool) -> None:
    flags = ', "--stubborn"' if stubborn else ""
    script = textwrap.dedent(
        f"""
        import asyncio, os, signal, sys
        from aniki import Agent, Runner, ToolCall
        from aniki.mcp import MCPServerStdio
        from aniki.testing import MockProvider

        provider = MockProvider()
        provider.enqueue_response(tool_calls=[ToolCall("c1", "pid", "{{}}")])
        provider.enqueue_response(content="done")
        server = MCPServerStdio(sys.executable, [{str(SERVER)!r}{flags}])
        agent = Agent("A", model="m", provider=provider, mcp_servers=[server])
        """
    ) + textwrap.dedent(EXITS[how])
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    pid = int(done.stdout.split()[0])
    assert wait_gone(pid), f"server {pid} outlived {how}"
