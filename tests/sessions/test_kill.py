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

from aniki import Message, UserError
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


# --- kill -9 during fork, undo and import of a session file ----------------------------------

CLAIM = "aniki.summary.claim"
BEFORE = ["q1", "r1", "a", "b", "c", "d"]
UNDONE = ["q1", "r1", "a", "b"]
COPIED = BEFORE[: _child.UPTO + 1]
IMPORTED = [message.content for message in _child.REPLACEMENT]


def _texts(messages: Any) -> list[str]:
    return [message.content for message in messages]


def _scene(directory: Path, *, batch: bool, cleared_target: bool) -> list[FileSession]:
    """The session ``victim`` (and ``copy``, cleared) with live instances holding them: one
    whose last call was an append (so its next one would take the fast path), one that
    read the history, and one that read the cleared target."""
    writer = FileSession("victim", directory)
    writer.add_message(Message("user", "q1"))
    writer.add_message(Message("assistant", "r1"))
    if batch:
        writer.add_messages(
            [
                Message("user", "a"),
                Message("assistant", "b"),
                Message("user", "c"),
                Message("assistant", "d"),
            ]
        )
    else:
        writer.add_messages([Message("user", "a"), Message("assistant", "b")])
        writer.add_message(Message("user", "c"))
        writer.add_message(Message("assistant", "d"))
    writer.set_meta("summary", {"covers": 2})
    writer.set_meta(CLAIM, {"owner": "victim"})
    reader = FileSession("victim", directory)
    assert _texts(reader.get_messages()) == BEFORE
    live = [writer, reader]
    if cleared_target:
        target = FileSession("copy", directory)
        target.add_message(Message("user", "x"))
        target.clear()
        target.set_meta("old", 1)
        assert target.get_messages() == ()
        live.append(target)
    return live


