"""``SessionFile``: the file of one :class:`~aniki.sessions.FileSession` as one instance holds
it: its descriptor, its lock, its header, the records read from it so far, and the damage
found in it.

The session class checks and encodes; everything that touches the file goes through this
object, and so do :mod:`~aniki.sessions.file._edits` (fork, undo, import),
:mod:`~aniki.sessions.file._meta` (derived state, clear) and :mod:`~._pages`.

The descriptor is reopened in a forked child (it never uses its parent's) and when another
file was put at the path (:class:`~._io.Replaced`, see :mod:`~aniki.sessions.file._edits`).
A file found damaged is listed in :data:`aniki.sessions._local_file.DAMAGED` and never
written again by this process until it reads well again or another file is at its path.
"""

from __future__ import annotations

import functools
import os
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar, cast

from ...errors import CorruptStoreError, StoreUnavailableError
from ...messages import Message
from .._args import Durability
from .._codec import decode_messages
from .._fork import count as fork_count
from .._gc import paused
from .._guard import admit, in_force
from .._history_cache import HistoryCache
from .._local_file import DAMAGED, Identity, identity, reason_of
from . import _timeline
from ._attachments import NAMES_BLOB, Blobs, decode, keep
from ._damage import damaged, refused
from ._format import (
    DATA_SUFFIX,
    HEADER_READ,
    META_SUFFIX,
    file_stem,
    fresh_generation,
    header,
    parse_header,
)
from ._io import (
    Replaced,
    end_of_records,
    flock,
    fsync_directory,
    last_records,
    lock,
    same_file,
    unlock,
    write_at,
)
from ._record import COUNT_EVERY, keep_count

__all__ = ["SessionFile"]

T = TypeVar("T")

_REOPENS = 100
"""How many times in a row one call reopens a file that another put a new file in place of
before it gives up (each time, that other call completed: never reached in practice)."""


