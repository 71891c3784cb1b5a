"""``SQLiteStore``: a SQLite file seen as a whole: its sessions listed, pruned, deleted."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

from typing_extensions import Unpack

from .._catalog import Listing, check_listing, check_owner, check_prune
from .._local_file import LocalOptions
from ..base import SessionInfo
from ._db import Database, database_for
from ._listing import list_infos, remove_sessions
from ._options import absolute_path, checked_options
from .session import SQLiteSession

__all__ = ["SQLiteStore"]


class SQLiteStore:
    """A SQLite file seen as a whole: its sessions, listed (by owner, tag, time, in pages),
    pruned by age, or deleted by owner.

    Example::

        store = SQLiteStore("chat.db")
        session = store.session("conversation-42")
        session.add_message({"role": "user", "content": "Hi"})
        session.set_info(owner="user-7", title="Trip")
        for info in store.list_sessions(owner="user-7"):
            print(info.id, info.title, info.message_count, info.updated_at)
        store.prune(older_than=timedelta(days=90))

    ``path`` is the database file. ``durability`` and ``timeout``, checked here, are those
    of every session :meth:`session` hands out (see :class:`~aniki.sessions.SQLiteSession`).
    """

    def __init__(
        self, path: str | os.PathLike[str] = "aniki.db", **options: Unpack[LocalOptions]
    ) -> None:
        self._path = absolute_path(path)
        self._durability, self._timeout = checked_options(**options)

    @property
    def path(self) -> Path:
        """The database file (absolute)."""
        return self._path

    def session(self, id: str) -> SQLiteSession:
        """The session ``id`` of this file."""
        return SQLiteSession(id, self._path, durability=self._durability, timeout=self._timeout)

    def list_sessions(
        self,
        *,
        owner: str | None = None,
        tag: str | None = None,
        updated_after: datetime | None = None,
        limit: int | None = None,
        cursor: SessionInfo | None = None,
        order: Literal["updated"] = "updated",
    ) -> list[SessionInfo]:
        """The file's conversations, newest ``updated_at`` first (ties by id): every session
        holding messages or info, or only those of ``owner``, with ``tag``, or written after
        ``updated_after`` (aware). A page of ``limit``; pass its last info as ``cursor`` for
        the next page. Read through an index, never by reading the messages. A missing
        file: none (it is not created).

        Example::

            page = store.list_sessions(owner="user-7", limit=20)
            more = store.list_sessions(owner="user-7", limit=20, cursor=page[-1])

        Raises:
            UserError: a bad query (an empty owner, a naive datetime, a limit under 1).
        """
        listing = check_listing(
            owner=owner,
            tag=tag,
            updated_after=updated_after,
            limit=limit,
            cursor=cursor,
            order=order,
        )
        return self._list(listing)

    def prune(self, *, older_than: timedelta, owner: str | None = None) -> int:
        """Remove every conversation (of ``owner``) last written more than ``older_than``
        ago, with its meta (summaries, held approvals) and info; how many went. Each goes
        whole, at most 100 per transaction, so a large prune never holds the lock long.

        Example::

            store.prune(older_than=timedelta(days=30))
        """
        return self._prune(check_prune(older_than, owner), owner)

    def delete_sessions(self, *, owner: str) -> int:
        """Remove every conversation of ``owner``, as :meth:`prune` removes one; how many."""
        return self._delete(check_owner(owner))

    def _list(self, listing: Listing) -> list[SessionInfo]:
        db = self._existing()
        return [] if db is None else list_infos(db, listing)

    def _prune(self, cutoff: datetime, owner: str | None) -> int:
        db = self._existing()
        return 0 if db is None else remove_sessions(db, cutoff=cutoff, owner=owner)

    def _delete(self, owner: str) -> int:
        db = self._existing()
        return 0 if db is None else remove_sessions(db, cutoff=None, owner=owner)

    def _existing(self) -> Database | None:
        # Listing or pruning never creates the file.
        if not self._path.exists():
            return None
        return database_for(self._path, self._durability, self._timeout)

    def close(self) -> None:
        """Close this process's connection to the file (sessions reopen it on next use)."""
        database_for(self._path, self._durability, self._timeout).close()

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self._path)!r})"