def _digest(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


def _grow(path: Path, size: int) -> str:
    """Append a record (as any writer might) that brings ``path`` back to ``size`` bytes;
    its content."""
    frame = '{"role":"user","content":""}\n'
    missing = size - path.stat().st_size
    assert missing > len(frame)
    content = "p" * (missing - len(frame))
    with path.open("ab") as file:
        file.write(frame.replace('""', f'"{content}"').encode())
    assert path.stat().st_size == size
    return content


def _check_edit(directory: Path, operation: str, live: list[FileSession], source: bytes) -> str:
    """Assert the edit is wholly done or wholly absent, and every instance agrees; which."""
    # .index: the store's listing index (see aniki.sessions.file._timeline)
    names = {p.name for p in directory.iterdir() if not p.name.endswith(".tmp")} - {".index"}
    assert names <= {"victim.jsonl", "victim.meta.json", "copy.jsonl", "copy.meta.json"}
    victim = FileSession("victim", directory)
    history = _texts(victim.get_messages())
    if operation == "undo":
        assert history in (BEFORE, UNDONE)
        state = "done" if history == UNDONE else "absent"
        assert victim.get_meta("summary") == {"covers": 2}  # kept either way
        assert victim.get_meta(CLAIM) == {"owner": "victim"}
    elif operation == "replace":
        assert history in (BEFORE, IMPORTED)
        state = "done" if history == IMPORTED else "absent"
        assert victim.get_meta("summary") == (None if state == "done" else {"covers": 2})
    else:
        assert history == BEFORE and _digest(directory / "victim.jsonl") == source
        copy = FileSession("copy", directory)
        copied = _texts(copy.get_messages())
        assert copied in ([], COPIED)
        state = "done" if copied == COPIED else "absent"
        assert copy.get_meta("summary") == ({"covers": 2} if state == "done" else None)
        assert copy.get_meta(CLAIM) is None
        if state == "done":
            assert copy.get_meta("old") is None
        for instance in live[2:]:  # the cleared target's instance
            assert _texts(instance.get_messages()) == copied
        if state == "absent":  # the store takes the fork now
            FileSession("victim", directory).fork("copy", upto=victim.get_messages()[4].id)
            assert _texts(FileSession("copy", directory).get_messages()) == COPIED
        else:
            with pytest.raises(UserError):
                FileSession("victim", directory).fork("copy")
    if operation == "undo" and state == "done":
        # Another writer brings the file back to the size it had: then only the generation
        # tells an instance that cached the old history that it changed.
        history.append(_grow(directory / "victim.jsonl", len(source)))
    writer, reader = live[:2]
    assert _texts(reader.get_messages()) == history == _texts(victim.get_messages())
    writer.add_message(Message("user", "after"))  # lands in the file at the path
    assert _texts(FileSession("victim", directory).get_messages()) == [*history, "after"]
    assert _texts(reader.get_messages()) == [*history, "after"]
    return state


@pytest.mark.parametrize(
    ("operation", "batch", "durability"),
    [
        ("undo", False, "normal"),
        ("undo", False, "full"),
        ("undo", True, "normal"),
        ("undo", True, "full"),
        ("fork", True, "normal"),
        ("fork", True, "full"),
        ("fork-cleared", True, "normal"),
        ("replace", True, "normal"),
    ],
)
def test_kill_9_at_every_step_of_an_edit_leaves_it_whole_or_absent(
    tmp_path: Path, operation: str, batch: bool, durability: str
) -> None:
    # The child kills itself just before its first, second, ... call that may change a file,
    # until the edit completes: a crash lands between every two of its writes.
    seen: list[str] = []
    for step in range(1, 200):
        directory = tmp_path / f"step-{step}"
        live = _scene(directory, batch=batch, cleared_target=operation == "fork-cleared")
        source = _digest(directory / "victim.jsonl")
        child = subprocess.run(
            [
                sys.executable,
                str(CHILD),
                "edit",
                str(directory),
                durability,
                operation.removesuffix("-cleared"),
                str(step),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert child.returncode in (0, -signal.SIGKILL), child.stderr
        seen.append(_check_edit(directory, operation.removesuffix("-cleared"), live, source))
        for instance in live:
            instance.close()
        if child.returncode == 0:
            break
    else:
        raise AssertionError("the edit never completed")
    assert seen[-1] == "done" and seen[0] == "absent"
    # The commit is one step: absent until it, done from it on.
    assert seen == sorted(seen)  # "absent" < "done"


def _cycle_state(steps: int) -> tuple[list[str], list[list[str]]]:
    """The victim's history and the forks after ``steps`` steps of ``_child.cycle``."""
    text = _child.cycle_content
    rounds, step = divmod(steps, 6)
    base = [text(i, part) for i in range(rounds) for part in "ab"]
    current = [text(rounds, part) for part in ("", "abcd", "ab", "abe", "abef", "ab")[step]]
    forks = [[*base[: 2 * i], text(i, "a")] for i in range(rounds)]
    return base + current, forks


def test_kill_9_while_undoing_forking_and_appending_in_a_loop(tmp_path: Path) -> None:
    # The kill lands wherever it lands (the new files take a while: each round adds 200 kB);
    # the state is the one after the last acknowledged step, or after the one in flight.
    for attempt, acks in enumerate((7, 16, 23, 29, 34)):
        directory = tmp_path / f"attempt-{attempt}"
        watcher = FileSession("victim", directory)
        watcher.set_meta("summary", "kept")
        child = subprocess.Popen(
            [sys.executable, str(CHILD), "edits", str(directory), "normal"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None and child.stderr is not None
        acked = -1
        try:
            assert child.stdout.readline() == "ready\n", child.stderr.read()
            while acked < acks - 1:
                line = child.stdout.readline()
                assert line.endswith("\n"), f"child died early: {child.stderr.read()}"
                acked = int(line)
                if acked == acks // 2:
                    watcher.get_messages()  # a cached history, mid-way
            time.sleep(0.003 * attempt)
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=60)
            for line in child.stdout:
                acked = int(line)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
            child.stdout.close()
            child.stderr.close()
        history = _texts(FileSession("victim", directory).get_messages())
        options = [_cycle_state(acked + 1), _cycle_state(acked + 2)]
        assert history in [state[0] for state in options]
        forks = {
            p.name.removesuffix(".jsonl")
            for p in directory.iterdir()
            if p.name.startswith("fork-") and p.name.endswith(".jsonl")
        }
        for number in range(len(options[1][1])):
            copied = _texts(FileSession(f"fork-{number}", directory).get_messages())
            expected = options[1][1][number]
            if number < len(options[0][1]):
                assert copied == expected, f"fork-{number} is not whole"
            else:
                assert copied in ([], expected), f"fork-{number} is half made"
            if copied:
                assert FileSession(f"fork-{number}", directory).get_meta("summary") == "kept"
        assert forks <= {f"fork-{n}" for n in range(len(options[1][1]))}
        assert FileSession("victim", directory).get_meta("summary") == "kept"
        assert _texts(watcher.get_messages()) == history  # a live instance agrees
        watcher.add_message(Message("user", "after"))
        assert _texts(FileSession("victim", directory).get_messages()) == [*history, "after"]
