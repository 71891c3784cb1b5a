"""Where conversation history lives: the session protocols, the stores (one package per
backend, opened by URL), the history policies and encryption.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .base import AsyncSession, Session, SessionInfo
from .memory import InMemorySession

if TYPE_CHECKING:
    from ._args import Durability
    from .encrypted import AlteredDataError, DecryptionError, EncryptedSession
    from .file.aio import AsyncFileSession
    from .file.session import FileSession
    from .file.store import FileStore
    from .memory_async import AsyncInMemorySession
    from .policies._clearing import ClearToolResults
    from .policies._summary import Summary
    from .policies.budget import TokenBudgetSession
    from .policies.summarizing import SummarizingSession
    from .policies.windowed import WindowedSession
    from .postgres.session import AsyncPostgresSession, PostgresSession
    from .redis.session import AsyncRedisSession, RedisSession
    from .sqlite.aio import AsyncSQLiteSession
    from .sqlite.session import SQLiteSession
    from .sqlite.store import SQLiteStore
    from .store import AsyncSessionStore, SessionStore, open_store
    from .url import list_sessions, open_session

__all__ = [
    "AlteredDataError",
    "AsyncFileSession",
    "AsyncInMemorySession",
    "AsyncPostgresSession",
    "AsyncRedisSession",
    "AsyncSQLiteSession",
    "AsyncSession",
    "AsyncSessionStore",
    "ClearToolResults",
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
# Everything but the protocols and InMemorySession is imported on first access: `import aniki`
# stays fast, and never imports redis or psycopg. Public name -> the submodule defining it. A
# store adds its names here (and to __all__ and the TYPE_CHECKING block above), never as an
# eager import.
_LAZY: dict[str, str] = {
    "AlteredDataError": ".encrypted",
    "AsyncFileSession": ".file.aio",
    "AsyncInMemorySession": ".memory_async",
    "AsyncPostgresSession": ".postgres",
    "AsyncRedisSession": ".redis",
    "AsyncSQLiteSession": ".sqlite.aio",
    "AsyncSessionStore": ".store",
    "ClearToolResults": ".policies",
    "DecryptionError": ".encrypted",
    "Durability": "._args",
    "EncryptedSession": ".encrypted",
    "FileSession": ".file",
    "FileStore": ".file",
    "PostgresSession": ".postgres",
    "RedisSession": ".redis",
    "SQLiteSession": ".sqlite",
    "SQLiteStore": ".sqlite",
    "SessionStore": ".store",
    "Summary": ".policies",
    "SummarizingSession": ".policies",
    "TokenBudgetSession": ".policies",
    "WindowedSession": ".policies",
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
