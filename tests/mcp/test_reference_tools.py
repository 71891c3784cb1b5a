"""The tools of the official reference servers, as aniki offers and calls them: their schemas
as given (with their ``title``), a tool that needs tasks left out with a logged reason, a tool
named like a handoff refused, huge results cut while they are read, and one call each to
``mcp-server-time``, ``mcp-server-fetch`` and ``mcp-server-git``."""

from __future__ import annotations

import http.server
import json
import logging
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from aniki import Agent, Runner, UserError
from aniki.mcp import MCPServerHTTP, MCPServerStdio
from aniki.testing import MockProvider
from tests.mcp.conftest import HTTPServer, stdio
from tests.mcp.reference import EverythingHTTP, everything_stdio, pypi_server

NOTE = "[cut: the rest was not read: the result is over the 65,536-byte limit (max_result_bytes=)]"


async def test_a_tool_that_needs_tasks_is_left_out_with_a_logged_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="aniki.mcp")
    async with everything_stdio() as server:
        names = {tool.name for tool in await server.list_tools()}
    assert "echo" in names and "simulate-research-query" not in names
    said = [r.getMessage() for r in caplog.records if r.name == "aniki.mcp"]
    assert any("'simulate-research-query' is left out" in line for line in said), said


async def test_a_server_tool_named_like_a_handoff_is_refused() -> None:
    # With this prefix the reference server's "echo" is "transfer_to_echo": the handoff's name.
    server = everything_stdio(tool_prefix="transfer_to_")
    echo = Agent("echo", model="m", provider=MockProvider())
    agent = Agent("A", model="m", provider=MockProvider(), handoffs=[echo], mcp_servers=[server])
    try:
        with pytest.raises(UserError, match=r"two tools named 'transfer_to_echo' .*a handoff"):
            await Runner().run(agent, message="hi")
    finally:
        await server.close()


@pytest.mark.parametrize("kind", ["stdio", "http"])
async def test_a_huge_result_is_cut_while_it_is_read(
    kind: str, request: pytest.FixtureRequest
) -> None:
    if kind == "stdio":
        server: MCPServerStdio | MCPServerHTTP = everything_stdio(max_result_bytes=65_536)
    else:
        reference: EverythingHTTP = request.getfixturevalue("everything_http")
        server = reference.client(max_result_bytes=65_536)
    try:
        tools = {tool.name: tool for tool in await server.list_tools()}
        answer = await tools["echo"](message="é" * 1_000_000)  # 2 MB of text
    finally:
        await server.close()
    assert answer.startswith("Echo: éé") and answer.endswith("\n" + NOTE)
    assert len(answer.encode()) <= 65_536 + len(NOTE) + 1


@pytest.mark.parametrize("kind", ["stdio", "http"])
async def test_a_20_mib_result_costs_what_the_cap_keeps(kind: str) -> None:
    http_server = HTTPServer(token=None)
    if kind == "http":
        http_server.start()
    server = (
        stdio(max_result_bytes=65_536)
        if kind == "stdio"
        else http_server.client(max_result_bytes=65_536)
    )
    try:
        tools = {tool.name: tool for tool in await server.list_tools()}
        started = time.monotonic()
        answer = await tools["big"](size=20 * 1024 * 1024)
        took = time.monotonic() - started
        # The cap is for all the strings of the message (its keys too), so the text keeps a
        # little less than 64 KiB.
        assert answer.startswith("x" * 65_000) and answer.endswith("x\n" + NOTE)
        assert len(answer) <= 65_536 + 1 + len(NOTE)
        assert await tools["add"](a=1, b=2) == "3"  # the connection goes on
    finally:
        await server.close()
        http_server.kill()
    assert took < 15


def test_the_default_cap_is_one_mib() -> None:
    assert MCPServerStdio("x").max_result_bytes == 1024 * 1024
    with pytest.raises(UserError, match="max_result_bytes must be a whole number above 0"):
        MCPServerHTTP("http://127.0.0.1:1/mcp", max_result_bytes=0)


async def test_mcp_server_time_its_schemas_keep_their_title() -> None:
    async with pypi_server("mcp-server-time") as server:
        tools = {tool.name: tool for tool in await server.list_tools()}
        now = json.loads(await tools["get_current_time"](timezone="UTC"))
    assert tools["get_current_time"].parameters["title"] == "get_current_timeArguments"
    assert now["timezone"] == "UTC"


@pytest.fixture
def web_page(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "page.html").write_text(
        "<html><body><h1>Opening hours</h1><p>9 to 5</p></body></html>"
    )

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(tmp_path), **kwargs)  # type: ignore[arg-type]

        def log_message(self, format: str, *args: object) -> None:
            pass

    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{web.server_address[1]}/page.html"
    web.shutdown()
    web.server_close()


async def test_mcp_server_fetch_reads_a_page(web_page: str) -> None:
    async with pypi_server(
        "mcp-server-fetch", "--ignore-robots-txt", "--allow-private-ips"
    ) as server:
        tools = {tool.name: tool for tool in await server.list_tools()}
        page = await tools["fetch"](url=web_page)
    assert "Opening hours" in page and "9 to 5" in page


async def test_mcp_server_git_reads_a_repository(tmp_path: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "notes.txt").write_text("hello\n")
    git("add", "notes.txt")
    git("-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qm", "First notes")
    async with pypi_server("mcp-server-git", "--repository", str(tmp_path)) as server:
        tools = {tool.name: tool for tool in await server.list_tools()}
        log = await tools["git_log"](repo_path=str(tmp_path))
    assert "First notes" in log