class SessionFile:
    """The session file of one session instance; see the module docstring."""

    def __init__(
        self, session_id: str, directory: Path, *, durability: Durability, timeout: float
    ) -> None:
        self.id = session_id
        self.directory = directory
        self.stem = stem = file_stem(session_id)
        """The name of its files, without suffix (and of its markers in the index)."""
        self.path = directory / (stem + DATA_SUFFIX)
        self.meta_path = directory / (stem + META_SUFFIX)
        """Where derived state lives (see :mod:`~aniki.sessions.file._meta`)."""
        self.label = f"file://{self.path}"
        self.durability: Durability = durability
        self.timeout = timeout
        self.lock = threading.RLock()
        """Held around every use of the file by this instance (it may serve several threads)."""
        self.cache: HistoryCache[int] = HistoryCache()
        """The records read so far: generation, the header's; position, the byte offset
        read up to."""
        self.start = 0
        """The header's length, once this instance has checked it (0 until then)."""
        self.counted = 0
        """Where the meta file's count ends, as far as this instance knows (see _record)."""
        self._fd: int | None = None
        self._fd_forks = -1
        self._closer: weakref.finalize[[int], SessionFile] | None = None
        self._identity: Identity | None = None  # of the file the cache was read from

    # --- holding the file -----------------------------------------------------------------

    def using(self, work: Callable[[int | None], T], *, create: bool, exclusive: bool) -> T:
        """``work(fd)`` with the session file locked (``fd`` is ``None`` when there is no
        file and ``create`` is false); when ``work`` finds that another file was put at the
        path (:class:`~._io.Replaced`), it runs again on that one."""
        with self.lock, self.errors():
            for _ in range(_REOPENS):
                fd = self.descriptor(create)
                if fd is None:
                    return work(None)
                with flock(fd, exclusive=exclusive, timeout=self.timeout, store=self.label):
                    try:
                        return work(fd)
                    except Replaced:
                        pass
                self.close()
            raise StoreUnavailableError(
                f"the session file was replaced {_REOPENS} times in a row while this call "
                "tried to use it; retry later",
                store=self.label,
            )

    @contextmanager
    def errors(self) -> Iterator[None]:
        """Translate an ``OSError`` raised inside into :class:`~aniki.StoreUnavailableError`."""
        try:
            yield
        except OSError as exc:
            raise self._unavailable(exc) from exc

    def _unavailable(self, exc: OSError) -> StoreUnavailableError:
        return StoreUnavailableError(
            f"cannot use the session file ({exc}); check the directory, its permissions "
            "and free disk space",
            store=self.label,
        )

    def descriptor(self, create: bool) -> int | None:
        """The file, open (``None`` when there is none and ``create`` is false)."""
        if self._fd is not None and self._fd_forks == fork_count():
            return self._fd
        if self._closer is not None:
            self._closer.detach()  # inherited through fork: the parent still uses it
        flags = os.O_RDWR | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(self.path, flags)
        except FileNotFoundError:
            if not create:
                return None
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, flags | os.O_CREAT, 0o666)
            if self.durability == "full":
                fsync_directory(self.directory)
        self.hold(fd)
        return fd

    def hold(self, fd: int) -> None:
        """Make ``fd`` this instance's file; what is cached is kept only if it is the same
        file (a forked child reopening its parent's), never for another one."""
        self._fd, self._fd_forks = fd, fork_count()
        self._closer = weakref.finalize(self, os.close, fd)
        key = identity(fd)
        if key != self._identity:
            self._identity = key
            self.start = self.counted = 0
            self.cache.reset()

    def adopt(self, fd: int, head: tuple[int, int], messages: Sequence[Message], end: int) -> None:
        """Make ``fd``, a file just put at the path, this instance's file, with what it was
        written with cached: header ``head``, then ``messages`` up to ``end`` (not its size:
        another process may have appended since the rename)."""
        self.close()
        self.hold(fd)
        generation, self.start = head
        self.cache.reset(generation, self.start)
        self.cache.extend(messages, end)

    def close(self) -> None:
        """Close the file and drop the cache; the next use reopens it."""
        with self.lock:
            if self._closer is not None:
                self._closer()
                self._closer = None
            self._fd = None
            self.start = self.counted = 0
            self._identity = None
            self.cache.reset()

    def sync(self, fd: int) -> None:
        """Make what was written durable, with ``durability="full"``."""
        if self.durability == "full":
            os.fsync(fd)

    # --- the header, and damage ---------------------------------------------------------

    def head(self, fd: int) -> tuple[int, int] | None:
        """The header's generation and length (``None``: no header yet); damaged: listed."""
        try:
            return parse_header(os.pread(fd, HEADER_READ, 0), self.id, store=self.label)
        except CorruptStoreError as exc:
            DAMAGED.remember(reason_of(exc), fd=fd)
            raise

    def checked_for_write(self, fd: int) -> tuple[int, int]:
        """The header's generation and length, once every record this instance has not read
        yet decodes; a file without a header gets a fresh one.

        Raises :class:`~aniki.CorruptStoreError` before anything is written when the header
        or a record is damaged, so a write never lands in (or cuts) a damaged file. Raises
        :class:`~._io.Replaced` when the path names another file now.
        """
        if not same_file(fd, self.path):
            raise Replaced
        if DAMAGED and DAMAGED.found(identity(fd)) is not None:
            raise refused(fd, self.path, store=self.label)
        head = self.head(fd)
        if head is None:  # empty, or its creation was cut short: nothing to lose
            # A meta file without a session file, left by a prune that died: it holds nothing.
            generation = fresh_generation() if self.meta_path.exists() else 0
            fresh = header(self.id, generation)
            os.ftruncate(fd, 0)
            write_at(fd, fresh, 0)
            return generation, len(fresh)
        self._read_records(fd, head)
        generation, length = head
        current = header(self.id, generation)
        if len(current) == length and os.pread(fd, length, 0) != current:
            # Written by an older aniki: stamped with this version before anything of it is
            # added (same length, so the records stay where they are). Not write_at, which
            # cuts the file at the offset when a write fails. It moves the file's time.
            full = self.durability == "full"
            write = functools.partial(os.pwrite, fd, current, 0)
            _timeline.moving(self.directory, self.stem, fd, write, marked=True, durable=full)
        return head

    def damaged(self, fd: int, where: str, exc: CorruptStoreError) -> CorruptStoreError:
        """The error for a record that does not decode at ``where``; the file listed."""
        return damaged(fd, where, exc, store=self.label)

    # --- reading --------------------------------------------------------------------------

    def read(self, fd: int | None, limit: int | None) -> tuple[Message, ...]:
        """The history (its last ``limit`` messages), the file locked shared."""
        if fd is None:
            self.cache.reset()
        elif limit is not None and self.cache.generation is None:
            # Nothing cached yet: read only the tail, backwards, so that a policy over a
            # freshly opened session costs the size of its window, not of the file.
            return self._tail(fd, limit)
        else:
            self.refresh(fd)
        return self.cache.view(limit)

    def refresh(self, fd: int) -> None:
        """Bring the cache up to the file's last complete line."""
        head = self.head(fd)
        if head is None:
            if not same_file(fd, self.path):
                raise Replaced
            self.cache.reset()
            return
        self._read_records(fd, head)

    def _read_records(self, fd: int, head: tuple[int, int]) -> None:
        """Bring the cache up to the file's last complete line (header ``head`` checked)."""
        generation, start = head
        self.start = start
        size = os.fstat(fd).st_size
        cache = self.cache
        if generation != cache.generation or size < cache.position:
            cache.reset(generation, start)
        offset = cache.position
        if size > offset:
            data = os.pread(fd, size - offset, offset)
            complete = data.rfind(b"\n") + 1  # a torn last line is not a record
            if complete < len(data) and not same_file(fd, self.path):
                raise Replaced  # the torn line is the mark of a file replaced (see _edits)
            if complete:
                with paused(offset == start):  # a first read: maybe a long history (see _gc)
                    cache.extend(self._decoded(fd, data[: complete - 1], offset), offset + complete)
        if offset == start and DAMAGED:  # the whole file read well: it was repaired in place
            DAMAGED.forget(identity(fd))

    def _decoded(self, fd: int, data: bytes, offset: int) -> list[Message]:
        """The messages of the record lines ``data`` (newlines between them), read from
        ``offset``; a line that does not decode lists the file as damaged."""
        decoded: list[Message] = []
        position = offset
        held: dict[str, bytes] = {}  # the blobs read: each once, however many name it
        try:
            for line in data.split(b"\n"):
                try:  # no look for attachments first: that would cost every read a scan
                    decoded.extend(decode_messages(line, store=self.label))
                except CorruptStoreError:
                    if NAMES_BLOB not in line:  # a line naming none is damaged
                        raise
                    decoded.extend(decode(line, self.directory, self.label, held))
                position += len(line) + 1
        except CorruptStoreError as exc:
            # The cache stays as it was: later reads and writes meet the line again.
            line_number = os.pread(fd, position, 0).count(b"\n") + 1
            raise self.damaged(fd, f"line {line_number} (at byte {position})", exc) from exc
        return decoded

    def decode(self, line: bytes, held: dict[str, bytes] | None = None) -> list[Message]:
        """The messages of a record line, the attachments it names read in (see
        ``_attachments``)."""
        # A look at the line, not the codec's refusal (~20 us) first: this is for reads of a
        # few lines, where a look at each costs less than a refused line naming attachments.
        if NAMES_BLOB not in line:
            return decode_messages(line, store=self.label)
        return decode(line, self.directory, self.label, held)

    def _tail(self, fd: int, limit: int) -> tuple[Message, ...]:
        if not same_file(fd, self.path):  # a read of the whole tail: one look is cheap
            raise Replaced
        head = self.head(fd)
        if head is None or limit == 0:
            return ()
        self.start = head[1]
        held: dict[str, bytes] = {}  # the blobs read: each once
        try:
            found = last_records(fd, head[1], limit, lambda line: self.decode(line, held))
        except CorruptStoreError as exc:
            raise self.damaged(fd, "a line near its end", exc) from exc
        return tuple(found[-limit:])

    # --- appending ------------------------------------------------------------------------

    def append(self, batch: list[Message], payload: bytes, blobs: Blobs) -> None:
        """Append ``payload``, the line holding ``batch``, in one write under the exclusive
        lock (the hot path: plain calls rather than nested context managers)."""
        with self.lock:
            try:
                fd = self.descriptor(create=True)
                assert fd is not None
                lock(fd, exclusive=True, timeout=self.timeout, store=self.label)
                try:
                    self.append_locked(fd, batch, payload, blobs)
                finally:
                    unlock(fd)
            except OSError as exc:
                raise self._unavailable(exc) from exc
            except Replaced:  # another file is at the path now: append to that one
                self.close()
                self.using(  # with create=True, fd is never None
                    lambda fd: self.append_locked(cast(int, fd), batch, payload, blobs),
                    create=True,
                    exclusive=True,
                )

    def append_locked(self, fd: int, batch: list[Message], payload: bytes, blobs: Blobs) -> None:
        """Append ``payload`` to the file, locked exclusively by the caller; ``blobs``, the
        attachments it names, are kept first (see :mod:`~._attachments`)."""
        # No look at whether the path still names this file here: whoever puts another file
        # in its place first adds a torn line to this one (see _edits), so the size is not
        # this instance's offset any more and the append takes the checked path below.
        status = os.fstat(fd)
        if DAMAGED and DAMAGED.found((status.st_dev, status.st_ino)) is not None:
            raise refused(fd, self.path, store=self.label)
        size = status.st_size
        cache = self.cache
        generation: int | None
        start = self.start
        # A run's turn guard (see _guard) needs the header's generation, read here and now.
        fast = start and size == cache.position >= start and not in_force()
        if fast and os.pread(fd, 1, size - 1) == b"\n":
            # Where this instance's view ends is where the file ends: the header was checked
            # before and the records are complete. If a clear happened meanwhile, the next
            # read sees the new generation and starts over, so extending the cache is safe.
            generation, end = cache.generation, size
        else:
            # Every record this instance has not read is decoded first: nothing is ever
            # appended to a file with a damaged line.
            generation, start = self.checked_for_write(fd)
            admit(self, (status.st_dev, status.st_ino, generation))  # the file, and its state
            self.start = start
            end = end_of_records(fd, start)
            if end == start and (cache.generation, cache.position) != (generation, end):
                cache.reset(generation, end)  # the session is empty: nothing to miss
        full = self.durability == "full"
        if blobs:
            keep(self.directory, self.stem, blobs, durable=full)
        # The index by update time (see _timeline): a session holding a record is marked.
        old = status.st_mtime_ns
        tick = _timeline.before(self.directory, self.stem, old, marked=end > start, durable=full)
        write_at(fd, payload, end)
        self.sync(fd)
        _timeline.after(self.directory, self.stem, fd, old, tick, durable=full)
        if generation == cache.generation and end == cache.position:
            cache.extend(batch, end + len(payload))
            if cache.position - self.counted > COUNT_EVERY:  # rarely: see _record
                assert generation is not None
                self.counted = keep_count(
                    self.meta_path,
                    generation,
                    len(cache),
                    cache.position,
                    durable=full,
                    store=self.label,
                )
