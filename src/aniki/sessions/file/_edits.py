"""``fork``, ``undo`` and an import (``_replace``) of :class:`~aniki.sessions.FileSession`
(``fork`` in :mod:`~._forks`), and the helpers they share.

Each is atomic across a crash (kill -9) at any point, and a reader never sees half of it.

**undo, the common case** (the last user message starts a line, as the Runner writes it).
Under the file's exclusive lock: the meta file, if it holds values, is rewritten to hold for
both the current generation and the next (``"previous"``); the header's generation is
bumped in place, as ``clear()`` does; the file is cut where that line starts. A crash
between the bump and the cut only looks like a cache reset to every reader, and the meta
values hold either way.

**undo inside a batch, fork, import: a new file renamed into place.** A batch is one line
(``[user a, assistant b, user c, assistant d]``: undo keeps a and b), and a truncation then
an append cannot shorten it atomically. So the new content is written whole to a temporary
file beside the session file, then renamed over it with the old file's exclusive lock held.
The rename is the commit: before it, the old file is there; after it, the new one.

Instances that hold the old file open (other objects, other processes) must never read
from it or write to it again. A look at the path after each lock (``os.stat`` against
``os.fstat``) would tell, but it costs every append a system call with a path lookup
(measured: 3.6 us on a 12.6 us append, 28% more). Instead, before the rename, one byte that
is not a newline is added to the old file, and appends cost what they did:

* to every instance, that is a torn last line, and every path that meets a torn line, a
  file without a header, a file grown or shrunk since it last looked (an append's checked
  path) or no cache (a tail read, ``get_meta``) looks whether the path still names its
  file, and otherwise reopens it and tries again (:class:`~._io.Replaced`); the fast path
  of an append requires the file to end with a newline exactly where this instance's view
  ends, so it is never taken on a replaced file;
* it is added first, so a crash between it and the rename leaves a torn line in the live
  file, which readers ignore and the next writer cuts off, as after any crash mid-write;
  the rename never happens without it.

A replaced file whose header was never written (the empty file a fork creates as a
placeholder) needs no mark: with no header, every path looks at the path anyway. A process
running an aniki older than this module does not know the mark: sharing a session with it
while an edit that renames runs can lose its next append.

A new file keeps the mode of the file it replaces. A crash can leave a temporary file
(``<name>.jsonl.<pid>.<random>.tmp``) behind; it is never read and may be deleted.

**fork.** The source is read under its shared lock and the new file written then (a
consistent copy, records copied byte for byte; the batch holding ``upto`` cut after it);
then that lock is released, so two forks in opposite directions never wait on each other.
The target is opened (created empty if absent: an empty file is no session) and locked
exclusively; it must hold no line. Its meta file is written first, for a random generation
(:func:`~._format.fresh_generation`) that the new file has and no earlier file of that
name had, then the new file is renamed into place: a crash before the rename leaves meta
that holds for no file, so the fork is whole or absent. Every meta write holds the data
file's lock, so a racing writer of the target's meta is never overwritten. (``os.link`` of
the new file would refuse an existing target too, but then its meta file would be written
either without the target's lock or after the file appeared.)

**import** (``_replace``): the new file, one line per message, has a random generation too,
so the old meta file no longer holds the moment it is in place; it is deleted after.

With ``durability="full"``, the new file is fsynced before the rename and the directory
after it; the meta file and the undo's cut are synced as ``set_meta`` and ``clear`` are.
"""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import Sequence
from pathlib import Path

from ...messages import Message
from .._edits import last_turn_start
from . import _index, _timeline
from ._attachments import encode, keep, named, named_in, release
from ._file import SessionFile
from ._format import fresh_generation, header
from ._io import (
    copy_range,
    end_of_records,
    fsync_directory,
    last_records,
    lines_backwards,
    load_meta,
    write_at,
)
from ._record import Kept, kept, load, write

__all__ = [
    "MARK",
    "Adoption",
    "append_after",
    "discard",
    "holds_a_line",
    "line_of",
    "new_file",
    "put_in_place",
    "replace",
    "replace_marked",
    "undo",
]

MARK = b"~"
"""Added to a file before another is renamed over it (or it is removed by a prune): a torn
line (see the docstring)."""

