"""The package: its names, its import (``import aniki`` never imports ``mcp``), and an agent
with an MCP tool run end to end over a SQLite session, every way a run can be driven."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import aniki.mcp
from aniki import AnikiError, Runner
from aniki.agent import Agent, MCPServer
from aniki.sessions import SQLiteSession
from tests.core.helpers import MODES, drive
from tests.mcp.conftest import stdio
from tests.mcp.test_calls import call, calling, tool_messages


def test_all_is_complete_and_documented() -> None:
    public = {
        name
        for name, value in vars(aniki.mcp).items()
        if not name.startswith("_") and inspect.isclass(value)
    }
    assert sorted(aniki.mcp.__all__) == aniki.mcp.__all__ == sorted(public)
    assert all(inspect.getdoc(getattr(aniki.mcp, name)) for name in aniki.mcp.__all__)
    assert issubclass(aniki.mcp.MCPServerError, AnikiError)


def test_both_servers_are_what_agents_take() -> None:
    stdio_server = aniki.mcp.MCPServerStdio("python", ["server.py"])
    http_server = aniki.mcp.MCPServerHTTP("http://127.0.0.1:1/mcp")
    servers: list[MCPServer] = [stdio_server, http_server]  # what mypy checks
    agent = Agent("A", model="m", mcp_servers=servers)
    assert agent.mcp_servers == (stdio_server, http_server)
    assert [server.name for server in servers] == ["python server.py", "127.0.0.1:1/mcp"]


def test_import_aniki_does_not_import_mcp() -> None:
    code = "import sys, aniki; print(sorted(m for m in sys.modules if m.split('.')[0] == 'mcp'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_without_the_mcp_package_the_error_says_how_to_install_it() -> None:
    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "import aniki\n"
        "try:\n"
        "    import aniki.mcp\n"
        "except aniki.UserError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "aniki.mcp needs the 'mcp' package: pip install 'aniki-sdk[mcp]'"


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"timeout": 0}, "timeout must be a number of seconds above 0"),
        ({"connect_timeout": float("inf")}, "connect_timeout must be a number of seconds"),
        ({"cache_tools": "yes"}, "cache_tools must be True or False"),
        ({"env": {"A": 1}}, "env must map names to string values"),
        ({"name": ""}, "an MCP server's name must be a non-empty string"),
    ],
)
def test_bad_options_are_refused(options: dict[str, object], problem: str) -> None:
    with pytest.raises(aniki.UserError, match=problem):
        aniki.mcp.MCPServerStdio("python", ["server.py"], **options)  # type: ignore[arg-type]


def test_a_bad_url_is_refused_without_showing_its_password() -> None:
    with pytest.raises(aniki.UserError) as caught:
        aniki.mcp.MCPServerHTTP("ftp://me:hunter2-secret@host/mcp")
    assert "hunter2-secret" not in str(caught.value)


@pytest.mark.parametrize("mode", MODES)
async def test_an_mcp_tool_call_end_to_end_over_a_sqlite_session(mode: str, tmp_path: Path) -> None:
    server = stdio()
    try:
        agent = Agent(
            "A",
            model="m",
            provider=calling([call("add", {"a": 19, "b": 23})]),
            mcp_servers=[server],
        )
        session = SQLiteSession("mcp-1", path=str(tmp_path / "chats.db"))
        result = await drive(mode, Runner(), agent, message="19 + 23?", session=session)
        assert result.content == "done"
    finally:
        await server.close()
    stored = SQLiteSession("mcp-1", path=str(tmp_path / "chats.db")).get_messages()
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[1].tool_calls[0].name == "add"
    assert tool_messages(stored) == {"call_1": "42"}
