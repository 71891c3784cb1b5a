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

from aniki import Message, Usage
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


def test_an_unknown_model_for_prices_is_refused_before_serving(tmp_path: Path) -> None:
    with SQLiteSession("chat-1", tmp_path / "chats.db") as session:
        session.add_message(Message("user", "hello"))
    process = start(f"sqlite:///{tmp_path / 'chats.db'}", "--port", "0", "--prices", "gpt-9")
    out, err = process.communicate(timeout=60)
    assert process.returncode == 2
    assert "--prices" in err and "no published prices known for 'gpt-9'" in err
    assert "gpt-4o-mini" in err and "claude-sonnet-4-5" in err  # what to pass instead
    assert "inspecting" not in out and "Traceback" not in err


def test_prices_price_every_turn(tmp_path: Path) -> None:
    usage = Usage(input_tokens=1_000, output_tokens=100, requests=1)
    with SQLiteSession("chat-1", tmp_path / "chats.db") as session:
        session.add_messages(
            [Message("user", "hello"), Message("assistant", "hi", model="local", usage=usage)]
        )
    process = start(f"sqlite:///{tmp_path / 'chats.db'}", "--port", "0", "--prices", "gpt-5")
    try:
        assert process.stdout is not None
        found = re.search(r"at (http://127\.0\.0\.1:\d+/) ", process.stdout.readline())
        assert found
        with urllib.request.urlopen(found.group(1) + "usage?id=chat-1", timeout=30) as page:
            html = page.read().decode()
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
    # gpt-5: 1,000 in x 1.25 + 100 out x 10 = 1,250 + 1,000 = 2,250 millionths of a dollar
    assert '<span class="cost-total">$0.00225</span>' in html
