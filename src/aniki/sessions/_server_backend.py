"""The backend of a store on a server (``redis:``, ``postgresql:``): a session opens from the
URL itself, and an ``open_store`` store makes every session with one client or pool."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from ..errors import StoreError
from ._backends import Shared, refuse_options
from ._catalog import Listing
from .base import AsyncSession, Session, SessionInfo
from .url import check_server_url

__all__ = ["LISTING_ID", "ServerBackend", "ServerShared"]

LISTING_ID = "aniki-list-sessions"
"""The session a server store lists, prunes and deletes through (any one of the store reaches
them all); it is never written."""


class ServerBackend:
    """A :class:`~aniki.sessions._backends.Backend` for a store on a server, named ``label``
    in errors (``"Redis"``): its sessions are ``sync(id, url)`` and ``aio(id, url)``, they take
    the ``open_store`` option ``option`` (``prefix``), and ``parse`` is the driver's own URL
    parser (raising :class:`ImportError` without the driver). A subclass says what a store
    shares (:meth:`shared`)."""

    def __init__(
        self,
        label: str,
        sync: Any,
        aio: Any,
        *,
        option: str,
        parse: Callable[[str], object],
    ) -> None:
        self._label = label
        self._sync = sync
        self._aio = aio
        self._option = option
        self._parse = parse

    def shared(
        self, url: str, *, asynchronous: bool, max_connections: int, options: dict[str, str]
    ) -> Shared:
        """The client or pool of an ``open_store`` store on ``url`` (already checked)."""
        raise NotImplementedError

    def check(self, url: str) -> None:
        check_server_url(url, store=self._label, parse=self._parse)

    def session(self, url: str, id: str) -> Session:
        self.check(url)
        session: Session = self._sync(id, url)
        return session

    def async_session(self, url: str, id: str) -> AsyncSession:
        self.check(url)
        session: AsyncSession = self._aio(id, url)
        return session

    def store(
        self, url: str, *, asynchronous: bool, max_connections: int, options: dict[str, str]
    ) -> Shared:
        refuse_options(url, options, takes=self._option)
        self.check(url)
        return self.shared(
            url, asynchronous=asynchronous, max_connections=max_connections, options=options
        )

    def list_sessions(
        self, url: str, *, problems: list[StoreError] | None
    ) -> Sequence[SessionInfo]:
        self.check(url)
        listing = self._sync(LISTING_ID, url)
        try:
            infos: Sequence[SessionInfo] = listing.list_sessions()
            return infos
        finally:
            listing.close()


class ServerShared(Shared):
    """Every session of a store made with one client or pool, ``resource``, passed to each as
    the keyword ``name`` (``client=``, ``pool=``); listed through any of them, and closed with
    the store."""

    def __init__(
        self, session_class: Any, options: dict[str, str], name: str, resource: Any
    ) -> None:
        self._class = session_class
        self._options = {name: resource, **options}
        self.resource = resource

    def make(self, session_id: str) -> Any:
        return self._class(session_id, **self._options)

    def list_sync(self, listing: Listing) -> Sequence[SessionInfo]:
        return list(self.make(LISTING_ID)._list(listing))

    async def list_async(self, listing: Listing) -> Sequence[SessionInfo]:
        return list(await self.make(LISTING_ID)._list(listing))

    def prune_sync(self, cutoff: datetime, owner: str | None) -> int:
        removed: int = self.make(LISTING_ID)._prune(cutoff, owner)
        return removed

    async def prune_async(self, cutoff: datetime, owner: str | None) -> int:
        removed: int = await self.make(LISTING_ID)._prune(cutoff, owner)
        return removed

    def delete_sync(self, owner: str) -> int:
        removed: int = self.make(LISTING_ID)._delete(owner)
        return removed

    async def delete_async(self, owner: str) -> int:
        removed: int = await self.make(LISTING_ID)._delete(owner)
        return removed

    def close_sync(self) -> None:
        self.resource.close()

    async def close_async(self) -> None:
        await self.resource.close()
