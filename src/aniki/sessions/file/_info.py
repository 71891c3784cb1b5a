"""A session's info (``FileSession.info()`` / ``set_info()``), and what a listing sees of a
session file: its id, message count and times, read under the file's lock without decoding
every line.

**Times.** ``updated_at`` is the session file's modification time: every append, undo,
import and fork writes the file, and ``set_info`` sets the time to now, so a listing orders
sessions by one ``stat`` each. ``created_at`` is kept in the meta file's info once a
``set_info`` or a fork wrote it; before that it is the time of the session's first message
(stamped when it was appended, or kept by an import). Both are the file system's times, to
its resolution; where the system stamps files with a coarser clock than Python's (Linux
before 6.13: a few milliseconds), a session written only within one tick of its first
message reports ``updated_at`` equal to ``created_at``, never before it.

**Count.** The meta file keeps a count up to an offset (see
:mod:`~aniki.sessions.file._record`); the lines past it, at most
:data:`~._record.COUNT_EVERY` bytes once an instance of this aniki has appended, are
decoded (and so checked: a damaged one is refused as a read refuses it).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ...errors import CorruptStoreError
from .._catalog import InfoChange, Keep, from_timestamp
from .._codec import decode_messages
from ..base import SessionInfo
from . import _index, _timeline
from ._attachments import NAMES_BLOB, count, first_time
from ._file import SessionFile
from ._io import Replaced, same_file
from ._meta import counted
from ._record import Info, Kept, load, seconds, write

__all__ = ["Look", "look", "read", "set_info"]

_CHUNK = 65536


@dataclass(frozen=True, slots=True)
class Look:
    """A session file as read under its lock."""

    id: str
    """The session id its header names."""
    kept: Kept
    """What its meta file keeps for it."""
    count: int
    """Its messages."""
    modified: float
    """Its modification time, in seconds."""
    first: float | None
    """When its first message was written (read only when the info keeps no time)."""

    @property
    def written(self) -> bool:
        """Whether it is listed: it holds messages, or its info was set."""
        return self.count > 0 or self.kept.info is not None

    def info(self) -> SessionInfo:
        """Its :class:`~aniki.sessions.SessionInfo` (see the module docstring for times)."""
        if not self.written:
            return SessionInfo(self.id, 0, None)
        info = self.kept.info
        created = self.first if info is None else info.created
        updated = self.modified if created is None else max(self.modified, created)
        return SessionInfo(
            self.id,
            self.count,
            from_timestamp(updated),
            None if info is None else info.title,
            None if info is None else info.owner,
            () if info is None else info.tags,
            None if created is None else from_timestamp(created),
        )


def look(
    fd: int,
    ident: str,
    head: tuple[int, int],
    meta_path: Path,
    store: str,
    begins: bytes = b"",
) -> Look:
    """The session file ``fd`` (locked; its header ``head`` read and checked) of session
    ``ident``, its meta file ``meta_path``; ``begins``: the file's first bytes, when read
    already (a small file is then read once)."""
    generation, start = head
    status = os.fstat(fd)
    held = load(meta_path, generation, store=store)
    count, end, first = _count(fd, (start, status.st_size), held.count, store, begins)
    if held.info is not None or not count:
        first = None  # not needed
    elif first is None:  # not read by the count (past a kept one), or none
        first = _first_time(fd, start, end, store)
    return Look(ident, held, count, seconds(status.st_mtime_ns), first)


def _count(
    fd: int, span: tuple[int, int], kept: tuple[int, int] | None, store: str, begins: bytes
) -> tuple[int, int, float | None]:
    """The messages of the record lines, where the last complete one ends, and the time of
    the first message when the lines read began with the first (``None`` otherwise)."""
    (start, size), number, at = span, 0, span[0]
    if kept is not None:
        counted, offset = kept
        if start <= offset <= size and (offset == start or os.pread(fd, 1, offset - 1) == b"\n"):
            number, at = counted, offset
    if size <= len(begins):
        data = begins[at:size]
    else:
        data = os.pread(fd, size - at, at) if size > at else b""
    complete = data.rfind(b"\n") + 1  # a torn last line is not a record
    position = at
    first = None
    for line in data[: complete - 1].split(b"\n") if complete else ():
        if not line:  # what a read refuses, a listing refuses too
            raise CorruptStoreError(
                f"the session file is damaged: the line at byte {position} is empty, which "
                "aniki never writes; repair or delete that line, or restore the file from a "
                "backup",
                store=store,
            )
        if NAMES_BLOB in line:  # its attachments are not read
            number += count(line, store)
            if position == start:
                first = _seconds(first_time(line, store))
        else:
            messages = decode_messages(line, store=store)
            number += len(messages)
            if position == start:
                first = _seconds(messages[0].created_at if messages else None)
        position += len(line) + 1
    return number, at + complete, first


def _seconds(moment: datetime | None) -> float | None:
    return None if moment is None else moment.timestamp()


def _first_time(fd: int, start: int, end: int, store: str) -> float | None:
    """The time of the first message (``None`` when it has none: written before times were)."""
    data, chunk = b"", _CHUNK
    while b"\n" not in data and start + len(data) < end:
        data += os.pread(fd, min(chunk, end - start - len(data)), start + len(data))
        chunk *= 2
    return _seconds(first_time(data.split(b"\n", 1)[0], store))


def read(file: SessionFile, fd: int | None) -> SessionInfo:
    """The info of ``file``'s session (``fd`` locked shared; ``None``: no file)."""
    if fd is None:
        return SessionInfo(file.id, 0, None)
    if not same_file(fd, file.path):
        raise Replaced  # the meta file would be matched against the wrong generation
    head = file.head(fd)
    if head is None:
        return SessionInfo(file.id, 0, None)
    return look(fd, file.id, head, file.meta_path, file.label).info()


