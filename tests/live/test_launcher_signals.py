"""``scripts/live_server.py serve`` with the real llama.cpp server: it listens on the port
asked for, and a SIGTERM or SIGINT leaves no server process behind, also when a shell
started it in the background (which starts it with SIGINT ignored). The server it starts
lets concurrent streams finish."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .helpers import LAUNCHER_PATH, ON_CI, live_server


@pytest.fixture(scope="module")
def runtime() -> Any:
    try:
        return live_server.find_runtime()
    except live_server.LiveUnavailable as exc:
        if ON_CI:
            pytest.fail(f"{exc} (CI=true: the live tier must run; scripts/test.sh sets it up)")
        pytest.skip(str(exc))


def _state(pid: int) -> str | None:
    """The process's state letter, or None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[0]


def _alive(pid: int) -> bool:
    return _state(pid) not in (None, "Z")


def _llama_servers(port: int) -> list[int]:
    """The pids of llama.cpp servers listening on ``port``, found by their command line."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ours = b"llama_cpp.server" in argv and b"--port" in argv and str(port).encode() in argv
        if ours and _alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def _text(path: Path) -> str:
    """The file's text; empty until the shell has made it."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def _wait(condition: Any, seconds: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {seconds:.0f} s\n{_text(log)[-3000:]}")
        time.sleep(0.1)


class Background:
    """``serve --port PORT`` started by a shell in the background, as ``... &`` does."""

    def __init__(self, tmp_path: Path, port: int) -> None:
        self.port = port
        self.output = tmp_path / "serve.out"
        self.shell = subprocess.Popen(
            ["bash", "-c",
             '"$0" "$1" serve --port "$2" --log "$3" >"$4" 2>&1 & echo $!; wait $!',
             sys.executable, str(LAUNCHER_PATH), str(port), str(tmp_path / "server.log"),
             str(self.output)],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )  # fmt: skip
        assert self.shell.stdout is not None
        self.pid = int(self.shell.stdout.readline())

    def wait_serving(self) -> None:
        _wait(
            lambda: "serving" in _text(self.output) or not _alive(self.pid),
            180,
            "serve did not say it was serving",
            self.output,
        )
        assert _alive(self.pid), self.output.read_text()

    def cleanup(self) -> None:
        for pid in [self.pid, *_llama_servers(self.port)]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        self.shell.wait(30)


@pytest.fixture
def background(runtime: Any, tmp_path: Path) -> Iterator[Background]:
    started = Background(tmp_path, live_server.free_port())
    try:
        yield started
    finally:
        started.cleanup()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_a_backgrounded_serve_stops_its_server(
    background: Background, signum: signal.Signals
) -> None:
    background.wait_serving()
    models = f"http://127.0.0.1:{background.port}/v1/models"
    with urllib.request.urlopen(models, timeout=30) as answer:  # --port is honoured
        assert answer.status == 200
    [server] = _llama_servers(background.port)
    assert re.search(rf"127\.0\.0\.1:{background.port}/v1", background.output.read_text())

    os.kill(background.pid, signum)
    _wait(
        lambda: not _alive(background.pid) and not _alive(server),
        60,
        f"serve and its llama.cpp server did not both exit after {signum.name}",
        background.output,
    )
    assert background.shell.wait(30) == 0, background.output.read_text()
    assert _llama_servers(background.port) == []
    assert "Traceback" not in background.output.read_text()


def test_a_port_in_use_is_said_without_a_traceback(runtime: Any, tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, str(LAUNCHER_PATH), "serve", "--port", str(port),
             "--log", str(tmp_path / "server.log")],
            capture_output=True,
            text=True,
            timeout=180,
        )  # fmt: skip
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert f"port {port}" in done.stderr
    assert _llama_servers(port) == []


def test_a_bad_port_is_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(LAUNCHER_PATH), "serve", "--port", "70000"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--port" in done.stderr and "Traceback" not in done.stderr


async def test_concurrent_streams_each_finish(llama: Any) -> None:
    """llama-cpp-python's server ends a stream early (a bare ``[DONE]``) when another request
    waits, unless ``interrupt_requests`` is off; the live tier turns it off."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=llama.base_url, api_key="none", max_retries=0, timeout=120)

    async def stream(number: int) -> tuple[str | None, str]:
        finish, text = None, ""
        chunks = await client.chat.completions.create(
            model=live_server.MODEL_NAME,
            messages=[{"role": "user", "content": f"Count from {number} upwards."}],
            max_tokens=24,
            temperature=0,
            stream=True,
        )
        async for chunk in chunks:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
        return finish, text

    try:
        results = await asyncio.wait_for(asyncio.gather(*(stream(n) for n in range(3))), 300)
    finally:
        await client.close()
    assert [finish for finish, _ in results] == ["length"] * 3, results
