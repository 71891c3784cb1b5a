"""Real MCP servers for the tests: ``server.py`` as a subprocess over stdio, or served over
streamable HTTP by uvicorn on a free loopback port. No mocks."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from aniki.mcp import MCPServerHTTP, MCPServerStdio

SERVER = Path(__file__).with_name("server.py")
TOKEN = "tok-4f1c9a2e77d3"


def stdio(*flags: str, **options: Any) -> MCPServerStdio:
    """``server.py`` run over stdio, with ``flags`` on its command line."""
    return MCPServerStdio(sys.executable, [str(SERVER), *flags], **options)


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):  # reaped meanwhile
        return False


def wait_gone(pid: int, within: float = 12.0) -> bool:
    """Whether process ``pid`` is gone within ``within`` seconds."""
    deadline = time.monotonic() + within
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def read_pids(path: Path, count: int = 1, within: float = 15.0) -> list[int]:
    """The first ``count`` PIDs ``server.py --pid-file path`` wrote, once it has."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if path.exists():
            pids = [int(line) for line in path.read_text().split()]
            if len(pids) >= count:
                return pids[:count]
        time.sleep(0.05)
    raise AssertionError(f"no PID in {path} within {within} s")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class HTTPServer:
    """``server.py --http PORT`` in its own process, restartable on the same port."""

    def __init__(self, token: str | None = TOKEN) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.token = token
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        flags = ["--token", self.token] if self.token else []
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER), "--http", str(self.port), *flags]
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "the HTTP server exited"
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("the HTTP server did not start within 30 s")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def client(self, **options: Any) -> MCPServerHTTP:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
        return MCPServerHTTP(self.url, headers=headers, **options)


@pytest.fixture(scope="module")
def http_server() -> Iterator[HTTPServer]:
    """One HTTP server for a module's tests (which must not break it)."""
    server = HTTPServer()
    server.start()
    yield server
    server.kill()


@pytest.fixture
def own_http_server() -> Iterator[HTTPServer]:
    """An HTTP server for one test, which may kill and restart it."""
    server = HTTPServer()
    server.start()
    yield server
    server.kill()


@pytest.fixture
async def server() -> AsyncIterator[MCPServerStdio]:
    """``server.py`` over stdio, closed after the test."""
    made = stdio()
    yield made
    await made.close()


@pytest.fixture
def everything_http() -> Iterator[Any]:
    """The everything reference server over streamable HTTP, for one test (which may
    restart it); skips when it is not installed (fails under CI)."""
    from tests.mcp.reference import EverythingHTTP

    server = EverythingHTTP()
    server.start()
    yield server
    server.kill()
