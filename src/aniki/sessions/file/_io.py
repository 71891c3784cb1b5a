"""File helpers for :mod:`aniki.sessions.file.session`: locks, whole writes, torn tails,
meta files."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from ...errors import CorruptStoreError, StoreUnavailableError, UserError
from .._codec import decode_messages
from ..base import SessionInfo
from ._format import DATA_SUFFIX, HEADER_READ, file_stem, header_id

T = TypeVar("T")

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "DEFAULT_TIMEOUT",
    "EPOCH",
    "describe",
    "end_of_records",
    "flock",
    "fsync_directory",
    "last_records",
    "lock",
    "read_meta",
    "replace_file",
    "require_locks",
    "unlock",
    "write_at",
]


def require_locks() -> None:
    """Raise :class:`~aniki.UserError` where POSIX file locks are missing (Windows)."""
    if fcntl is None:  # pragma: no cover - Windows
        raise UserError("FileSession needs POSIX file locks; on Windows use SQLiteSession")


DEFAULT_TIMEOUT = 5.0
"""Seconds a call waits for another process's lock on a session file."""

_POLL_CAP = 0.01  # the longest sleep between two tries of a lock held by another process


def lock(fd: int, *, exclusive: bool, timeout: float, store: str) -> None:
    """Take a shared or exclusive ``flock`` on ``fd``, waiting at most ``timeout`` seconds.

    ``flock`` itself waits without limit, and a process that stopped while holding the lock
    (suspended, or hung) would hold every caller; so a lock that is not free at once is
    tried again with short sleeps until the time is up, then refused with a
    :class:`~aniki.StoreUnavailableError` naming ``timeout=``.
    """
    mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
    try:
        fcntl.flock(fd, mode)  # the common case: free at once, one call
        return
    except BlockingIOError:
        pass
    deadline = time.monotonic() + timeout
    delay = 0.0005
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise StoreUnavailableError(
                f"another process has held the session file's lock for {timeout:g} s; "
                f"wait longer with timeout= (now {timeout:g} s)",
                store=store,
            )
        time.sleep(min(delay, left))
        delay = min(delay * 2, _POLL_CAP)
        try:
            fcntl.flock(fd, mode)
            return
        except BlockingIOError:
            continue


def unlock(fd: int) -> None:
    """Release the ``flock`` on ``fd``."""
    fcntl.flock(fd, fcntl.LOCK_UN)


@contextmanager
def flock(fd: int, *, exclusive: bool, timeout: float, store: str) -> Iterator[None]:
    """Hold a shared or exclusive ``flock`` on ``fd`` (see :func:`lock` for the wait)."""
    lock(fd, exclusive=exclusive, timeout=timeout, store=store)
    try:
        yield
    finally:
        unlock(fd)


def end_of_records(fd: int, start: int) -> int:
    """Where the next record goes: the end of the last complete line (a torn one is cut)."""
    size = os.fstat(fd).st_size
    if size <= start or os.pread(fd, 1, size - 1) == b"\n":
        return max(size, start)
    position = size
    while position > start:
        chunk_start = max(start, position - 65536)
        newline = os.pread(fd, position - chunk_start, chunk_start).rfind(b"\n")
        if newline >= 0:
            position = chunk_start + newline + 1
            break
        position = chunk_start
    os.ftruncate(fd, position)
    return position


def last_records(
    fd: int, start: int, want: int, decode: Callable[[bytes], Sequence[T]], *, chunk: int = 65536
) -> list[T]:
    """The items of the last complete lines after ``start``, read backwards until there are
    at least ``want`` of them (or the lines run out), oldest first; a torn last line is not
    a line. ``decode`` turns one line into its items (a record may hold several)."""
    position = os.fstat(fd).st_size
    pending = b""  # read, not yet split: the head of a line whose start is further back
    torn = True  # until the last newline is found, what was read is a torn line
    lines: list[Sequence[T]] = []  # newest first
    found = 0
    while position > start and found < want:
        low = max(start, position - chunk)
        pending = os.pread(fd, position - low, low) + pending
        position = low
        if torn:
            cut = pending.rfind(b"\n")
            if cut < 0:
                continue
            pending, torn = pending[:cut], False
        while found < want and pending:
            cut = pending.rfind(b"\n")
            if cut < 0 and position > start:
                break  # the line starts in a chunk not read yet
            line, pending = pending[cut + 1 :], pending[: max(cut, 0)]
            items = decode(line)
            lines.append(items)
            found += len(items)
    return [item for items in reversed(lines) for item in items]


