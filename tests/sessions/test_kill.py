"""kill -9 during appends: a real child process is killed while it writes (SQLite and file).

Every append the child acknowledged (printed after the call returned) must be stored, with
nothing torn or half-applied, and the store must take new writes afterwards.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from aniki import Message
from aniki.sessions import FileSession, SQLiteSession

CHILD = Path(__file__).with_name("_kill_child.py")
_spec = importlib.util.spec_from_file_location("_kill_child", CHILD)
assert _spec is not None and _spec.loader is not None
_child = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_child)

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")


def _open(kind: str, location: Path) -> Any:
    return (
        SQLiteSession("victim", location) if kind == "sqlite" else FileSession("victim", location)
    )


def _run_and_kill(
    kind: str, location: Path, durability: str, acks: int, *, huge: bool = False, delay: float = 0
) -> int:
    """Run the child; kill -9 it ``delay`` s after its ``acks``-th append. The last index acked."""
    child = subprocess.Popen(
        [sys.executable, str(CHILD), kind, str(location), durability, *(["huge"] if huge else [])],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stderr is not None
    acked = -1
    try:
        first = child.stdout.readline()
        assert first == "ready\n", f"child failed to start: {first!r} {child.stderr.read()}"
        while acked < acks - 1:
            line = child.stdout.readline()
            assert line.endswith("\n"), f"child died early: {child.stderr.read()}"
            acked = int(line)
        time.sleep(delay)  # varies where the kill lands; nothing asserts on time
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
        for line in child.stdout:  # acknowledged before the kill, still in the pipe
            if line.endswith("\n"):
                acked = int(line)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    return acked


def _check_history(history: tuple[Message, ...], acked: int, *, huge: bool = False) -> int:
    """Assert the history is whole appends 0..n in order; return n."""
    position, index = 0, 0
    while position < len(history):
        size = 3 if index % 2 else 1
        group = [m.content for m in history[position : position + size]]
        assert group == [_child.content(index, part, huge) for part in range(size)], (
            f"append {index} is torn, partial or out of order"
        )
        position, index = position + size, index + 1
    last = index - 1
    assert last >= acked, f"acknowledged append {acked} was lost (stored up to {last})"
    assert last <= acked + 1  # at most the one in flight when the kill came
    return last


@pytest.mark.parametrize(
    ("kind", "durability", "acks"),
    [
        ("sqlite", "normal", 25),
        ("sqlite", "normal", 61),
        ("sqlite", "off", 40),
        ("sqlite", "full", 12),
        ("file", "normal", 25),
        ("file", "normal", 61),
        ("file", "full", 12),
    ],
)
def test_kill_9_loses_no_acknowledged_append_and_tears_nothing(
    tmp_path: Path, kind: str, durability: str, acks: int
) -> None:
    location = tmp_path / ("chat.db" if kind == "sqlite" else "sessions")
    acked = _run_and_kill(kind, location, durability, acks)
    last = _check_history(_open(kind, location).get_messages(), acked)

    survivor = _open(kind, location)
    survivor.add_messages(
        [Message(role="user", content="after"), Message(role="user", content="the crash")]
    )
    history = _open(kind, location).get_messages()
    assert _check_history(history[:-2], acked) == last
    assert [m.content for m in history[-2:]] == ["after", "the crash"]
    if kind == "file":
        last_line = survivor.path.read_bytes().split(b"\n")[-2]
        assert [m["content"] for m in json.loads(last_line)] == ["after", "the crash"]


@pytest.mark.parametrize("kind", ["sqlite", "file"])
def test_kill_9_in_the_middle_of_a_huge_write_leaves_no_torn_record(
    tmp_path: Path, kind: str
) -> None:
    # Linux stops a large write() at a page boundary on SIGKILL, leaving a torn line in a
    # session file. Several kill points are tried; each must recover cleanly.
    for attempt in range(3):
        location = tmp_path / f"{attempt}" / ("chat.db" if kind == "sqlite" else "sessions")
        location.parent.mkdir()
        acked = _run_and_kill(kind, location, "normal", 2, huge=True, delay=0.004 * attempt)
        _check_history(_open(kind, location).get_messages(), acked, huge=True)
        _open(kind, location).add_message(Message(role="user", content="after"))
        history = _open(kind, location).get_messages()
        assert history[-1].content == "after"
        _check_history(history[:-1], acked, huge=True)
