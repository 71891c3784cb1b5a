"""The official MCP reference servers, as ``scripts/mcp_servers.py setup`` installs them (``bash
scripts/test.sh`` runs it): ``@modelcontextprotocol/server-everything`` over stdio and
streamable HTTP, and ``mcp-server-time``, ``-fetch`` and ``-git`` over stdio.

When they are not installed, the tests that need them skip with the reason; under CI
(``CI=true``) they fail instead: CI must run them.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from aniki.mcp import MCPServerHTTP, MCPServerStdio
from tests.mcp.conftest import free_port

ON_CI = os.environ.get("CI") == "true"


def _script() -> ModuleType:
    name = "aniki_mcp_servers"
    if name not in sys.modules:
        path = Path(__file__).parents[2] / "scripts" / "mcp_servers.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


def installed() -> Any:
    """The installed servers (``scripts/mcp_servers.py``'s ``Servers``); skips the test when
    they are not, or fails it under CI."""
    script = _script()
    try:
        return script.find_servers()
    except script.ServersUnavailable as exc:
        if ON_CI:
            pytest.fail(f"{exc} (CI=true: the reference tests must run)")
        pytest.skip(str(exc))


def everything_stdio(**options: Any) -> MCPServerStdio:
    command, *args = installed().everything_stdio
    options.setdefault("name", "everything")
    return MCPServerStdio(command, args, **options)


def pypi_server(name: str, *args: str, **options: Any) -> MCPServerStdio:
    command, *words = installed().pypi(name)
    options.setdefault("name", name)
    return MCPServerStdio(command, [*words, *args], **options)


class EverythingHTTP:
    """The everything server over streamable HTTP on a free loopback port, restartable on
    the same port."""

    def __init__(self) -> None:
        self.command = installed().everything_http
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.command,
            env={**os.environ, "PORT": str(self.port)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            assert self.process.poll() is None, "the everything server exited"
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                assert time.monotonic() < deadline, "the everything server did not start"
                time.sleep(0.05)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def restart(self) -> None:
        self.kill()
        self.start()

    def client(self, **options: Any) -> MCPServerHTTP:
        options.setdefault("name", "everything")
        return MCPServerHTTP(self.url, **options)