def write_at(fd: int, data: bytes, offset: int) -> None:
    """Write all of ``data`` at ``offset`` (normally one call); on failure cut it off again."""
    view = memoryview(data)
    position = offset
    try:
        while view:
            written = os.pwrite(fd, view, position)
            view, position = view[written:], position + written
    except BaseException:
        with suppress(OSError):
            os.ftruncate(fd, offset)
        raise


def fsync_directory(directory: Path) -> None:
    """Make a file's creation or rename in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_META_HINT = (
    "no write is made to it. It holds only derived state (a summary, a window's cut), which "
    "is made again: move it aside or delete it"
)


def read_meta(path: Path, generation: int, *, store: str) -> dict[str, Any]:
    """The derived-state values in the meta file ``path`` for ``generation`` (stale: none)."""
    try:
        document = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except (ValueError, RecursionError) as exc:
        raise CorruptStoreError(
            f"the meta file {path.name} is damaged: it is not valid JSON; {_META_HINT}",
            store=store,
        ) from exc
    if not isinstance(document, dict) or not isinstance(document.get("values"), dict):
        raise CorruptStoreError(
            f"the meta file {path.name} is not an aniki meta file; {_META_HINT}", store=store
        )
    # Written before a clear() that died before deleting it: stale.
    values: dict[str, Any] = document["values"]
    return values if document.get("generation") == generation else {}


def replace_file(path: Path, data: bytes, *, durable: bool) -> None:
    """Replace ``path`` with ``data`` atomically (a temporary file, then a rename)."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with temporary.open("wb") as file:
            file.write(data)
            if durable:
                file.flush()
                os.fsync(file.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    if durable:
        fsync_directory(path.parent)


EPOCH = datetime.fromtimestamp(0, tz=timezone.utc)
"""Sorts a session that has no update time last."""


def describe(path: Path, *, timeout: float = DEFAULT_TIMEOUT) -> SessionInfo | None:
    """What ``list_sessions`` shows of a session file; ``None`` for an empty one.

    Raises the :class:`~aniki.StoreError` that keeps it out of a listing: damaged, foreign,
    newer, named for another session, or unreadable."""
    label = f"file://{path}"
    try:
        with (
            path.open("rb") as file,
            flock(file.fileno(), exclusive=False, timeout=timeout, store=label),
        ):
            data = file.read()
            modified = os.fstat(file.fileno()).st_mtime
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreUnavailableError(f"cannot read the session file ({exc})", store=label) from exc
    session_id = header_id(data[:HEADER_READ], store=label)
    if session_id is None:
        return None
    if path.name != file_stem(session_id) + DATA_SUFFIX:
        raise CorruptStoreError(
            f"the file belongs to session {session_id!r} but is not named for it (copied or "
            f"renamed?); move it out of the directory, or rename it to "
            f"{file_stem(session_id) + DATA_SUFFIX}",
            store=label,
        )
    body = data[data.index(b"\n") + 1 : data.rfind(b"\n") + 1]
    count = 0
    for number, line in enumerate(body.split(b"\n")[:-1], start=2):
        if not line:  # what a read refuses, a listing refuses too
            raise CorruptStoreError(
                f"the session file is damaged: line {number} is empty, which aniki never "
                "writes; repair or delete that line, or restore the file from a backup",
                store=label,
            )
        count += len(decode_messages(line, store=label))
    if not count:
        return None
    return SessionInfo(
        id=session_id,
        message_count=count,
        updated_at=datetime.fromtimestamp(modified, tz=timezone.utc),
    )
