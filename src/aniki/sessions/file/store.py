"""``FileStore``: a directory of session files seen as a whole: its sessions, listed by owner,
tag and time, pruned and deleted."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

from typing_extensions import Unpack

from ...errors import StoreError
from .._catalog import Listing, check_listing, check_owner, check_prune
from .._local_file import LocalOptions
from ..base import SessionInfo
from . import _listing, _prune
from ._io import require_locks
from ._options import checked_options, session_directory
from .session import FileSession

__all__ = ["FileStore"]


class FileStore:
    """A directory of session files seen as a whole: its sessions, listed, pruned, deleted.

    Example::

        store = FileStore("chats/")
        session = store.session("conversation-42")
        session.set_info(title="Trip to Kyoto", owner="user-7")
        for info in store.list_sessions(owner="user-7", limit=20):
            print(info.id, info.title, info.message_count, info.updated_at)
        store.prune(older_than=timedelta(days=30))

    Args:
        directory: where the session files live; a listing only reads it (it never
            creates it).

    Keyword Args:
        durability (Durability): checked here; each session it hands out gets it (see
            :class:`~aniki.sessions.FileSession`).
        timeout (float): checked here; each session it hands out gets it.
    """

    def __init__(self, directory: str | os.PathLike[str], **options: Unpack[LocalOptions]) -> None:
        require_locks()
        self._dir = session_directory(directory)
        self._durability, self._timeout = checked_options(**options)

    @property
    def directory(self) -> Path:
        """The directory (absolute)."""
        return self._dir

    def session(self, id: str) -> FileSession:
        """The session ``id`` of this directory."""
        return FileSession(id, self._dir, durability=self._durability, timeout=self._timeout)

    def list_sessions(
        self,
        *,
        owner: str | None = None,
        tag: str | None = None,
        updated_after: datetime | None = None,
        limit: int | None = None,
        cursor: SessionInfo | None = None,
        order: Literal["updated"] = "updated",
        problems: list[StoreError] | None = None,
    ) -> list[SessionInfo]:
        """The directory's conversations (those holding messages or info), newest
        ``updated_at`` first (ties by id): every one, or only those of ``owner``, with
        ``tag``, or written after ``updated_after`` (aware); a page of ``limit``, and the
        next after ``cursor`` (the last info of the page before). No directory: none.

        By owner or tag, the listing reads that owner's or tag's folder of the index
        (``.index/`` in the directory) and the sessions it lists, not every session file; a
        page of every session (a ``limit``, ``cursor`` or ``updated_after``) reads the
        index by update time from its newest end (made on the first such listing of a
        store written before it); a listing of every session at once reads the directory.
        Each session listed is read under its lock: its
        header, meta file and the lines appended since its count was last kept (see
        :mod:`aniki.sessions.file._listing`); ``updated_at`` is its file's modification
        time.

        A ``.jsonl`` file that cannot be listed (damaged, of another program, written by a
        newer aniki, named for another session, unreadable) is left out, and the rest are
        still listed. Each such file gives one :class:`~aniki.StoreError` naming it (its
        ``store`` is ``file://<path>``; a damaged or foreign file gives a
        :class:`~aniki.CorruptStoreError`): appended to ``problems`` when a list is passed,
        logged as a warning on the ``aniki`` logger otherwise. Damage in lines a listing
        does not read is found by the session's own reads and writes. Example::

            problems: list[StoreError] = []
            for info in FileStore("chats/").list_sessions(owner="user-7", problems=problems):
                print(info.id, info.title, info.message_count)
            for problem in problems:
                print("skipped:", problem)

        Raises :class:`~aniki.UserError` for a bad query (see
        :meth:`SessionStore.list_sessions <aniki.sessions.store.SessionStore.list_sessions>`).
        """
        listing = check_listing(
            owner=owner,
            tag=tag,
            updated_after=updated_after,
            limit=limit,
            cursor=cursor,
            order=order,
        )
        return _listing.list_sessions(
            self._dir, listing, timeout=self._timeout, problems=problems, durable=self._full
        )

    def prune(self, *, older_than: timedelta, owner: str | None = None) -> int:
        """Remove every conversation (of ``owner``) last written more than ``older_than``
        ago, whole: its file, meta file (derived state, held approvals, runs), info and
        index markers; how many went. Each is removed under its own lock, in batches of at
        most 100 (see :mod:`aniki.sessions.file._prune`); one that cannot be read (damaged,
        locked past ``timeout``) is left in place and logged. Example::

            store.prune(older_than=timedelta(days=30))
        """
        return self._prune(check_prune(older_than, owner), owner)

    def delete_sessions(self, *, owner: str) -> int:
        """Remove every conversation of ``owner`` as :meth:`prune` removes one; how many
        went (a user's "delete my data")."""
        return self._delete(check_owner(owner))

    def _list(self, listing: Listing) -> list[SessionInfo]:
        # For open_store (aniki.sessions._local_backend): checked already; problems logged.
        return _listing.list_sessions(
            self._dir, listing, timeout=self._timeout, problems=None, durable=self._full
        )

    def _prune(self, cutoff: datetime, owner: str | None) -> int:
        return _prune.remove(
            self._dir, cutoff=cutoff, owner=owner, timeout=self._timeout, durable=self._full
        )

    def _delete(self, owner: str) -> int:
        return _prune.remove(
            self._dir, cutoff=None, owner=owner, timeout=self._timeout, durable=self._full
        )

    @property
    def _full(self) -> bool:
        return self._durability == "full"

    def __repr__(self) -> str:
        return f"FileStore({str(self._dir)!r})"