def set_info(file: SessionFile, change: InfoChange) -> None:
    """Apply ``change`` (checked) to ``file``'s session, under its exclusive lock: the file
    time set to now, new index markers made, the meta file written, old markers removed."""

    def work(fd: int | None) -> None:
        assert fd is not None  # created if missing
        generation, _ = file.checked_for_write(fd)  # damaged or not ours: refused
        held = load(file.meta_path, generation, store=file.label)  # damaged: refused
        count = counted(file, generation)  # every record read: the count is at hand
        durable = file.durability == "full"
        # Now, on the file system's clock, as an append would; marked in the index by time
        # (the session may not have been listed before).
        touch = functools.partial(os.utime, fd)
        _timeline.moving(file.directory, file.stem, fd, touch, marked=False, durable=durable)
        now = seconds(os.fstat(fd).st_mtime_ns)
        old = held.info
        if old is not None:
            created = old.created
        else:  # the time of the first message, if any: when the session was first written
            history = file.cache.view() if count else ()
            stamped = history[0].created_at if history else None
            created = now if stamped is None else stamped.timestamp()
        new = _applied(old or Info(None, None, (), created), change)
        before = _index.markers(file.directory, file.stem, old)
        after = _index.markers(file.directory, file.stem, new)
        _index.add(after - before, durable=durable)
        write(file.meta_path, generation, Kept(held.values, new, count), durable=durable)
        _index.remove(before - after)
        file.counted = 0 if count is None else count[1]

    file.using(work, create=True, exclusive=True)


def _applied(info: Info, change: InfoChange) -> Info:
    """``info`` with ``change`` applied (a field of :data:`~.._catalog.KEEP` left as it is)."""
    return Info(
        info.title if isinstance(change.title, Keep) else change.title,
        info.owner if isinstance(change.owner, Keep) else change.owner,
        info.tags if isinstance(change.tags, Keep) else change.tags,
        info.created,
    )
