"""Where conversation history lives: the session protocols, the stores, and history policies.

Everything but the protocols and ``InMemorySession`` is imported on first access: ``import
aniki`` stays fast, and never imports ``redis`` or ``psycopg``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .base import AsyncSession, Session, SessionInfo
from .memory import InMemorySession

if TYPE_CHECKING:
    from ._codec import Durability
    from .encrypted import AlteredDataError, DecryptionError, EncryptedSession
    from .file.aio import AsyncFileSession
    from .file.session import FileSession, FileStore
    from .memory_async import AsyncInMemorySession
    from .policies._summary import Summary
    from .policies.budget import TokenBudgetSession
    from .policies.summarizing import SummarizingSession
    from .policies.windowed import WindowedSession
    from .postgres.session import AsyncPostgresSession, PostgresSession
    from .redis.session import AsyncRedisSession, RedisSession
    from .sqlite.aio import AsyncSQLiteSession
    from .sqlite.session import SQLiteSession, SQLiteStore
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
    "AsyncFileSession": ".file.aio",
    "AsyncInMemorySession": ".memory_async",
    "AsyncPostgresSession": ".postgres",
    "AsyncRedisSession": ".redis",
    "AsyncSQLiteSession": ".sqlite.aio",
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
    "Summary": ".policies",
    "SummarizingSession": ".policies",
    "TokenBudgetSession": ".policies",
    "WindowedSession": ".policies",
    "list_sessions": ".url",
    "open_session": ".url",
    "open_store": ".store",
}


# --- module paths from before the stores had packages of their own ------------------------
# ``import aniki.sessions.windowed`` (and the rest) still works and gives the module itself,
# now in its package: the same object, so isinstance checks and patches see one module.
_MOVED: dict[str, str] = {
    "budget": ".policies.budget",
    "file_async": ".file.aio",
    "sqlite_async": ".sqlite.aio",
    "summarizing": ".policies.summarizing",
    "windowed": ".policies.windowed",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds each module of :data:`_MOVED` under its old name, as the module it now is."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        prefix, _, leaf = fullname.rpartition(".")
        if prefix != __name__ or leaf not in _MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        return importlib.import_module(_MOVED[spec.name.rpartition(".")[2]], __name__)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module ran when it was imported under its own name."""


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModules())


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
