"""Child process of the kill -9 tests.

* ``python _kill_child.py sqlite|file LOCATION DURABILITY [huge]`` appends until it is
  killed, acknowledging each commit. Prints ``ready``, then the index of every append once
  it has returned (so it is acknowledged), flushing each line. Odd indexes are batches of
  three messages; every seventh append carries 300 kB of content, and with ``huge`` every
  message carries 4 MB, so that a kill can land in the middle of a single ``write`` (Linux
  then leaves a torn last line).
* ``python _kill_child.py edit DIRECTORY DURABILITY OPERATION STEP`` makes one edit of the
  file session ``victim`` (see :func:`edit`) and kills itself (SIGKILL) just before the
  edit's STEP-th call that may change a file (:data:`CALLS`); it exits 0 when the edit ends
  first. Killing at every step in turn puts a crash between every two of its writes.
* ``python _kill_child.py edits DIRECTORY DURABILITY`` runs :func:`cycle` over and over, and
  prints the number of every step once it has returned, until it is killed.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aniki import Message
from aniki.sessions import FileSession, SQLiteSession
from aniki.sessions.file import _timeline

CALLS = (
    "open",
    "pwrite",
    "write",
    "ftruncate",
    "fchmod",
    "fsync",
    "copy_file_range",
    "replace",
    "rename",
    "link",
    "unlink",
    "mkdir",
)
"""The ``os`` functions whose calls are the steps of an edit (every write to a file, and
every change to the directory, goes through one of them)."""

REPLACEMENT = [Message("user", "imported"), Message("assistant", "whole")]
"""What the edit ``replace`` makes the history."""

UPTO = 4
"""The edit ``fork`` copies the history through the message at this position."""


def content(index: int, part: int, huge: bool = False) -> str:
    """The content of message ``part`` of append ``index`` (the parent checks it)."""
    if huge:
        return f"{index}:{part}:" + "x" * 4_000_000
    filler = "\u00e9x" * 150_000 if index % 7 == 0 else ""
    return f"{index}:{part}:{filler}"


def main() -> None:
    kind, location, durability = sys.argv[1:4]
    huge = sys.argv[4:] == ["huge"]
    if kind == "sqlite":
        session = SQLiteSession("victim", location, durability=durability)  # type: ignore[arg-type]
    else:
        session = FileSession("victim", location, durability=durability)  # type: ignore[arg-type]
    print("ready", flush=True)
    index = 0
    while True:
        if index % 2:
            session.add_messages(
                [Message(role="user", content=content(index, part, huge)) for part in range(3)]
            )
        else:
            session.add_message(Message(role="assistant", content=content(index, 0, huge)))
        print(index, flush=True)
        index += 1


def edit(directory: str, durability: Any, operation: str, step: int) -> None:
    """One ``undo()``, ``fork("copy", upto=...)`` or ``_replace(REPLACEMENT)`` of the session
    ``victim``, killed just before its ``step``-th call of :data:`CALLS`."""
    session = FileSession("victim", directory, durability=durability)
    upto = session.get_messages()[UPTO].id
    calls = 0

    def killing(real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == step:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)

        return call

    session.close()  # the edit opens the file again: a step too
    _steady(Path(directory))
    for name in CALLS:
        if hasattr(os, name):
            setattr(os, name, killing(getattr(os, name)))
    if operation == "undo":
        session.undo()
    elif operation == "fork":
        session.fork("copy", upto=upto)
    else:
        session._replace(REPLACEMENT)


def _steady(directory: Path) -> None:
    """Make the edit's calls the same in every run, so that step N lands on the same call
    each time: the folders of the listing index that a marker needs made depend on the
    clock. Wait until 10 ms into a tick later than every file's time (the marker's folder is
    then new, and the kernel's clock, a few ms behind at most, stamps the edit's writes in
    that tick too, as it takes far less than the 60 ms left), and make the folder of that
    tick's 100 seconds, as any write in them would have (else one made just before a
    100-second boundary would need one more ``mkdir``)."""
    newest = max(path.stat().st_mtime_ns for path in directory.glob("*.json*")) // _timeline.TICK
    while True:
        now = time.time_ns()
        into = now % _timeline.TICK
        if now // _timeline.TICK > newest and 10_000_000 <= into <= 40_000_000:
            break
        wait = (10_000_000 - into) % _timeline.TICK or _timeline.TICK
        time.sleep(wait / 1e9)
    leaf = _timeline.marker(directory, "victim", now // _timeline.TICK).parent
    leaf.parent.mkdir(parents=True, exist_ok=True)


def cycle_content(number: int, part: str) -> str:
    """The content of a message of :func:`cycle` (the parent checks it); the first message
    of each round carries 200 kB, so that a new file takes a while to write."""
    return f"{number}{part}" + ("x" * 200_000 if part == "a" else "")


def cycle(session: FileSession, number: int, done: Callable[[], None]) -> None:
    """One round of the ``edits`` child: 6 steps, each acknowledged with ``done()``."""
    text = cycle_content
    session.add_messages(
        [
            Message("user", text(number, "a")),
            Message("assistant", text(number, "b")),
            Message("user", text(number, "c")),
            Message("assistant", text(number, "d")),
        ]
    )
    done()
    session.undo()  # c and d, out of the batch: a new file
    done()
    session.add_message(Message("user", text(number, "e")))
    done()
    session.add_message(Message("assistant", text(number, "f")))
    done()
    session.undo()  # e and f: a cut
    done()
    session.fork(f"fork-{number}", upto=session.get_messages()[-2].id)  # through a, half a batch
    done()


def edits(directory: str, durability: Any) -> None:
    session = FileSession("victim", directory, durability=durability)
    print("ready", flush=True)
    steps = 0

    def done() -> None:
        nonlocal steps
        print(steps, flush=True)
        steps += 1

    number = 0
    while True:
        cycle(session, number, done)
        number += 1


if __name__ == "__main__":
    if sys.argv[1] == "edit":
        edit(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    elif sys.argv[1] == "edits":
        edits(sys.argv[2], sys.argv[3])
    else:
        main()
