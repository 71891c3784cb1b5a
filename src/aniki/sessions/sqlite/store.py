"""``SQLiteStore``: a SQLite file seen as a whole (the sessions it holds), for tooling."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from typing_extensions import Unpack

from .._local_file import LocalOptions
from ..base import SessionInfo
from ._db import database_for
from ._options import absolute_path, checked_options
from .session import SQLiteSession

__all__ = ["SQLiteStore"]


class SQLiteStore:
    """A SQLite file seen as a whole: its sessions, for tooling.

    Example::

        store = SQLiteStore("chat.db")
        session = store.session("conversation-42")
        for info in store.list_sessions():
            print(info.id, info.message_count, info.updated_at)

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

    def list_sessions(self) -> list[SessionInfo]:
        """Every session holding messages, most recently updated first (a missing file: none)."""
        if not self._path.exists():
            return []
        db = database_for(self._path, self._durability, self._timeout)
        infos = []
        for session_id, count, updated in db.list_sessions():
            try:
                when = datetime.fromtimestamp(updated, tz=timezone.utc)
            except (OverflowError, OSError, ValueError):
                raise db.damage(f"session {session_id!r} has an impossible update time") from None
            infos.append(SessionInfo(id=session_id, message_count=count, updated_at=when))
        return infos

    def close(self) -> None:
        """Close this process's connection to the file (sessions reopen it on next use)."""
        database_for(self._path, self._durability, self._timeout).close()

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self._path)!r})"
