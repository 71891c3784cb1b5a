"""Where conversation history lives: the session protocols, the stores, and history policies.

Everything but the protocols and ``InMemorySession`` is imported on first access: ``import
aniki`` stays fast, and never imports ``redis`` or ``psycopg``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .base import AsyncSession, Session, SessionInfo
from .memory import InMemorySession

if TYPE_CHECKING:
    from ._codec import Durability
    from ._summary import Summary
    from .budget import TokenBudgetSession
    from .encrypted import AlteredDataError, DecryptionError, EncryptedSession
    from .file import FileSession, FileStore
    from .file_async import AsyncFileSession
    from .memory_async import AsyncInMemorySession
    from .postgres import AsyncPostgresSession, PostgresSession
    from .redis import AsyncRedisSession, RedisSession
    from .sqlite import SQLiteSession, SQLiteStore
    from .sqlite_async import AsyncSQLiteSession
    from .store import AsyncSessionStore, SessionStore, open_store
    from .summarizing import SummarizingSession
    from .url import list_sessions, open_session
    from .windowed import WindowedSession

__all__ = [
    "AlteredDataError",
    "AsyncFileSession",
    "AsyncInMemorySession",
    "AsyncPostgresSession",
    "AsyncRedisSession",
    "AsyncSQLiteSession",
    "AsyncSession",
    "AsyncSessionStore",
    "DecryptionError",
    "Durability",
    "EncryptedSession",
    "FileSession",
    "FileStore",
    "InMemorySession",
    "PostgresSession",
    "RedisSession",
    "SQLiteSession",
    "SQLiteStore",
    "Session",
    "SessionInfo",
    "SessionStore",
    "SummarizingSession",
    "Summary",
    "TokenBudgetSession",
    "WindowedSession",
    "list_sessions",
    "open_session",
    "open_store",
]

# --- lazily imported stores ----------------------------------------------------------------
# Public name -> the submodule defining it. A store with an optional dependency adds its
# names here (and to __all__ and the TYPE_CHECKING block above), never as an eager import.
_LAZY: dict[str, str] = {
    "AlteredDataError": ".encrypted",
    "AsyncFileSession": ".file_async",
    "AsyncInMemorySession": ".memory_async",
    "AsyncPostgresSession": ".postgres",
    "AsyncRedisSession": ".redis",
    "AsyncSQLiteSession": ".sqlite_async",
    "AsyncSessionStore": ".store",
    "DecryptionError": ".encrypted",
    "Durability": "._codec",
    "EncryptedSession": ".encrypted",
    "FileSession": ".file",
    "FileStore": ".file",
    "PostgresSession": ".postgres",
    "RedisSession": ".redis",
    "SQLiteSession": ".sqlite",
    "SQLiteStore": ".sqlite",
    "SessionStore": ".store",
    "Summary": "._summary",
    "SummarizingSession": ".summarizing",
    "TokenBudgetSession": ".budget",
    "WindowedSession": ".windowed",
    "list_sessions": ".url",
    "open_session": ".url",
    "open_store": ".store",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
