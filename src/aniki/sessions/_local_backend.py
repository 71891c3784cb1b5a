"""The backend of a local store (``sqlite:``, ``file:``): a store object built from the URL
(``SQLiteStore``, ``FileStore``) makes the sessions and lists them; the async twins wrap them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from ..errors import StoreError
from ._backends import Shared, refuse_options
from ._catalog import Listing
from .base import AsyncSession, Session, SessionInfo

__all__ = ["LocalBackend"]


class LocalBackend:
    """A :class:`~aniki.sessions._backends.Backend` over a local store object: ``target``
    reads a URL into the object's arguments, ``store_class`` builds it (``SQLiteStore``), and
    ``twin`` makes the async twin of one of its sessions."""

    def __init__(
        self,
        target: Callable[[str], tuple[str, dict[str, Any]]],
        store_class: Callable[..., Any],
        *,
        twin: Callable[[Any], AsyncSession],
    ) -> None:
        self._target = target
        self._store_class = store_class
        self.twin = twin

    def local(self, url: str) -> Any:
        """The store object ``url`` names, its options applied."""
        path, settings = self._target(url)
        return self._store_class(path, **settings)

    def release(self, local: Any) -> None:
        """What closing an ``open_store`` store does to its store object (by default,
        nothing: it holds nothing open)."""

    def session(self, url: str, id: str) -> Session:
        session: Session = self.local(url).session(id)
        return session

    def async_session(self, url: str, id: str) -> AsyncSession:
        return self.twin(self.session(url, id))

    def store(
        self, url: str, *, asynchronous: bool, max_connections: int, options: dict[str, str]
    ) -> Shared:
        refuse_options(url, options)
        return _Shared(self, self.local(url), asynchronous)

    def list_sessions(
        self, url: str, *, problems: list[StoreError] | None
    ) -> Sequence[SessionInfo]:
        # A store of one database lists whole or fails: no skipped files for `problems`.
        infos: Sequence[SessionInfo] = self.local(url).list_sessions()
        return infos


class _Shared(Shared):
    """The store object already shares what there is to share (the connection per file, the
    locks): an ``open_store`` store hands out its sessions, or their twins."""

    def __init__(self, backend: LocalBackend, local: Any, asynchronous: bool) -> None:
        self._backend = backend
        self._local = local
        self._asynchronous = asynchronous

    def make(self, session_id: str) -> Any:
        session = self._local.session(session_id)
        return self._backend.twin(session) if self._asynchronous else session

    def list_sync(self, listing: Listing) -> Sequence[SessionInfo]:
        infos: Sequence[SessionInfo] = self._local._list(listing)
        return infos

    def prune_sync(self, cutoff: datetime, owner: str | None) -> int:
        removed: int = self._local._prune(cutoff, owner)
        return removed

    def delete_sync(self, owner: str) -> int:
        removed: int = self._local._delete(owner)
        return removed

    def close_sync(self) -> None:
        self._backend.release(self._local)
