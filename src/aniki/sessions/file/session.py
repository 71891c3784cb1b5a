"""``FileSession``: one append-only JSON-lines file per conversation, in a directory.

Each write (one message, or a whole batch as one line) is a single ``write`` of a complete
line, made under an exclusive ``flock`` of the session file; reads hold a shared lock, so
several processes (and threads) can share a session. A line counts once its newline is on
disk: a crash mid-write leaves a torn last line that readers ignore and the next writer cuts
off. ``clear()`` rewrites the header's generation in place and truncates the file, so every
instance notices. The layout is described in :mod:`aniki.sessions.file._format`.

``fork()``, ``undo()`` and an import (``_replace``) are in :mod:`aniki.sessions.file._edits`.
Some of them put a new file in place of the session's file (a rename): every instance that
finds a sign of it (a torn last line, no header, a slow-path write) looks whether the path
still names the file it holds and, when not, reopens it and tries again (``Replaced``).

Derived state (``set_meta``) lives beside the file in ``<name>.meta.json``, replaced
atomically (write a temporary file, then rename) and tied to the generation it was
written in, so a ``clear()`` drops it even if the process died half-way.

Durability: with ``"off"`` and ``"normal"`` (the default; the two are the same here) every
acknowledged write survives a process crash, since the data is in the kernel once ``write``
returns; a power loss may lose the last writes. ``"full"`` adds an ``fsync`` per write, so
acknowledged writes survive a power loss too.

Speed: each instance remembers the byte offset it has read up to, so ``get_messages()``
reads only what was appended since, however long the history.

Needs POSIX file locks (Linux, macOS); on Windows use :class:`~aniki.sessions.SQLiteSession`.
"""

from __future__ import annotations

import json
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar, cast

from ..._stamps import stamp
from ...errors import CorruptStoreError, StoreUnavailableError
from ...messages import Message, MessageLike
from .._codec import (
    Durability,
    check_durability,
    check_limit,
    check_meta_key,
    check_seconds,
    check_session_id,
    decode_messages,
    encode_batch,
    encode_message,
    encode_meta,
    to_messages,
)
from .._fork import count as fork_count
from .._guard import admit, in_force
from .._pages import Page
from ..memory import meta_json
from . import _edits, _pages
from ._format import DATA_SUFFIX, HEADER_READ, META_SUFFIX, file_stem, header, parse_header
from ._io import (
    DEFAULT_TIMEOUT,
    Replaced,
    end_of_records,
    flock,
    fsync_directory,
    last_records,
    load_meta,
    lock,
    read_meta,
    replace_file,
    require_locks,
    same_file,
    unlock,
    write_at,
)
from .store import WAITS_FOR, FileStore, session_directory

__all__ = ["FileSession", "FileStore"]

T = TypeVar("T")

_REOPENS = 100
"""How many times in a row one call reopens a file that another put a new file in place of
before it gives up (each time, that other call completed: never reached in practice)."""

_DAMAGE_HINT = (
    "No write is made to a damaged file: repair or delete that line, restore the file from a "
    "backup, or move the file aside (the session then starts empty)"
)
_DAMAGED: dict[tuple[int, int], tuple[int, str]] = {}
"""Session files this process found damaged, by (device, inode): a descriptor of the file,
held so that no new file is given the same inode while it is listed, and what was found.
No write goes to them."""
_DAMAGED_LOCK = threading.Lock()


