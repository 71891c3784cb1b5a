"""What ``MCPServerStdio`` runs (POSIX): a small process that starts the server and stands
between it and aniki, so that no server outlives the process that started it.

    python -I -S _watchdog.py PARENT_PID MAX_BYTES COMMAND [ARG ...]

It is started in a process group of its own (the SDK's ``start_new_session``), and the server
it starts is in that group, as are the processes the server starts. It:

- kills the whole group (SIGKILL) when its parent, the process aniki runs in, is gone: a
  thread looks at the parent's PID ten times a second (the parent's end closes no pipe that
  a server busy in a synchronous tool would read, so it would outlive a ``kill -9``);
- passes the server's output on line by line (one line is one JSON-RPC message), each cut
  to ``MAX_BYTES`` of strings while it is read (``_clip.py``), so that a huge result costs
  what the cap keeps, here and in aniki; a line over the cap and its slack even outside
  strings is dropped, with a line on stderr;
- on SIGTERM (aniki ending the group), gives the server :data:`_GRACE` seconds to exit,
  then kills it; it exits only once the server has (so that aniki, waiting for this
  process, knows the server is gone);
- when the server exits, asks what it left in the group to end (SIGTERM), and exits with the
  server's status.

The server reads aniki's pipe as its stdin directly and writes its stderr where this does.
The standard library only, and no import of aniki: it runs in a bare interpreter.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

_PARENT_POLL = 0.1
"""Seconds between two looks at the parent's PID."""

_GRACE = 1.5
"""Seconds the server has to exit after SIGTERM (aniki kills the group 2 s after it)."""

_DRAIN = 1.0
"""Seconds the server's last output has to be passed on after it exits."""

_READ = 1 << 16


def _load_clip() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "_aniki_clip", Path(__file__).with_name("_clip.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _kill_group() -> None:
    os.killpg(os.getpgrp(), signal.SIGKILL)


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(_PARENT_POLL)
    _kill_group()


def _later(seconds: float, work: Any) -> None:
    timer = threading.Timer(seconds, work)
    timer.daemon = True
    timer.start()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _relay(source: int, limit: int, clip: Any) -> None:
    """Pass the server's output lines on, each cut to ``limit`` bytes of strings."""
    line: list[bytes] | None = []  # None: dropping the rest of a line over the slack
    cutter = clip.Clip(limit)
    while chunk := os.read(source, _READ):
        pieces = chunk.split(b"\n")
        for index, piece in enumerate(pieces):
            ends = index < len(pieces) - 1
            if line is not None:
                try:
                    line.append(cutter.feed(piece))
                except clip.Overflow:
                    line = None
                    print(
                        f"aniki: a message from the MCP server kept over {limit + clip.SLACK:,} "
                        "bytes outside long strings; it was dropped",
                        file=sys.stderr,
                    )
            if ends:
                if line is not None:
                    line.append(b"\n")
                    _write_all(1, b"".join(line))
                line, cutter = [], clip.Clip(limit)


def _relaying(source: int, limit: int, clip: Any) -> None:
    try:
        _relay(source, limit, clip)
    except BrokenPipeError:  # aniki closed its end: it is done with the server
        _kill_group()


def main(argv: list[str]) -> int:
    parent, limit, command = int(argv[0]), int(argv[1]), argv[2:]
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    clip = _load_clip()
    try:
        server = subprocess.Popen(command, stdout=subprocess.PIPE)
    except OSError as exc:
        print(f"aniki: could not start the MCP server {command[0]!r}: {exc}", file=sys.stderr)
        return 127
    signal.signal(signal.SIGTERM, lambda *_: _later(_GRACE, server.kill))
    quiet = os.open(os.devnull, os.O_RDWR)
    os.dup2(quiet, 0)  # only the server reads aniki's pipe
    assert server.stdout is not None
    relay = threading.Thread(target=_relaying, args=(server.stdout.fileno(), limit, clip))
    relay.daemon = True
    relay.start()
    status = server.wait()  # not the end of its output: a child of the server may hold it
    relay.join(_DRAIN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.killpg(os.getpgrp(), signal.SIGTERM)  # what the server left behind
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
