"""One set-up at a time per cache folder: the lock that ``live_server.py setup`` and
``mcp_servers.py setup`` take, since two test runs may start together. Standard library
only; loaded by path, as the scripts that use it are."""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def held(folder: Path, timeout: float, failed: type[Exception]) -> Iterator[None]:
    """Hold ``folder / "setup.lock"`` (the folder made if missing) for the block; ``failed``,
    saying so, when another process has held it for more than ``timeout`` seconds."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "setup.lock"
    with open(path, "w") as lock:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise failed(
                        f"another set-up held {path} for more than {timeout / 60:.0f} minutes"
                    ) from None
                time.sleep(1)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
