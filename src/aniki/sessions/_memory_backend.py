"""How ``memory:`` URLs open: sessions that live in this process only, so a store keeps every
one it hands out (and lists those), and ``list_sessions("memory:")`` has nothing to list."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime

from ..errors import StoreError, UserError
from ._backends import Backend, Shared, refuse_options
from ._catalog import Listing, pruned, select
from .base import SessionInfo
from .memory import InMemorySession
from .memory_async import AsyncInMemorySession
from .url import check_memory_url

UNLISTED = "memory: sessions live inside one process and cannot be listed"


class _Memory:
    """Sessions made on the spot: the URL holds nothing but its scheme."""

    def session(self, url: str, id: str) -> InMemorySession:
        check_memory_url(url)
        return InMemorySession(id)

    def async_session(self, url: str, id: str) -> AsyncInMemorySession:
        check_memory_url(url)
        return AsyncInMemorySession(id)

    def store(
        self, url: str, *, asynchronous: bool, max_connections: int, options: dict[str, str]
    ) -> Shared:
        refuse_options(url, options)
        check_memory_url(url)
        return _Kept(asynchronous)

    def list_sessions(
        self, url: str, *, problems: list[StoreError] | None
    ) -> Sequence[SessionInfo]:
        raise UserError(UNLISTED)


class _Kept(Shared):
    """The sessions of one ``open_store("memory:")`` store: the only copy of their history,
    so it keeps every one it makes, and lists, prunes and deletes among them."""

    keeps_data = True

    def __init__(self, asynchronous: bool) -> None:
        self._asynchronous = asynchronous
        self._kept: dict[str, InMemorySession | AsyncInMemorySession] = {}
        self._lock = threading.Lock()

    def make(self, session_id: str) -> InMemorySession | AsyncInMemorySession:
        with self._lock:
            found = self._kept.get(session_id)
            if found is None:
                found = self._kept[session_id] = (
                    AsyncInMemorySession(session_id)
                    if self._asynchronous
                    else InMemorySession(session_id)
                )
            return found

    def _infos(self) -> list[SessionInfo]:
        with self._lock:
            kept = list(self._kept.values())
        infos = (_sync_of(session).info() for session in kept)
        return [info for info in infos if info.message_count or info.created_at is not None]

    def list_sync(self, listing: Listing) -> Sequence[SessionInfo]:
        return select(self._infos(), listing)

    async def list_async(self, listing: Listing) -> Sequence[SessionInfo]:
        return self.list_sync(listing)

    def prune_sync(self, cutoff: datetime, owner: str | None) -> int:
        return self._remove(pruned(self._infos(), cutoff, owner))

    async def prune_async(self, cutoff: datetime, owner: str | None) -> int:
        return self.prune_sync(cutoff, owner)

    def delete_sync(self, owner: str) -> int:
        return self._remove([info.id for info in self._infos() if info.owner == owner])

    async def delete_async(self, owner: str) -> int:
        return self.delete_sync(owner)

    def _remove(self, ids: list[str]) -> int:
        with self._lock:
            for session_id in ids:
                _sync_of(self._kept.pop(session_id)).clear()
        return len(ids)


def _sync_of(session: InMemorySession | AsyncInMemorySession) -> InMemorySession:
    return session._sync if isinstance(session, AsyncInMemorySession) else session


BACKEND: Backend = _Memory()
