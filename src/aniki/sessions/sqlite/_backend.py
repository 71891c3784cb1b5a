"""How ``sqlite:///`` URLs open (see :mod:`aniki.sessions.url`): through :class:`SQLiteStore`,
which holds the file's one connection in this process."""

from __future__ import annotations

from .._backends import Backend
from .._local_backend import LocalBackend
from ..url import sqlite_target
from . import AsyncSQLiteSession, SQLiteStore


class _SQLite(LocalBackend):
    def release(self, local: SQLiteStore) -> None:
        local.close()  # its connection: a session used again reopens it


BACKEND: Backend = _SQLite(sqlite_target, SQLiteStore, twin=AsyncSQLiteSession._of)
