"""One backend per URL scheme: what a store package's ``_backend`` module says (how to open a
session, its async twin, a store, a listing), and the registry that finds that module.

:func:`~aniki.sessions.open_session`, :func:`~aniki.sessions.list_sessions` (``url.py``) and
:func:`~aniki.sessions.open_store` (``store.py``) ask the registry and nothing else. A new store
adds its scheme to :data:`_MODULES` and a ``_backend`` module beside its sessions, whose
``BACKEND`` is a :class:`Backend`; the module is imported when its URL is first used, so
``import aniki`` loads no store, nor ``redis`` or ``psycopg``. Most backends are of one of two
kinds: a local store (``_local_backend.py``) or a store on a server (``_server_backend.py``).
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from .._secrets import hide_password
from ..errors import StoreError, UserError
from ._catalog import Listing
from .base import AsyncSession, Session, SessionInfo

__all__ = ["SCHEMES", "Backend", "Shared", "backend", "known", "refuse_options"]

# scheme (lower case) -> the module that opens its URLs, relative to aniki.sessions.
_MODULES: dict[str, str] = {
    "memory": "._memory_backend",
    "sqlite": ".sqlite._backend",
    "file": ".file._backend",
    "redis": ".redis._backend",
    "rediss": ".redis._backend",
    "postgresql": ".postgres._backend",
    "postgres": ".postgres._backend",
}

SCHEMES = ("memory:", "sqlite:///", "file:///", "redis://", "rediss://", "postgresql://")
"""The URL forms an error message suggests."""


class Shared(Protocol):
    """What a store opened by :func:`~aniki.sessions.open_store` shares among its sessions (a
    client, a pool, a file's connection): it makes them, lists them, and closes with the store.

    A backend subclasses it and writes :meth:`make` and :meth:`list_sync`; the rest has
    defaults for a store with nothing to open or close."""

    keeps_data: bool = False
    """Whether the sessions are the only copy of their history (``memory:``): the store then
    keeps every session it hands out, not only the most recent ones."""
    opened: bool = True
    """Whether sessions may be handed out yet (an async ``postgresql:`` store: once
    :meth:`open_async` has run)."""

    def make(self, session_id: str) -> Any:
        """A new session (sync or async, as the store is) on the shared resources."""
        ...

    def list_sync(self, listing: Listing) -> Sequence[SessionInfo]:
        """The page of sessions ``listing`` asks for (see :mod:`._catalog`)."""
        ...

    def prune_sync(self, cutoff: datetime, owner: str | None) -> int:
        """Remove every session (of ``owner``) last written before ``cutoff``, whole, in
        batches; how many went."""
        ...

    def delete_sync(self, owner: str) -> int:
        """Remove every session of ``owner``, whole, in batches; how many went."""
        ...

    async def list_async(self, listing: Listing) -> Sequence[SessionInfo]:
        return await asyncio.to_thread(self.list_sync, listing)

    async def prune_async(self, cutoff: datetime, owner: str | None) -> int:
        return await asyncio.to_thread(self.prune_sync, cutoff, owner)

    async def delete_async(self, owner: str) -> int:
        return await asyncio.to_thread(self.delete_sync, owner)

    async def open_async(self) -> None:
        return None

    def close_sync(self) -> None:
        return None

    async def close_async(self) -> None:
        self.close_sync()


class Backend(Protocol):
    """What a ``_backend`` module's ``BACKEND`` says about its URL scheme. Each method checks
    the URL first and raises :class:`~aniki.UserError` for one it cannot open (for a missing
    driver: with the install command)."""

    def session(self, url: str, id: str) -> Session:
        """The session ``id`` of the store ``url`` names (``open_session``)."""
        ...

    def async_session(self, url: str, id: str) -> AsyncSession:
        """Its async twin (``open_session(..., asynchronous=True)``)."""
        ...

    def store(
        self, url: str, *, asynchronous: bool, max_connections: int, options: dict[str, str]
    ) -> Shared:
        """What ``open_store`` shares among the sessions it hands out; ``options`` holds
        ``table=`` or ``prefix=``, refused by the stores they do not apply to."""
        ...

    def list_sessions(
        self, url: str, *, problems: list[StoreError] | None
    ) -> Sequence[SessionInfo]:
        """The sessions of the store ``url`` names (``list_sessions``)."""
        ...


def known(scheme: str) -> bool:
    """Whether ``scheme`` (lower case) is a registered one."""
    return scheme in _MODULES


def backend(scheme: str) -> Backend:
    """The backend of a registered ``scheme``, its module imported on first use."""
    found: Backend = importlib.import_module(_MODULES[scheme], __package__).BACKEND
    return found


def refuse_options(url: str, options: dict[str, str], *, takes: str | None = None) -> None:
    """Refuse an ``open_store`` option other than ``takes``: ``table=`` applies to a
    PostgreSQL store, ``prefix=`` to a Redis one."""
    for name in options:
        if name != takes:
            kind = "redis:" if name == "prefix" else "postgresql:"
            raise UserError(f"{name}= applies to a {kind} store, not to {hide_password(url)!r}")
