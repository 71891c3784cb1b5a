"""``fork``, ``undo`` and an import (``_replace``) of :class:`~aniki.sessions.FileSession`.

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
from typing import TYPE_CHECKING, Any

from ...messages import Message
from .._codec import decode_messages, encode_batch, encode_message
from .._edits import FORK_SKIPPED_META, fork_target, forked_count, last_turn_start, taken
from ._format import fresh_generation, header
from ._io import (
    Replaced,
    copy_range,
    end_of_records,
    fsync_directory,
    last_records,
    lines_backwards,
    load_meta,
    meta_values,
    same_file,
    write_at,
    write_meta,
)

if TYPE_CHECKING:
    from .session import FileSession

__all__ = ["append_after", "fork", "replace", "undo"]

_MARK = b"~"
"""Added to a file before another is renamed over it: a torn line (see the docstring)."""

_Adoption = tuple[int, tuple[int, int], list[Message], int]
"""A new file put in place, for :func:`_adopt`: its descriptor, its header (generation,
length), the messages written to it and where they end."""


def append_after(session: FileSession, batch: list[Message], after: str | None) -> bool:
    """Append ``batch`` (stamped) as ``add_messages`` does, only if the last message stored
    has the id ``after`` (``None``: none is), checked under the same exclusive lock; whether
    it was appended."""
    text = encode_message(batch[0]) if len(batch) == 1 else encode_batch(batch)
    payload = (text + "\n").encode("utf-8")
    label = session._label

    def append(fd: int | None) -> bool:
        assert fd is not None  # created if missing
        _, start = session._checked_for_write(fd)  # every record decodes: none is damaged
        last = last_records(fd, start, 1, lambda line: decode_messages(line, store=label))
        if (last[-1].id or "" if last else None) != after:  # "": no id, never the one named
            return False
        session._append_locked(fd, batch, payload)
        return True

    return session._using(append, create=True, exclusive=True)


def _adopt(
    session: FileSession, fd: int, head: tuple[int, int], messages: list[Message], end: int
) -> None:
    """Make ``fd``, a file just put at the path, ``session``'s file, with what it was written
    with cached: header ``head``, then ``messages`` up to ``end`` (not its size: another
    process may have appended since the rename)."""
    session.close()
    session._hold(fd)
    session._generation, session._start = head
    session._cache, session._snapshot = messages, None
    session._offset = end


def undo(session: FileSession) -> tuple[Message, ...]:
    """Remove the last turn of ``session``; what was removed (see ``FileSession.undo``)."""
    with session._lock, session._errors():
        removed, adoption = session._using(
            lambda fd: _undo(session, fd), create=False, exclusive=True
        )
        if adoption is not None:
            _adopt(session, *adoption)
        return removed


def _undo(session: FileSession, fd: int | None) -> tuple[tuple[Message, ...], _Adoption | None]:
    if fd is None:
        return (), None
    generation, start = session._checked_for_write(fd)  # the cache now holds every record
    end = end_of_records(fd, start)
    if end == start:
        session._reset(generation, end)
    messages = session._cache
    turn = last_turn_start(messages)
    if turn == len(messages):
        return (), None
    removed = tuple(messages[turn:])
    line_start, _, first, items = _line_of(session, fd, start, end, turn)
    full = session._durability == "full"
    if turn == first:  # the turn starts a line: cut the file there
        values = meta_values(load_meta(session._meta_path, store=session._label), generation)
        if values:
            write_meta(
                session._meta_path, generation + 1, values, durable=full, previous=generation
            )
        os.pwrite(fd, header(session.id, generation + 1), 0)  # first: see clear()
        os.ftruncate(fd, line_start)
        session._sync(fd)
        session._reset(generation + 1, line_start)
        session._cache = messages[:turn]
        session._snapshot = None
        return removed, None
    # The turn starts inside a batch: a new file, that line shortened, the same generation
    # (the meta file still holds; every instance that held the old file reads afresh).
    kept = _line(items[: turn - first])
    temp, new = _new_file(session._path)
    try:
        copy_range(fd, 0, line_start, new, 0)
        write_at(new, kept, line_start)
        _put_in_place(session, temp, new, replacing=fd, mark_at=end)
    except BaseException:
        _discard(temp, new)
        raise
    return removed, (new, (generation, start), messages[:turn], line_start + len(kept))


def fork(session: FileSession, new_id: str, upto: str | None) -> FileSession:
    """A copy of ``session`` as session ``new_id`` (see ``FileSession.fork``)."""
    target = type(session)(
        fork_target(session.id, new_id),
        session._dir,
        durability=session._durability,
        timeout=session._timeout,
    )
    generation = fresh_generation()
    with session._lock, session._errors():
        temp, adoption, values = session._using(
            lambda fd: _copy(session, fd, target, generation, upto),
            create=False,
            exclusive=False,
        )
    new = adoption[0]
    with target._lock, target._errors():
        try:
            target._using(
                lambda fd: _install(target, fd, temp, new, generation, values),
                create=True,
                exclusive=True,
            )
        except BaseException:
            _discard(temp, new)
            raise
        _adopt(target, *adoption)
    return target


def _copy(
    session: FileSession, fd: int | None, target: FileSession, generation: int, upto: str | None
) -> tuple[Path, _Adoption, dict[str, Any]]:
    """Write the fork's file under a temporary name (``session`` locked, shared); the meta
    values it takes along."""
    if fd is not None:
        session._refresh(fd)
    present = fd is not None and session._generation is not None
    messages = session._cache if present else []
    count = forked_count(messages, upto, session.id)  # no such message: refused here
    values = {
        key: value for key, value in session._meta(fd).items() if key not in FORK_SKIPPED_META
    }
    target._dir.mkdir(parents=True, exist_ok=True)
    head = header(target.id, generation)
    temp, new = _new_file(target._path)
    try:
        write_at(new, head, 0)
        written = len(head)
        if count:
            assert fd is not None
            start, end = session._start, session._offset
            cut = b""  # the line holding ``upto``, cut after it, when it goes on past it
            if count < len(messages):
                line_start, end, first, items = _line_of(session, fd, start, end, count - 1)
                if count - first < len(items):
                    end, cut = line_start, _line(items[: count - first])
            copy_range(fd, start, end - start, new, written)
            written += end - start
            write_at(new, cut, written)
            written += len(cut)
    except BaseException:
        _discard(temp, new)
        raise
    return temp, (new, (generation, len(head)), messages[:count], written), values


def _install(
    target: FileSession,
    fd: int | None,
    temp: Path,
    new: int,
    generation: int,
    values: dict[str, Any],
) -> None:
    """Put the fork's file in place of the target's, which must hold no line (locked)."""
    assert fd is not None
    if not same_file(fd, target._path):
        raise Replaced
    head = target._head(fd)  # not an aniki file, or another session's: refused
    mark_at = None
    if head is not None:
        mark_at = os.fstat(fd).st_size
        if _holds_a_line(fd, head[1], mark_at):
            raise taken(target.id)
    load_meta(target._meta_path, store=target._label)  # damaged: refused, as clear() does
    full = target._durability == "full"
    if values:
        write_meta(target._meta_path, generation, values, durable=full)
    else:
        target._meta_path.unlink(missing_ok=True)
    _put_in_place(target, temp, new, replacing=fd, mark_at=mark_at)


def replace(session: FileSession, messages: list[Message]) -> None:
    """Make ``messages`` (stamped) the whole history of ``session``, its meta dropped."""
    generation = fresh_generation()
    head = header(session.id, generation)
    body = b"".join(_line([message]) for message in messages)
    with session._lock, session._errors():
        adoption = session._using(
            lambda fd: _replace(session, fd, head, body, generation, messages),
            create=True,
            exclusive=True,
        )
        _adopt(session, *adoption)


def _replace(
    session: FileSession,
    fd: int | None,
    head: bytes,
    body: bytes,
    generation: int,
    messages: list[Message],
) -> _Adoption:
    assert fd is not None
    _, start = session._checked_for_write(fd)  # damaged or not ours: refused
    end = end_of_records(fd, start)
    load_meta(session._meta_path, store=session._label)  # damaged: refused, as clear() does
    temp, new = _new_file(session._path)
    try:
        write_at(new, head + body, 0)
        _put_in_place(session, temp, new, replacing=fd, mark_at=end)
    except BaseException:
        _discard(temp, new)
        raise
    session._meta_path.unlink(missing_ok=True)  # it holds for no generation of the new file
    return new, (generation, len(head)), list(messages), len(head) + len(body)


# --- helpers ------------------------------------------------------------------------------


def _line_of(
    session: FileSession, fd: int, start: int, end: int, position: int
) -> tuple[int, int, int, list[Message]]:
    """The line holding message ``position`` of the cached history (every record between
    ``start`` and ``end``), read backwards: where it starts and ends, the position of its
    first message, and its messages."""
    first = len(session._cache)
    for line_start, line in lines_backwards(fd, start, end):
        items = decode_messages(line, store=session._label)
        first -= len(items)
        if first <= position:
            return line_start, line_start + len(line) + 1, first, items
    raise AssertionError("the file holds fewer messages than were read from it")


def _line(messages: Sequence[Message]) -> bytes:
    """One record line: a message, or several as a batch."""
    text = encode_message(messages[0]) if len(messages) == 1 else encode_batch(messages)
    return (text + "\n").encode("utf-8")


def _holds_a_line(fd: int, start: int, end: int) -> bool:
    """Whether there is a complete line between ``start`` and ``end``."""
    while start < end:
        chunk = os.pread(fd, min(end - start, 65536), start)
        if b"\n" in chunk:
            return True
        start += len(chunk)
    return False


def _new_file(path: Path) -> tuple[Path, int]:
    """A new file beside ``path``, under a temporary name, and its descriptor."""
    temp = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    return temp, os.open(temp, flags, 0o666)


def _put_in_place(
    session: FileSession, temp: Path, new: int, *, replacing: int, mark_at: int | None
) -> None:
    """Rename ``temp`` (open as ``new``, written whole) over the session file, open as
    ``replacing`` and locked exclusively; ``mark_at``: where it ends, when it has a header."""
    os.fchmod(new, stat.S_IMODE(os.fstat(replacing).st_mode))
    if session._durability == "full":
        os.fsync(new)
    if mark_at is not None:
        os.pwrite(replacing, _MARK, mark_at)  # before the rename: see the module docstring
    os.replace(temp, session._path)
    if session._durability == "full":
        fsync_directory(session._dir)


def _discard(temp: Path, new: int) -> None:
    """Drop a new file that was not put in place (after the rename, its name is gone)."""
    os.close(new)
    temp.unlink(missing_ok=True)