Adoption = tuple[int, tuple[int, int], Sequence[Message], int]
"""A new file put in place, for :meth:`SessionFile.adopt <._file.SessionFile.adopt>`: its
descriptor, its header (generation, length), the messages written to it and where they end."""


def append_after(file: SessionFile, batch: list[Message], after: str | None) -> bool:
    """Append ``batch`` (stamped) as ``add_messages`` does, only if the last message stored
    has the id ``after`` (``None``: none is), checked under the same exclusive lock; whether
    it was appended."""
    payload, blobs = encode(batch)

    def append(fd: int | None) -> bool:
        assert fd is not None  # created if missing
        _, start = file.checked_for_write(fd)  # every record decodes: none is damaged
        last = last_records(fd, start, 1, file.decode)
        if (last[-1].id or "" if last else None) != after:  # "": no id, never the one named
            return False
        file.append_locked(fd, batch, payload, blobs)
        return True

    return file.using(append, create=True, exclusive=True)


def undo(file: SessionFile) -> tuple[Message, ...]:
    """Remove the last turn; what was removed (see ``FileSession.undo``)."""
    with file.lock, file.errors():
        removed, adoption = file.using(lambda fd: _undo(file, fd), create=False, exclusive=True)
        if adoption is not None:
            file.adopt(*adoption)
        return removed


def _undo(file: SessionFile, fd: int | None) -> tuple[tuple[Message, ...], Adoption | None]:
    if fd is None:
        return (), None
    generation, start = file.checked_for_write(fd)  # the cache now holds every record
    end = end_of_records(fd, start)
    if end == start:
        file.cache.reset(generation, end)
    messages = file.cache.view()
    turn = last_turn_start(messages)
    if turn == len(messages):
        return (), None
    removed = messages[turn:]
    line_start, _, first, items = line_of(file, fd, start, end, turn)
    gone = named_in(fd, line_start, end)  # the attachments the removed lines name
    if turn == first:  # the turn starts a line: cut the file there
        _cut(file, fd, generation, line_start, turn)
        file.cache.reset(generation + 1, line_start)
        file.cache.extend(messages[:turn], line_start)
        _forget(file, gone, fd, start, line_start)
        return removed, None
    # The turn starts inside a batch: a new file, that line shortened, the same generation
    # (the meta file still holds; every instance that held the old file reads afresh). A
    # count kept past the line's start is kept at it first: it holds for both files.
    held = load(file.meta_path, generation, store=file.label)
    if held.count is not None and held.count[1] > line_start:
        counted = Kept(held.values, held.info, (first, line_start))
        write(file.meta_path, generation, counted, durable=file.durability == "full")
    kept = encode(items[: turn - first])[0]  # its blobs are in the store: it names them
    temp, new = new_file(file.path)
    try:
        copy_range(fd, 0, line_start, new, 0)
        write_at(new, kept, line_start)
        replace_marked(file, temp, new, replacing=fd, mark_at=end)
    except BaseException:
        discard(temp, new)
        raise
    _forget(file, gone - named([kept]), fd, start, line_start)
    return removed, (new, (generation, start), messages[:turn], line_start + len(kept))


def _forget(file: SessionFile, gone: set[str], fd: int, start: int, end: int) -> None:
    """After an edit removed lines naming ``gone``: the blobs the kept lines (``start`` to
    ``end`` of ``fd``) no longer name are released (see ``_attachments``)."""
    if gone:
        release(file.directory, file.stem, gone - named_in(fd, start, end))


def _cut(file: SessionFile, fd: int, generation: int, line_start: int, turn: int) -> None:
    """Undo's common case: the meta file (values, info, the count at the cut) kept for the
    next generation, the header bumped, the file cut where the last turn's line starts
    (``turn`` messages before it; see the module docstring)."""
    held = load(file.meta_path, generation, store=file.label)
    full = file.durability == "full"
    file.counted = 0
    if not held.empty:
        counted = Kept(held.values, held.info, (turn, line_start))
        write(file.meta_path, generation + 1, counted, durable=full, previous=generation)
        file.counted = line_start

    def cut() -> None:
        os.pwrite(fd, header(file.id, generation + 1), 0)  # first: see clear()
        os.ftruncate(fd, line_start)

    _timeline.moving(file.directory, file.stem, fd, cut, marked=True, durable=full)
    file.sync(fd)


