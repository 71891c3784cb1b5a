"""How ``memory:`` URLs open: sessions that live in this process only, so a store keeps every
one it hands out and none can be listed."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import StoreError, UserError
from ._backends import Backend, Shared, refuse_options
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
    keeps_data = True  # the sessions are the only copy of their history

    def __init__(self, asynchronous: bool) -> None:
        self._asynchronous = asynchronous

    def make(self, session_id: str) -> InMemorySession | AsyncInMemorySession:
        if self._asynchronous:
            return AsyncInMemorySession(session_id)
        return InMemorySession(session_id)

    def list_sync(self) -> Sequence[SessionInfo]:
        raise UserError(UNLISTED)


BACKEND: Backend = _Memory()
