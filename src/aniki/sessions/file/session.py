"""``FileSession``: one append-only JSON-lines file per conversation, in a directory.

Each write (one message, or a whole batch as one line) is a single ``write`` of a complete
line, made under an exclusive ``flock`` of the session file; reads hold a shared lock, so
several processes (and threads) can share a session. A line counts once its newline is on
disk: a crash mid-write leaves a torn last line that readers ignore and the next writer cuts
off. ``clear()`` rewrites the header's generation in place and truncates the file, so every
instance notices. The layout is described in :mod:`aniki.sessions.file._format`.

This class checks and encodes; the file itself (its descriptor, lock, header, damage, and
what was read of it) is held by a :class:`~aniki.sessions.file._file.SessionFile`.
``fork()``, ``undo()`` and an import (``_replace``) are in :mod:`aniki.sessions.file._edits`,
meta and ``clear()`` in :mod:`aniki.sessions.file._meta`, ``info()`` and ``set_info()`` in
:mod:`aniki.sessions.file._info`. Some edits put a new file in place
of the session's file (a rename): every instance that finds a sign of it (a torn last line,
no header, a slow-path write) looks whether the path still names the file it holds and,
when not, reopens it and tries again (``Replaced``).

Derived state (``set_meta``) and the session's info (``set_info``) live beside the file in
``<name>.meta.json``, replaced atomically (write a temporary file, then rename) and tied to
the generation it was written in, so a ``clear()`` drops them even if the process died
half-way (see :mod:`aniki.sessions.file._record`).

Durability: with ``"off"`` and ``"normal"`` (the default; the two are the same here) every
acknowledged write survives a process crash, since the data is in the kernel once ``write``
returns; a power loss may lose the last writes. ``"full"`` adds an ``fsync`` per write, so
acknowledged writes survive a power loss too.

Speed: each instance keeps what it has read in a
:class:`~aniki.sessions._history_cache.HistoryCache` (the position: the byte offset read up
to), so ``get_messages()`` reads only what was appended since, however long the history.

Needs POSIX file locks (Linux, macOS); on Windows use :class:`~aniki.sessions.SQLiteSession`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..._stamps import stamp
from ...messages import Message, MessageLike, to_messages
from .._args import Durability, check_limit, check_meta_key, check_session_id
from .._catalog import KEEP, Keep, check_info
from .._closing import Closing
from .._codec import encode_meta
from .._edits import fork_target
from .._local_file import LocalOptions
from .._pages import Page
from ..base import SessionInfo
from ..memory import meta_json
from . import _edits, _forks, _info, _meta, _pages
from ._attachments import encode
from ._file import SessionFile
from ._io import require_locks
from ._options import DEFAULT_TIMEOUT, checked_options, session_directory

__all__ = ["FileSession"]


class FileSession(Closing):
    """A conversation stored as a JSON-lines file in ``directory``; same id, same history.

    Example::

        with FileSession("conversation-42", "chats/") as session:  # closes the file after
            session.add_message({"role": "user", "content": "Hi"})
        FileSession("conversation-42", "chats/").get_messages()  # (Message(... 'Hi'),)

    Args:
        id: the conversation's id (any non-empty text up to 1,024 characters, without NUL);
            it is encoded into a safe file name, so it can never point outside ``directory``.
        directory: where session files live; created on the first write.
        durability: ``"normal"`` (default) or ``"full"``; see the module docstring.
        timeout: seconds a call waits for another process's lock on the file (default 5;
            0 means not at all) before raising :class:`~aniki.StoreUnavailableError`.

    A bad argument raises :class:`~aniki.UserError` here, when the session is made, not on
    its first use.
    """

    blocking = True  # its calls wait on I/O: the run engine makes them in a worker thread

    def __init__(
        self,
        id: str,
        directory: str | os.PathLike[str],
        *,
        durability: Durability = "normal",
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        require_locks()
        session_id = check_session_id(id)
        durability, timeout = checked_options(durability=durability, timeout=timeout)
        self._file = SessionFile(
            session_id, session_directory(directory), durability=durability, timeout=timeout
        )
        self._lines: _pages.LineIndex | None = None  # where each line starts, for _page

    @property
    def id(self) -> str:
        """The conversation's id."""
        return self._file.id

    @property
    def path(self) -> Path:
        """The session's file."""
        return self._file.path

    @property
    def _options(self) -> LocalOptions:
        # What a fork or an async twin of this session is made with.
        return {"durability": self._file.durability, "timeout": self._file.timeout}

    def add_message(self, message: MessageLike) -> None:
        """Validate and append one message (one line, one write)."""
        self.add_messages((message,))

    def add_messages(self, messages: Iterable[MessageLike]) -> None:
        """Validate every message, then append them as one line: all or nothing."""
        batch = stamp(to_messages(messages))
        if batch:
            self._file.append(batch, *encode(batch))

    def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        """The history, oldest first; with ``limit``, only the most recent ``limit``."""
        limit = check_limit(limit)
        file = self._file
        return file.using(lambda fd: file.read(fd, limit), create=False, exclusive=False)

    def _add_after(
        self,
        messages: list[Message],
        after: str | None,
        *,
        read: bool = False,
        limit: int | None = None,
    ) -> tuple[Message, ...] | None:
        # add_messages only after the message with the id `after` (aniki.sessions._capabilities.
        # AppendsAfter), checked under the file's exclusive lock; None, writing nothing, if not.
        batch = stamp(to_messages(messages))
        if not _edits.append_after(self._file, batch, after):
            return None
        return self.get_messages(limit) if read else tuple(batch)

    def _page(self, start: int, limit: int) -> Page:
        """Messages ``start`` to ``start + limit`` under the shared lock (see
        :func:`aniki.sessions._pages.read_page`), through an index of the file's lines kept
        on this instance (see :mod:`aniki.sessions.file._pages`)."""

        def read(fd: int | None) -> Page:
            page, self._lines = _pages.read_page(self._file, fd, self._lines, start, limit)
            return page

        return self._file.using(read, create=False, exclusive=False)

    def clear(self) -> None:
        """Delete the history and its derived state; other instances see it on their next read."""
        file = self._file
        file.using(lambda fd: _meta.clear(file, fd), create=False, exclusive=True)

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
        target = FileSession(fork_target(self.id, new_id), self._file.directory, **self._options)
        _forks.fork(self._file, target._file, upto)
        return target

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
        return _edits.undo(self._file)

    def _replace(self, messages: Iterable[MessageLike]) -> None:
        """``clear()`` then ``add_messages(messages)`` in one atomic step, keeping the ids
        and times the messages carry (``aniki sessions import``): a new file, one line per
        message, renamed into place. Derived state goes with the old history."""
        _edits.replace(self._file, stamp(to_messages(messages), keep=True))

    def info(self) -> SessionInfo:
        """What this conversation is: its title, owner, tags, message count and times
        (``created_at`` and ``updated_at`` are ``None`` until it is first written). Example::

            session.info()  # SessionInfo(id='conversation-42', message_count=2, ...)

        Read under the file's shared lock from its header, its meta file and the lines
        appended since its count was last kept (see :mod:`aniki.sessions.file._info`):
        ``updated_at`` is the file's modification time. Raises
        :class:`~aniki.CorruptStoreError` when the header, the meta file or one of those
        lines is damaged.
        """
        file = self._file
        return file.using(lambda fd: _info.read(file, fd), create=False, exclusive=False)

    def set_info(
        self,
        *,
        title: str | Keep | None = KEEP,
        owner: str | Keep | None = KEEP,
        tags: Iterable[str] | Keep = KEEP,
    ) -> None:
        """Set the conversation's ``title``, ``owner`` (a user id) or ``tags``; a keyword
        left out is left as it is, ``None`` (``()`` for tags) removes it. Counts as a write:
        ``updated_at`` moves. Example::

            session.set_info(title="Trip to Kyoto", owner="user-7", tags=["travel"])

        Kept in the meta file, under the file's exclusive lock, with the store's index by
        owner and tag (``.index/`` in the directory) kept in step; ``clear()`` removes it.

        Raises:
            UserError: a title of more than 1000 characters, an empty owner or tag, more
                than 50 tags (see the limits in docs/sessions.md); nothing is written.
            CorruptStoreError: the session file or its meta file is damaged.
        """
        change = check_info(title=title, owner=owner, tags=tags)
        _info.set_info(self._file, change)

    def get_meta(self, key: str) -> Any:
        """The derived-state value stored under ``key`` (``None`` when absent)."""
        check_meta_key(key)
        file = self._file
        return file.using(lambda fd: _meta.values(file, fd).get(key), create=False, exclusive=False)

    def set_meta(self, key: str, value: Any) -> None:
        """Store a JSON-safe value under ``key`` beside the history; ``None`` deletes it."""
        check_meta_key(key)
        if value is not None:
            value = json.loads(encode_meta(key, value))
        _meta.update(self._file, key, _always, value)

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

        def matches(current: Any) -> bool:
            return meta_json(key, current) == wanted

        return _meta.update(self._file, key, matches, value)

    def close(self) -> None:
        """Close the file and drop the cache; the session reopens it on next use."""
        self._file.close()

    def __repr__(self) -> str:
        return f"FileSession(id={self.id!r}, directory={str(self._file.directory)!r})"


def _always(current: Any) -> bool:
    """The condition of a plain ``set_meta``: whatever the key holds now."""
    return True