def replace(file: SessionFile, messages: list[Message]) -> None:
    """Make ``messages`` (stamped) the whole history, its meta dropped."""
    generation = fresh_generation()
    head = header(file.id, generation)
    lines, kept = [], {}
    for message in messages:  # one line each
        line, blobs = encode([message])
        lines.append(line)
        kept.update(blobs)
    body = b"".join(lines)
    with file.lock, file.errors():
        adoption = file.using(
            lambda fd: _replace(file, fd, (head, body, kept), generation, messages),
            create=True,
            exclusive=True,
        )
        file.adopt(*adoption)


def _replace(
    file: SessionFile,
    fd: int | None,
    written: tuple[bytes, bytes, dict[str, bytes]],
    generation: int,
    messages: list[Message],
) -> Adoption:
    assert fd is not None
    head, body, blobs = written  # the new file, and the blobs its lines name
    old, start = file.checked_for_write(fd)  # damaged or not ours: refused
    end = end_of_records(fd, start)
    gone = named_in(fd, start, end)
    keep(file.directory, file.stem, blobs, durable=file.durability == "full")
    document = load_meta(file.meta_path, store=file.label)  # damaged: refused, as clear() does
    info = kept(document, old, store=file.label).info
    temp, new = new_file(file.path)
    try:
        write_at(new, head + body, 0)
        replace_marked(file, temp, new, replacing=fd, mark_at=end, listed=bool(body))
    except BaseException:
        discard(temp, new)
        raise
    file.meta_path.unlink(missing_ok=True)  # it holds for no generation of the new file
    _index.remove(_index.markers(file.directory, file.stem, info))  # the info went with it
    release(file.directory, file.stem, gone - set(blobs))
    return new, (generation, len(head)), messages, len(head) + len(body)


# --- helpers ------------------------------------------------------------------------------


def line_of(
    file: SessionFile, fd: int, start: int, end: int, position: int
) -> tuple[int, int, int, list[Message]]:
    """The line holding message ``position`` of the cached history (every record between
    ``start`` and ``end``), read backwards: where it starts and ends, the position of its
    first message, and its messages."""
    first = len(file.cache)
    for line_start, line in lines_backwards(fd, start, end):
        items = file.decode(line)
        first -= len(items)
        if first <= position:
            return line_start, line_start + len(line) + 1, first, items
    raise AssertionError("the file holds fewer messages than were read from it")


def holds_a_line(fd: int, start: int, end: int) -> bool:
    """Whether there is a complete line between ``start`` and ``end``."""
    while start < end:
        chunk = os.pread(fd, min(end - start, 65536), start)
        if b"\n" in chunk:
            return True
        start += len(chunk)
    return False


def new_file(path: Path) -> tuple[Path, int]:
    """A new file beside ``path``, under a temporary name, and its descriptor."""
    temp = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    return temp, os.open(temp, flags, 0o666)


def put_in_place(
    file: SessionFile, temp: Path, new: int, *, replacing: int, mark_at: int | None
) -> None:
    """Rename ``temp`` (open as ``new``, written whole) over the session file, open as
    ``replacing`` and locked exclusively; ``mark_at``: where it ends, when it has a header."""
    os.fchmod(new, stat.S_IMODE(os.fstat(replacing).st_mode))
    if file.durability == "full":
        os.fsync(new)
    if mark_at is not None:
        os.pwrite(replacing, MARK, mark_at)  # before the rename: see the module docstring
    os.replace(temp, file.path)
    if file.durability == "full":
        fsync_directory(file.directory)


def replace_marked(
    file: SessionFile,
    temp: Path,
    new: int,
    *,
    replacing: int,
    mark_at: int | None,
    listed: bool = True,
) -> None:
    """:func:`put_in_place`, with the index by update time kept (see ``_timeline``): the new
    file's time marked before the rename when it is ``listed`` (it holds a record, or
    info), the old file's marker removed after."""
    old, written = os.fstat(replacing).st_mtime_ns, os.fstat(new).st_mtime_ns
    if listed:
        _timeline.mark(file.directory, file.stem, written, durable=file.durability == "full")
    put_in_place(file, temp, new, replacing=replacing, mark_at=mark_at)
    _timeline.unmark(file.directory, file.stem, old, kept=written if listed else None)


def discard(temp: Path, new: int) -> None:
    """Drop a new file that was not put in place (after the rename, its name is gone)."""
    os.close(new)
    temp.unlink(missing_ok=True)