class FileSession:
    """A conversation stored as a JSON-lines file in ``directory``; same id, same history.

    Example::

        session = FileSession("conversation-42", "chats/")
        session.add_message({"role": "user", "content": "Hi"})
        FileSession("conversation-42", "chats/").get_messages()  # (Message(... 'Hi'),)

    Args:
        id: the conversation's id (any non-empty text up to 1,024 characters, without NUL);
            it is encoded into a safe file name, so it can never point outside ``directory``.
        directory: where session files live; created on the first write.
        durability: ``"normal"`` (default) or ``"full"``; see the module docstring.
        timeout: seconds a call waits for another process's lock on the file (default 5;
            0 means not at all) before raising :class:`~aniki.StoreUnavailableError`.

    Every argument is checked here, so a bad one raises :class:`~aniki.UserError` at once,
    not on first use.
    """

    def __init__(
        self,
        id: str,
        directory: str | os.PathLike[str],
        *,
        durability: Durability = "normal",
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        require_locks()
        self._id = check_session_id(id)
        self._durability = check_durability(durability)
        self._timeout = check_seconds(timeout, name="timeout", waits_for=WAITS_FOR, zero=True)
        self._dir = session_directory(directory)
        stem = file_stem(self._id)
        self._path = self._dir / (stem + DATA_SUFFIX)
        self._meta_path = self._dir / (stem + META_SUFFIX)
        self._label = f"file://{self._path}"
        self._lock = threading.RLock()
        self._fd: int | None = None
        self._fd_forks = -1
        self._closer: weakref.finalize[[int], FileSession] | None = None
        self._cache: list[Message] = []
        self._snapshot: tuple[Message, ...] | None = ()
        self._generation: int | None = None
        self._offset = 0
        self._start = 0  # the header's length, once this instance has checked it
        self._inode: tuple[int, int] | None = None  # (device, inode) of the file cached
        self._lines: _pages.LineIndex | None = None  # where each line starts, for _page

    @property
    def id(self) -> str:
        """The conversation's id."""
        return self._id

    @property
    def path(self) -> Path:
        """The session's file."""
        return self._path

    def add_message(self, message: MessageLike) -> None:
        """Validate and append one message (one line, one write)."""
        self.add_messages((message,))

    def add_messages(self, messages: Iterable[MessageLike]) -> None:
        """Validate every message, then append them as one line: all or nothing."""
        batch = stamp(to_messages(messages))
        if not batch:
            return
        text = encode_message(batch[0]) if len(batch) == 1 else encode_batch(batch)
        payload = (text + "\n").encode("utf-8")
        with self._lock:  # the hot path: plain calls rather than nested context managers
            try:
                fd = self._file(create=True)
                assert fd is not None
                lock(fd, exclusive=True, timeout=self._timeout, store=self._label)
                try:
                    self._append_locked(fd, batch, payload)
                finally:
                    unlock(fd)
            except OSError as exc:
                raise self._unavailable(exc) from exc
            except Replaced:  # another file is at the path now: append to that one
                self.close()
                self._using(  # with create=True, fd is never None
                    lambda fd: self._append_locked(cast(int, fd), batch, payload),
                    create=True,
                    exclusive=True,
                )

    def _add_after(
        self,
        messages: list[Message],
        after: str | None,
        *,
        read: bool = False,
        limit: int | None = None,
    ) -> tuple[Message, ...] | None:
        # add_messages only after the message with the id `after` (aniki.sessions._chain.
        # AppendsAfter), checked under the file's exclusive lock; None, writing nothing, if not.
        batch = stamp(to_messages(messages))
        if not _edits.append_after(self, batch, after):
            return None
        return self.get_messages(limit) if read else tuple(batch)

    def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        """The history, oldest first; with ``limit``, only the most recent ``limit``."""
        limit = check_limit(limit)
        return self._using(lambda fd: self._read(fd, limit), create=False, exclusive=False)

    def _read(self, fd: int | None, limit: int | None) -> tuple[Message, ...]:
        if fd is None:
            self._reset(None, 0)
        elif limit is not None and self._generation is None:
            # Nothing cached yet: read only the tail, backwards, so that a policy over a
            # freshly opened session costs the size of its window, not of the file.
            return self._tail(fd, limit)
        else:
            self._refresh(fd)
        if limit is not None:
            return tuple(self._cache[-limit:]) if limit > 0 else ()
        if self._snapshot is None:
            self._snapshot = tuple(self._cache)
        return self._snapshot

    def _page(self, start: int, limit: int) -> Page:
        """Messages ``start`` to ``start + limit`` under the shared lock (see
        :func:`aniki.sessions._pages.read_page`), through an index of the file's lines kept
        on this instance (see :mod:`aniki.sessions.file._pages`)."""
        return self._using(
            lambda fd: _pages.read_page(self, fd, start, limit), create=False, exclusive=False
        )

    def clear(self) -> None:
        """Delete the history and its derived state; other instances see it on their next read."""
        self._using(self._clear, create=False, exclusive=True)

    def _clear(self, fd: int | None) -> None:
        if fd is None:
            read_meta(self._meta_path, 0, store=self._label)  # damaged: refuse
            self._meta_path.unlink(missing_ok=True)
            self._reset(None, 0)
            return
        generation, start = self._checked_for_write(fd)
        document = load_meta(self._meta_path, store=self._label)  # damaged: refuse
        if document is not None and document.get("generation") != generation:
            # Not written for this generation: stale, or written by an undo that died before
            # bumping the header, which would hold for the next one. It goes first.
            self._meta_path.unlink()
        # The generation goes first: a crash before the truncation then only looks as if
        # the clear never happened, to every reader.
        os.pwrite(fd, header(self._id, generation + 1), 0)
        os.ftruncate(fd, start)
        self._meta_path.unlink(missing_ok=True)
        self._sync(fd)
        self._reset(generation + 1, start)

    def fork(self, new_id: str, *, upto: str | None = None) -> FileSession:
        """A new session ``new_id`` in the same directory, with the same options, holding a
        copy of this history up to and including the message whose id is ``upto`` (all of
        it when ``None``) and this session's derived state (meta) except the keys in
        :data:`~aniki.sessions._edits.FORK_SKIPPED_META`. Example::

            draft = session.fork("conversation-42-draft", upto=messages[3].id)

        Messages keep their ids, times, model and usage (their records are copied byte for
        byte). The history copied is the one stored when the fork read it: an append made
        meanwhile goes to this session only.

        Atomic, with concurrent writers and across a crash (kill -9) at any point: the new
        session's file is written whole under a temporary name, then renamed into place, so
        the new session is whole or absent. Its meta file is written first, for a
        generation no earlier file of that name had, so a crash in between leaves no meta
        that holds. With ``durability="full"`` both are on disk before this returns.

        Raises :class:`~aniki.UserError` when ``new_id`` is this session's id, when session
        ``new_id`` already holds messages (a session that was cleared holds none and may be
        forked into: its old meta is replaced), or when no message has the id ``upto``
        (messages stored before ids existed have none); nothing is written then.
        """
        return _edits.fork(self, new_id, upto)

    def undo(self) -> tuple[Message, ...]:
        """Remove the last turn (the last user message and everything after it) and return
        what was removed, oldest first; ``()``, and nothing removed, when the history holds
        no user message. Example::

            removed = session.undo()  # (Message(role='user', ...), Message(role='assistant', ...))

        Other instances (other objects, other processes) see the removal on their next read.
        Derived state (meta) is kept as it is: the policies check their stored cut and
        summary against the history and start afresh where they no longer fit.

        Atomic, across a crash (kill -9) at any point: the turn is wholly removed or wholly
        there. When the last user message starts a line (as the Runner writes it), the
        header's generation is bumped in place, then the file is cut where that line starts.
        When it sits inside a batch (one line), a new file with that line shortened is
        written and renamed into place. See :mod:`aniki.sessions.file._edits`.

        Raises :class:`~aniki.CorruptStoreError`, writing nothing, when the file or its
        meta file is damaged.
        """
        return _edits.undo(self)

    def _replace(self, messages: Iterable[MessageLike]) -> None:
        """``clear()`` then ``add_messages(messages)`` in one atomic step, keeping the ids
        and times the messages carry (``aniki sessions import``): a new file, one line per
        message, renamed into place. Derived state goes with the old history."""
        _edits.replace(self, stamp(to_messages(messages), keep=True))

    def get_meta(self, key: str) -> Any:
        """The derived-state value stored under ``key`` (``None`` when absent)."""
        check_meta_key(key)
        return self._using(lambda fd: self._meta(fd).get(key), create=False, exclusive=False)

    def _meta(self, fd: int | None) -> dict[str, Any]:
        """The derived-state values that hold for the session file (locked)."""
        if fd is None:
            return {}
        if not same_file(fd, self._path):
            raise Replaced  # the meta file would be matched against the wrong generation
        head = self._head(fd)
        return read_meta(self._meta_path, 0 if head is None else head[0], store=self._label)

    def set_meta(self, key: str, value: Any) -> None:
        """Store a JSON-safe value under ``key`` beside the history; ``None`` deletes it."""
        check_meta_key(key)
        if value is not None:
            value = json.loads(encode_meta(key, value))
        self._update_meta(key, lambda current: True, value)

    def _swap_meta(self, key: str, expected: Any, value: Any) -> bool:
        """Set meta ``key`` to ``value`` only if it now holds ``expected``; whether it did.

        Atomic across processes: it holds the session file's exclusive lock, which every
        meta write takes. Values are compared as JSON (same types and values, any key
        order); ``expected=None`` means the key is absent, and ``value=None`` deletes it.
        """
        check_meta_key(key)
        wanted = meta_json(key, expected)
        if value is not None:
            value = json.loads(encode_meta(key, value))
        return self._update_meta(key, lambda current: meta_json(key, current) == wanted, value)

    def _update_meta(self, key: str, condition: Callable[[Any], bool], value: Any) -> bool:
        def update(fd: int | None) -> bool:
            assert fd is not None
            generation, _ = self._checked_for_write(fd)
            values = read_meta(self._meta_path, generation, store=self._label)
            if not condition(values.get(key)):
                return False
            if value is None:
                values.pop(key, None)
            else:
                values[key] = value
            document = {"aniki": "meta", "generation": generation, "values": values}
            data = json.dumps(document, ensure_ascii=False).encode("utf-8")
            replace_file(self._meta_path, data, durable=self._durability == "full")
            return True

        return self._using(update, create=True, exclusive=True)

    def close(self) -> None:
        """Close the file and drop the cache; the session reopens it on next use."""
        with self._lock:
            if self._closer is not None:
                self._closer()
                self._closer = None
            self._fd = None
            self._start = 0
            self._inode = None
            self._reset(None, 0)

    def __enter__(self) -> FileSession:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileSession(id={self._id!r}, directory={str(self._dir)!r})"

    # --- file access --------------------------------------------------------------------

    def _using(self, work: Callable[[int | None], T], *, create: bool, exclusive: bool) -> T:
        """``work(fd)`` with the session file locked (``fd`` is ``None`` when there is no
        file and ``create`` is false); when ``work`` finds that another file was put at the
        path (:class:`Replaced`), it runs again on that one."""
        with self._lock, self._errors():
            for _ in range(_REOPENS):
                fd = self._file(create)
                if fd is None:
                    return work(None)
                with flock(fd, exclusive=exclusive, timeout=self._timeout, store=self._label):
                    try:
                        return work(fd)
                    except Replaced:
                        pass
                self.close()
            raise StoreUnavailableError(
                f"the session file was replaced {_REOPENS} times in a row while this call "
                "tried to use it; retry later",
                store=self._label,
            )

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            raise self._unavailable(exc) from exc

    def _unavailable(self, exc: OSError) -> StoreUnavailableError:
        return StoreUnavailableError(
            f"cannot use the session file ({exc}); check the directory, its permissions "
            "and free disk space",
            store=self._label,
        )

    def _append_locked(self, fd: int, batch: list[Message], payload: bytes) -> None:
        # No look at whether the path still names this file here: whoever puts another file
        # in its place first adds a torn line to this one (see _edits), so the size is not
        # this instance's offset any more and the append takes the checked path below.
        status = os.fstat(fd)
        if _DAMAGED and (status.st_dev, status.st_ino) in _DAMAGED:
            raise self._refused(fd, status)
        size = status.st_size
        generation: int | None
        start = self._start
        # A run's turn guard (see _guard) needs the header's generation, read here and now.
        fast = start and size == self._offset >= start and not in_force()
        if fast and os.pread(fd, 1, size - 1) == b"\n":
            # Where this instance's view ends is where the file ends: the header was checked
            # before and the records are complete. If a clear happened meanwhile, the next
            # read sees the new generation and starts over, so extending the cache is safe.
            generation, end = self._generation, size
        else:
            # Every record this instance has not read is decoded first: nothing is ever
            # appended to a file with a damaged line.
            generation, start = self._checked_for_write(fd)
            admit(self, (status.st_dev, status.st_ino, generation))  # the file, and its state
            self._start = start
            end = end_of_records(fd, start)
            if end == start and (self._generation, self._offset) != (generation, end):
                self._reset(generation, end)  # the session is empty: nothing to miss
        write_at(fd, payload, end)
        self._sync(fd)
        if generation == self._generation and end == self._offset:
            self._cache.extend(batch)
            self._snapshot = None
            self._offset = end + len(payload)

    def _file(self, create: bool) -> int | None:
        if self._fd is not None and self._fd_forks == fork_count():
            return self._fd
        if self._closer is not None:
            self._closer.detach()  # inherited through fork: the parent still uses it
        flags = os.O_RDWR | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(self._path, flags)
        except FileNotFoundError:
            if not create:
                return None
            self._dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._path, flags | os.O_CREAT, 0o666)
            if self._durability == "full":
                fsync_directory(self._dir)
        self._hold(fd)
        return fd

    def _hold(self, fd: int) -> None:
        """Make ``fd`` this instance's file; what is cached is kept only if it is the same
        file (a forked child reopening its parent's), never for another one."""
        self._fd, self._fd_forks = fd, fork_count()
        self._closer = weakref.finalize(self, os.close, fd)
        status = os.fstat(fd)
        if (status.st_dev, status.st_ino) != self._inode:
            self._inode = (status.st_dev, status.st_ino)
            self._start = 0
            self._reset(None, 0)

    def _checked_for_write(self, fd: int) -> tuple[int, int]:
        """The header's generation and length, once every record this instance has not read
        yet decodes; a file without a header gets a fresh one.

        Raises :class:`~aniki.CorruptStoreError` before anything is written when the header
        or a record is damaged, so a write never lands in (or cuts) a damaged file. Raises
        :class:`Replaced` when the path names another file now.
        """
        if not same_file(fd, self._path):
            raise Replaced
        if _DAMAGED:
            status = os.fstat(fd)
            if (status.st_dev, status.st_ino) in _DAMAGED:
                raise self._refused(fd, status)
        head = self._head(fd)
        if head is None:  # empty, or its creation was cut short: nothing to lose
            fresh = header(self._id, 0)
            os.ftruncate(fd, 0)
            write_at(fd, fresh, 0)
            return 0, len(fresh)
        self._read_records(fd, head)
        generation, length = head
        current = header(self._id, generation)
        if len(current) == length and os.pread(fd, length, 0) != current:
            # Written by an older aniki: stamped with this version before anything of it is
            # added (same length, so the records stay where they are). Not write_at, which
            # cuts the file at the offset when a write fails.
            os.pwrite(fd, current, 0)
        return head

    def _refresh(self, fd: int) -> None:
        head = self._head(fd)
        if head is None:
            if not same_file(fd, self._path):
                raise Replaced
            self._reset(None, 0)
            return
        self._read_records(fd, head)

    def _read_records(self, fd: int, head: tuple[int, int]) -> None:
        """Bring the cache up to the file's last complete line (header ``head`` checked)."""
        generation, start = head
        self._start = start
        size = os.fstat(fd).st_size
        if generation != self._generation or size < self._offset:
            self._reset(generation, start)
        whole = self._offset == start  # this read covers every record of the file
        if size > self._offset:
            data = os.pread(fd, size - self._offset, self._offset)
            complete = data.rfind(b"\n") + 1  # a torn last line is not a record
            if complete < len(data) and not same_file(fd, self._path):
                raise Replaced  # the torn line is the mark of a file replaced (see _edits)
            if complete:
                decoded: list[Message] = []
                position = self._offset
                try:
                    for line in data[: complete - 1].split(b"\n"):
                        decoded.extend(decode_messages(line, store=self._label))
                        position += len(line) + 1
                except CorruptStoreError as exc:
                    # The cache stays as it was: later reads and writes meet the line again.
                    line_number = os.pread(fd, position, 0).count(b"\n") + 1
                    where = f"line {line_number} (at byte {position})"
                    raise self._damaged(fd, where, exc) from exc
                self._cache.extend(decoded)
                self._snapshot = None
                self._offset += complete
        if whole and _DAMAGED:  # the whole file reads well again: it was repaired in place
            status = os.fstat(fd)
            with _DAMAGED_LOCK:
                repaired = _DAMAGED.pop((status.st_dev, status.st_ino), None)
            if repaired is not None:
                os.close(repaired[0])

    def _head(self, fd: int) -> tuple[int, int] | None:
        try:
            return parse_header(os.pread(fd, HEADER_READ, 0), self._id, store=self._label)
        except CorruptStoreError as exc:
            self._remember(fd, str(exc))
            raise

    def _damaged(self, fd: int, where: str, exc: CorruptStoreError) -> CorruptStoreError:
        reason = str(exc).split(" [store: ")[0]
        self._remember(fd, f"{where}: {reason}")
        return CorruptStoreError(
            f"the session file is damaged: {where} cannot be read ({reason}). {_DAMAGE_HINT}",
            store=self._label,
        )

    def _remember(self, fd: int, reason: str) -> None:
        status = os.fstat(fd)
        key = (status.st_dev, status.st_ino)
        with _DAMAGED_LOCK:
            if key not in _DAMAGED:
                _DAMAGED[key] = (os.dup(fd), reason.split(" [store: ")[0])

    def _refused(self, fd: int, status: os.stat_result) -> Exception:
        if not same_file(fd, self._path):
            return Replaced()  # moved aside (or replaced): the file now at the path is used
        found = _DAMAGED.get((status.st_dev, status.st_ino), (-1, ""))[1]
        return CorruptStoreError(
            f"the session file was found damaged earlier ({found}). {_DAMAGE_HINT}",
            store=self._label,
        )

    def _tail(self, fd: int, limit: int) -> tuple[Message, ...]:
        if not same_file(fd, self._path):  # a read of the whole tail: one look is cheap
            raise Replaced
        head = self._head(fd)
        if head is None or limit == 0:
            return ()
        self._start = head[1]
        label = self._label
        try:
            found = last_records(
                fd, head[1], limit, lambda line: decode_messages(line, store=label)
            )
        except CorruptStoreError as exc:
            raise self._damaged(fd, "a line near its end", exc) from exc
        return tuple(found[-limit:])

    def _reset(self, generation: int | None, offset: int) -> None:
        self._cache = []
        self._snapshot = ()
        self._generation = generation
        self._offset = offset

    def _sync(self, fd: int) -> None:
        if self._durability == "full":
            os.fsync(fd)
