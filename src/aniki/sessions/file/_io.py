"""File helpers of the file store (:mod:`~aniki.sessions.file._file`, ``_edits``, ``_meta``):
locks, whole writes, torn tails, lines read backwards, meta files, and telling that a path
names another file now."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

from ...errors import CorruptStoreError, StoreUnavailableError, UserError

T = TypeVar("T")

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "Replaced",
    "copy_range",
    "end_of_records",
    "flock",
    "fsync_directory",
    "last_records",
    "lines_backwards",
    "load_meta",
    "lock",
    "meta_values",
    "read_meta",
    "read_whole",
    "replace_file",
    "require_locks",
    "same_file",
    "unlock",
    "write_at",
]


def require_locks() -> None:
    """Raise :class:`~aniki.UserError` where POSIX file locks are missing (Windows)."""
    if fcntl is None:  # pragma: no cover - Windows
        raise UserError("FileSession needs POSIX file locks; on Windows use SQLiteSession")


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


def lines_backwards(
    fd: int, start: int, end: int, *, chunk: int = 65536
) -> Iterator[tuple[int, bytes]]:
    """The lines between ``start`` and ``end`` (both line boundaries), newest first, each as
    ``(where it starts, its bytes without the newline)``."""
    low, pending = end, b""  # pending: the bytes from low to the end of the next line
    while pending or low > start:
        cut = pending.rfind(b"\n", 0, len(pending) - 1)
        if cut >= 0:
            yield low + cut + 1, pending[cut + 1 : -1]
            pending = pending[: cut + 1]
        elif low > start:
            read_from = max(start, low - chunk)
            pending = os.pread(fd, low - read_from, read_from) + pending
            low = read_from
        else:
            yield start, pending[:-1]
            return


def copy_range(source: int, offset: int, length: int, target: int, at: int) -> None:
    """Copy ``length`` bytes of ``source`` from ``offset`` into ``target`` at ``at``."""
    kernel = getattr(os, "copy_file_range", None)  # no copy through Python where there is one
    while length > 0:
        copied = 0
        if kernel is not None:
            try:
                copied = kernel(source, target, length, offset, at)
            except OSError:  # not between these files (another file system, an old kernel)
                kernel = None
        if not copied:
            data = os.pread(source, min(length, 1 << 20), offset)
            if not data:
                raise OSError(f"the file ended {length} bytes early while it was copied")
            write_at(target, data, at)
            copied = len(data)
        offset, at, length = offset + copied, at + copied, length - copied


class Replaced(Exception):
    """The session's path names another file than the descriptor in hand: an undo, a fork or
    an import put a new file there (see :mod:`aniki.sessions.file._edits`). Reopen and try
    again; nothing was written."""


def same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (no longer when it is gone)."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return named.st_ino == held.st_ino and named.st_dev == held.st_dev


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
    return meta_values(load_meta(path, store=store), generation)


def read_whole(path: Path) -> bytes:
    """The whole file ``path``, in one read of its size (no file object: a listing reads
    one per session)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, size)
        while len(data) < size:  # a short read (rare): the rest
            more = os.read(fd, size - len(data))
            if not more:
                break
            data += more
        return data
    finally:
        os.close(fd)


def load_meta(path: Path, *, store: str) -> dict[str, Any] | None:
    """The meta file ``path`` as written (``None`` when there is none); damaged: refused."""
    try:
        document = json.loads(read_whole(path))
    except FileNotFoundError:
        return None
    except (ValueError, RecursionError) as exc:
        raise CorruptStoreError(
            f"the meta file {path.name} is damaged: it is not valid JSON; {_META_HINT}",
            store=store,
        ) from exc
    if not isinstance(document, dict) or not isinstance(document.get("values"), dict):
        raise CorruptStoreError(
            f"the meta file {path.name} is not an aniki meta file; {_META_HINT}", store=store
        )
    return document


def meta_values(document: dict[str, Any] | None, generation: int) -> dict[str, Any]:
    """The values of a meta ``document`` (see :func:`load_meta`) if they hold for the session
    file's ``generation``: the one they were written for, or the one before an undo that
    wrote them (``"previous"``, see :func:`~._record.write`). Otherwise none: written before a
    ``clear()`` that died before deleting it, they are stale."""
    if document is None or generation not in (document.get("generation"), document.get("previous")):
        return {}
    values: dict[str, Any] = document["values"]
    return values


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
