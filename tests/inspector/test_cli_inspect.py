"""``aniki inspect`` as a user runs it: a process that serves the page until Ctrl-C."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from aniki import Message
from aniki.sessions import SQLiteSession

pytest.importorskip("starlette", reason="the inspector needs the inspect extra")


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "aniki", "inspect", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_serves_until_interrupted(tmp_path: Path) -> None:
    with SQLiteSession("chat-1", tmp_path / "chats.db") as session:
        session.add_message(Message("user", "hello there"))
    url = f"sqlite:///{tmp_path / 'chats.db'}"
    process = start(url, "--port", "0")
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = re.search(r"at (http://127\.0\.0\.1:\d+/) \(Ctrl-C to stop\)", line)
        assert found, line
        with urllib.request.urlopen(found.group(1) + "session?id=chat-1", timeout=30) as page:
            assert "hello there" in page.read().decode()
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "Traceback" not in err


def test_a_taken_port_and_a_missing_store_are_said_plainly(tmp_path: Path) -> None:
    with SQLiteSession("chat-1", tmp_path / "chats.db") as session:
        session.add_message(Message("user", "hello"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        process = start(f"sqlite:///{tmp_path / 'chats.db'}", "--port", port)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 2
    assert f"port {port} on 127.0.0.1 is taken" in err and "--port" in err
    assert "Traceback" not in err
    process = start(f"sqlite:///{tmp_path / 'nothing.db'}", "--port", "0")
    _, err = process.communicate(timeout=60)
    assert process.returncode == 2 and "there is no store at" in err
    assert not (tmp_path / "nothing.db").exists()
