"""``SQLiteSession``: conversation history in a SQLite file, the embedded default store.

Durability levels (the ``durability=`` argument; SQLite runs in WAL mode at every level):

============  ======================================  =========================================
level         after a process crash (kill -9, OOM)    after a power loss or OS crash
============  ======================================  =========================================
``"off"``     every acknowledged append is kept       recent appends may be lost and the file
                                                      may be corrupted (no fsync at all)
``"normal"``  every acknowledged append is kept       the last appends may be rolled back; the
(default)                                             file stays consistent
``"full"``    every acknowledged append is kept       every acknowledged append is kept (an
                                                      fsync per commit)
============  ======================================  =========================================

Concurrency: any number of processes may share a file; each append (or batch) is one
transaction, so batches never interleave and never half-apply. Readers never wait for
writers. A writer waits up to ``timeout`` seconds for another writer, then raises
:class:`~aniki.StoreUnavailableError`.

Threads: every call is serialised by one lock per file and process, so a session (and
many sessions of one file) may be used from several threads. Calls block: a run makes them
in a worker thread, or on the loop's thread when they cannot wait (:mod:`aniki.sessions._now`).

Speed: each instance keeps the messages it has read in a
:class:`~aniki.sessions._history_cache.HistoryCache` (the position: the last key read; the
generation: the session's, bumped by :meth:`SQLiteSession.clear` and ``undo``).
``get_messages()`` fetches only rows after that key, so a turn costs O(new messages) however
long the history, and still sees what other instances and processes appended or cleared.
The messages an instance wrote are read back without decoding.

Attachments: their bytes are stored apart from the messages, once per content (the same
image sent ten times is stored once), in the transaction that stores the message, and go
with the last message that names them; see :mod:`aniki.sessions.sqlite._blobs`.

:class:`~aniki.sessions.SQLiteStore`, the file seen as a whole, is in
:mod:`aniki.sessions.sqlite.store`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import Any, TypeVar

from ..._stamps import stamp, stamp_one
from ...messages import Message, MessageLike, to_message, to_messages
from .._args import Durability, check_limit, check_meta_key, check_session_id
from .._blobs import split
from .._catalog import KEEP, Keep, check_info
from .._closing import Closing
from .._codec import encode_meta
from .._edits import fork_target
from .._gc import MANY, paused
from .._history_cache import HistoryCache
from .._local_file import LocalOptions
from .._now import NotNow
from .._pages import Page
from ..base import SessionInfo
from ..memory import meta_json
from ._blobs import record_of, records_of
from ._db import Database, database_for
from ._decode import decoded, decoded_meta
from ._edits import append_after, append_one, append_rows, append_text, fork_rows, undo_rows
from ._info import read_info, write_info
from ._meta import get_meta, set_meta, swap_meta
from ._options import DEFAULT_TIMEOUT, absolute_path, checked_options
from ._pages import read_page
from ._reads import read_after, read_tail, size_of
from ._sql import clock

T = TypeVar("T")

__all__ = ["SQLiteSession"]

_OWN_LIMIT = 4096
_FIRST_READ_NOW = 500


class SQLiteSession(Closing):
    """A conversation stored in a SQLite file; same id and file means the same history.

    Example::

        session = SQLiteSession("conversation-42", "chat.db")
        session.add_message({"role": "user", "content": "Hi"})
        SQLiteSession("conversation-42", "chat.db").get_messages()  # (Message(... 'Hi'),)

    Args:
        id: the conversation's id (any non-empty text up to 1,024 characters, without NUL).
        path: the database file; created when missing (its directory must exist).
        durability: ``"off"``, ``"normal"`` (default) or ``"full"``; see the module docstring.
        timeout: seconds to wait for another process's write before giving up (a finite
            number, 0 or more).

    Every argument is checked here, so a bad one raises :class:`~aniki.UserError` at once,
    not on first use.
    """

    blocking = True  # its calls wait on I/O: the run engine makes them in a worker thread

    def __init__(
        self,
        id: str,
        path: str | os.PathLike[str] = "aniki.db",
        *,
        durability: Durability = "normal",
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self._id = check_session_id(id)
        self._path = absolute_path(path)
        self._durability, self._timeout = checked_options(durability=durability, timeout=timeout)
        self._db: Database | None = None
        self._cache: HistoryCache[int] = HistoryCache()  # position: the last key read
        self._number: int | None = None
        self._own: dict[str, Message] = {}
        self._read_once = False  # a first read may be long: it is never tried now

    @property
    def id(self) -> str:
        """The conversation's id."""
        return self._id

    @property
    def path(self) -> Path:
        """The database file (absolute)."""
        return self._path

    @property
    def durability(self) -> Durability:
        """The durability level of this session's commits."""
        return self._durability

    @property
    def _options(self) -> LocalOptions:
        # What a fork or an async twin of this session is made with.
        return {"durability": self._durability, "timeout": self._timeout}

    def add_message(self, message: MessageLike) -> None:
        """Validate and append one message (one transaction)."""
        message = stamp_one(to_message(message))
        if message.attachments:
            record, blobs = split(message)
            self._append([message], [record], blobs)
            return
        # The hottest path there is, written out: one statement (see Database.append).
        record = record_of(message)
        db = self._db or self._database
        number = self._number
        if number is None:
            number = self._number = db.register(self._id)
        append_text(db, number, record)
        own = self._own  # see _remember, written out here
        if len(own) > _OWN_LIMIT:
            own.clear()
        own[record] = message

    def add_messages(self, messages: Iterable[MessageLike]) -> None:
        """Validate every message, then append them in one transaction: all or nothing."""
        batch = stamp(to_messages(messages))
        if batch:
            self._append(batch, *records_of(batch))

    def _add_then_get(
        self, messages: list[Message], limit: int | None = None
    ) -> tuple[Message, ...]:
        # add_messages, get_messages: one statement when nobody wrote since this object read.
        if len(messages) != 1 or messages[0].attachments:
            self.add_messages(messages)
            return self.get_messages(limit)
        batch = stamp(to_messages(messages))
        db, cache, record = self._database, self._cache, record_of(batch[0])
        with db.lock:
            if self._number is None:
                self._number = db.register(self._id)
            if append_one(db, self._number, record) == (cache.position + 1, cache.generation):
                cache.extend(batch, cache.position + 1)
                return cache.view(check_limit(limit))
            self._remember([record], batch)
        return self.get_messages(limit)

    def _add_after(
        self,
        messages: list[Message],
        after: str | None,
        *,
        read: bool = False,
        limit: int | None = None,
    ) -> tuple[Message, ...] | None:
        """``add_messages``, in one write transaction with the check that the last message
        stored has the id ``after`` (``None``: none is stored); ``None``, writing nothing, if
        not. See :class:`aniki.sessions._capabilities.AppendsAfter`."""
        batch = stamp(to_messages(messages))
        db = self._database
        with db.lock:
            if self._number is None:
                self._number = db.register(self._id)
            bodies, blobs = records_of(batch)
            if not append_after(db, self._number, bodies, blobs, after, clock()):
                return None
            return self.get_messages(limit) if read else tuple(batch)

    def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        """The history, oldest first; with ``limit``, only the most recent ``limit``."""
        limit = check_limit(limit)
        db = self._database
        with db.lock:
            if not self._read_once:
                with db.errors():
                    db.check_row(self._id)
                self._read_once = True
            if limit is not None and self._cache.generation is None:
                # Nothing cached yet: read only the tail, not the whole history, so that a
                # policy over a freshly opened session costs the size of its window.
                return self._tail(db, limit) if limit > 0 else ()
            self._refresh(db)
            return self._cache.view(limit)

    def _try_now(self, work: Callable[[], T]) -> T | NotNow:
        # See aniki.sessions._now: a call that finds the connection free runs on the
        # caller's thread, unless it may begin with a long read (this object's first read
        # of a history of more than _FIRST_READ_NOW messages).
        db = self._database
        if self._read_once:
            return db.now(work)
        return db.now(work, lambda: size_of(db, self._id) <= _FIRST_READ_NOW)

    def _page(self, start: int, limit: int) -> Page:
        """Messages ``start`` to ``start + limit`` in one read transaction (see
        :func:`aniki.sessions._pages.read_page`); reads only those rows, caches nothing."""
        return read_page(self._database, self._id, start, limit)

    def clear(self) -> None:
        """Delete the history, its derived state and its info; other instances see it on
        their next read."""
        db = self._database
        with db.lock:
            self._cache.reset(db.clear(self._id))

    def _replace(self, messages: Iterable[MessageLike]) -> None:
        # clear() then add_messages() in one transaction (used by `aniki sessions import`).
        batch = stamp(to_messages(messages), keep=True)
        bodies, blobs = records_of(batch)
        db = self._database
        with db.lock:
            self._cache.reset(db.replace(self._id, bodies, clock(), blobs))

    def fork(self, new_id: str, *, upto: str | None = None) -> SQLiteSession:
        """A new session ``new_id`` in this file holding a copy of this history, through the
        message whose id is ``upto`` (all of it when ``None``), and its derived state.

        The copies keep their ids, times, model and usage. Meta (a summary, a policy's cut)
        is copied too, except a reader's claim on making the next summary. One write
        transaction: the new session is whole or absent, whatever else writes to the file.

        Example::

            draft = session.fork("conversation-42-draft", upto=message.id)

        Raises:
            UserError: ``new_id`` is this session's id or already holds messages (a cleared
                session holds none), or no message has the id ``upto``.
        """
        target = fork_target(self._id, new_id)
        fork_rows(self._database, self._id, target, upto)
        return SQLiteSession(target, self._path, **self._options)

    def undo(self) -> tuple[Message, ...]:
        """Remove the last turn (the last user message and everything after it) and return
        it, oldest first; ``()``, removing nothing, when no user message is stored.

        One write transaction. Other instances, in this process or another, see the shorter
        history on their next read. Derived state stays: the policies check a stored cut
        or summary against the history and start afresh where it no longer fits.

        Example::

            removed = session.undo()  # the question and its answer, to ask again
        """
        db = self._database
        with db.lock:
            removed = undo_rows(db, self._id)
            if removed:
                self._cache.reset()
                self._own.clear()
        return tuple(removed)

    def info(self) -> SessionInfo:
        """What this conversation is: its title, owner, tags, message count and times
        (``created_at`` and ``updated_at`` are ``None`` until it is first written). One
        read of the session's row: no message is read.

        Example::

            session.info().message_count  # 2
        """
        return read_info(self._database, self._id)

    def set_info(
        self,
        *,
        title: str | Keep | None = KEEP,
        owner: str | Keep | None = KEEP,
        tags: Iterable[str] | Keep = KEEP,
    ) -> None:
        """Set the conversation's ``title``, ``owner`` (a user id) or ``tags``; a keyword
        left out is left as it is, ``None`` (``()`` for tags) removes it. Counts as a write:
        ``updated_at`` moves. One write transaction.

        Example::

            session.set_info(title="Trip to Kyoto", owner="user-7", tags=["travel"])

        Raises:
            UserError: a title of more than 1000 characters, an empty owner or tag, more
                than 50 tags (see the limits in docs/sessions.md).
        """
        change = check_info(title=title, owner=owner, tags=tags)
        write_info(self._database, self._id, change, clock())

    def get_meta(self, key: str) -> Any:
        """The derived-state value stored under ``key`` (``None`` when absent)."""
        db = self._database
        text = get_meta(db, self._id, check_meta_key(key))
        return None if text is None else decoded_meta(db, text)

    def set_meta(self, key: str, value: Any) -> None:
        """Store a JSON-safe value under ``key`` beside the history; ``None`` deletes it."""
        check_meta_key(key)
        text = None if value is None else encode_meta(key, value)
        set_meta(self._database, self._id, key, text)

    def _swap_meta(self, key: str, expected: Any, value: Any) -> bool:
        """Set meta ``key`` to ``value`` only if it now holds ``expected``; whether it did.

        Atomic across processes (one write transaction). Values are compared as JSON (same
        types and values, any key order); ``expected=None`` means the key is absent, and
        ``value=None`` deletes it.
        """
        check_meta_key(key)
        guess = None if expected is None else encode_meta(key, expected)
        text = None if value is None else encode_meta(key, value)
        db = self._database

        def matches(stored: str | None) -> bool:
            if stored is None or guess is None or stored == guess:  # the usual case: as
                return stored == guess  # written, compared without decoding
            return meta_json(key, decoded_meta(db, stored)) == meta_json(key, expected)

        return swap_meta(db, self._id, key, matches, text)

    def close(self) -> None:
        """Drop this instance's cache and its hold on the connection; it reopens on next use."""
        db, self._db = self._db, None
        with db.lock if db is not None else nullcontext():
            self._number = None
            self._cache.reset()
            self._own.clear()

    def __repr__(self) -> str:
        return f"SQLiteSession(id={self._id!r}, path={str(self._path)!r})"

    # --- the incremental cache ----------------------------------------------------------

    @property
    def _database(self) -> Database:
        if self._db is None:
            self._db = database_for(self._path, self._durability, self._timeout)
        return self._db

    def _append(self, batch: list[Message], bodies: list[str], blobs: Mapping[str, bytes]) -> None:
        db = self._database
        if self._number is None:
            self._number = db.register(self._id)
        append_rows(db, self._number, bodies, blobs)
        self._remember(bodies, batch)

    def _remember(self, bodies: list[str], batch: list[Message]) -> None:
        # What it wrote, read back without decoding (equal text, equal message); bounded.
        own = self._own
        if len(own) > _OWN_LIMIT:
            own.clear()
        own.update(zip(bodies, batch, strict=True))

    def _tail(self, db: Database, limit: int) -> tuple[Message, ...]:
        with paused(limit >= MANY):  # see aniki.sessions._gc
            rows, blobs = read_tail(db, self._id, limit)
            return tuple(decoded(db, rows, blobs, {}))

    def _refresh(self, db: Database) -> None:
        cache = self._cache
        with paused(cache.generation is None):  # a first read: maybe the whole of a long history
            generation, rows, blobs = read_after(db, self._id, cache.generation, cache.position)
            if generation != cache.generation:
                cache.reset(generation)
            if rows:
                # On damage the cache stays where it was: the next read meets the same record.
                cache.extend(decoded(db, rows, blobs, self._own), rows[-1][-2])
