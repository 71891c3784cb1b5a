"""``open_store``: one store per process, one pool or client, a session per request.

A web server opens the store once, at start-up, and asks it for the session of each request:
``store.session(id)`` makes no connection and hands out, for an id it handed out recently,
the same session object, so the history that object already read stays warm. A request
then costs what is new since the last one (another process's appends included: the stores
read past what they hold, as any kept session does), not the whole conversation.

What is shared, per scheme:

- ``redis://`` / ``rediss://``: one client for every session, with ``max_connections``
  connections at most.
- ``postgresql://``: one pool of ``max_connections`` connections at most (psycopg_pool's
  for the sync store; for the async one, a lighter pool of aniki's own, see
  ``postgres/_pool.py``).
- ``sqlite:///``: one connection per file and process, as every SQLite session has; the
  async twins' calls run on one worker thread per file.
- ``file:``: the directory's files, one lock each.
- ``memory:``: the sessions themselves (they live only in this store).

Memory stays bounded: the store keeps the ``max_cached`` sessions used most recently (and
with them their histories); an older one is dropped from the store and read again when asked
for. ``memory:`` keeps every session, as it is where they live.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, NoReturn, overload

from .._secrets import hide_password
from ..errors import UserError
from ._args import check_session_id
from ._backends import Shared
from ._catalog import AsyncStoredSession, StoredSession, check_listing, check_owner, check_prune
from .base import SessionInfo
from .url import backend_for

__all__ = ["AsyncSessionStore", "SessionStore", "open_store"]

DEFAULT_MAX_CACHED = 1000
"""Sessions (with their histories) a store keeps by default: the most recently used."""

DEFAULT_MAX_CONNECTIONS = 10
"""Connections a ``postgresql:`` store's pool opens at most by default."""


@overload
def open_store(
    url: str,
    *,
    asynchronous: Literal[False] = False,
    max_cached: int = DEFAULT_MAX_CACHED,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    table: str | None = None,
    prefix: str | None = None,
) -> SessionStore: ...
@overload
def open_store(
    url: str,
    *,
    asynchronous: Literal[True],
    max_cached: int = DEFAULT_MAX_CACHED,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    table: str | None = None,
    prefix: str | None = None,
) -> AsyncSessionStore: ...
def open_store(
    url: str,
    *,
    asynchronous: bool = False,
    max_cached: int = DEFAULT_MAX_CACHED,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    table: str | None = None,
    prefix: str | None = None,
) -> SessionStore | AsyncSessionStore:
    """The store ``url`` names (the URLs of :func:`~aniki.sessions.open_session`), sharing
    one pool or client among the sessions it hands out.

    With ``asynchronous=True`` it hands out the async twins, whose calls never block the
    event loop; open it with ``async with`` (or ``await store.open()``).
    ``max_cached`` bounds the sessions kept warm; ``max_connections`` the connections of a
    ``postgresql:`` or ``redis:`` store (a call waits for one while all are in use, within
    the session's timeout). ``table`` (``postgresql:``) and ``prefix`` (``redis:``) are
    passed to every session, as to :class:`PostgresSession` and :class:`RedisSession`.
    Example::

        with open_store("sqlite:///chats.db") as store:
            store.session("user-42").add_message({"role": "user", "content": "Hi"})
            store.list_sessions()  # [SessionInfo(id='user-42', message_count=1, ...)]
    """
    if isinstance(max_cached, bool) or not isinstance(max_cached, int) or max_cached < 1:
        raise UserError(
            f"max_cached must be a whole number of sessions, 1 or more; got {max_cached!r}"
        )
    if (
        isinstance(max_connections, bool)
        or not isinstance(max_connections, int)
        or max_connections < 1
    ):
        raise UserError(
            f"max_connections must be a whole number, 1 or more; got {max_connections!r}"
        )
    options = {name: value for name, value in (("table", table), ("prefix", prefix)) if value}
    shared = backend_for(url).store(
        url, asynchronous=asynchronous, max_connections=max_connections, options=options
    )
    if asynchronous:
        return AsyncSessionStore(url, shared, max_cached)
    return SessionStore(url, shared, max_cached)


class _Sessions:
    """The sessions a store handed out, by id: the ``limit`` used most recently."""

    def __init__(self, limit: int | None) -> None:
        self._limit = limit
        self._by_id: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session_id: str, make: Any) -> Any:
        with self._lock:
            found = self._by_id.get(session_id)
            if found is None:
                found = self._by_id[session_id] = make(session_id)
            self._by_id.move_to_end(session_id)
            if self._limit is not None and len(self._by_id) > self._limit:
                self._by_id.popitem(last=False)
            return found

    def __len__(self) -> int:
        return len(self._by_id)

    def clear(self) -> None:
        with self._lock:
            self._by_id.clear()


class WrongContextError(UserError, TypeError):
    """A store entered with the other kind of ``with``: ``with`` on an async store, or
    ``async with`` on a sync one. A ``TypeError`` too, as Python's own refusal is."""


class _Store:
    """What the sync and async stores share: the URL, what the sessions share (a client, a
    pool: see ``_backends.py``), the handed-out sessions."""

    def __init__(self, url: str, shared: Shared, max_cached: int) -> None:
        self._url = url
        self._shared = shared
        self._sessions = _Sessions(None if shared.keeps_data else max_cached)
        self._closed = False

    @property
    def url(self) -> str:
        """The store's URL, any password hidden."""
        return hide_password(self._url)

    def _check_open(self) -> None:
        if self._closed:
            raise UserError(f"the store {self.url} is closed; open it again to use it")

    def _session(self, session_id: str) -> Any:
        self._check_open()
        return self._sessions.get(check_session_id(session_id), self._shared.make)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._sessions)} sessions kept"
        return f"{type(self).__name__}({self.url!r}, {state})"


class SessionStore(_Store):
    """A store's sessions for synchronous code, sharing one pool or client
    (see :func:`open_store`)."""

    def session(self, id: str) -> StoredSession:
        """The session ``id``: the one handed out before while it is kept, else a new one.
        Makes no connection."""
        session: StoredSession = self._session(id)
        return session

    def list_sessions(
        self,
        *,
        owner: str | None = None,
        tag: str | None = None,
        updated_after: datetime | None = None,
        limit: int | None = None,
        cursor: SessionInfo | None = None,
        order: Literal["updated"] = "updated",
    ) -> list[SessionInfo]:
        """The store's conversations, newest ``updated_at`` first (ties by id), served by an
        index: every session holding messages or info, or only those of ``owner``, with
        ``tag``, or written after ``updated_after`` (aware). A page of ``limit``; pass its
        last info as ``cursor`` for the next page.

        Example::

            page = store.list_sessions(owner="user-7", limit=20)
            more = store.list_sessions(owner="user-7", limit=20, cursor=page[-1])
        """
        listing = check_listing(
            owner=owner,
            tag=tag,
            updated_after=updated_after,
            limit=limit,
            cursor=cursor,
            order=order,
        )
        self._check_open()
        return list(self._shared.list_sync(listing))

    def prune(self, *, older_than: timedelta, owner: str | None = None) -> int:
        """Remove every conversation (of ``owner``) last written more than ``older_than``
        ago, with everything kept for it (info, meta, summaries, held approvals, runs,
        attachments); how many went. Each session goes atomically, in batches, so a large
        prune never holds a lock long."""
        cutoff = check_prune(older_than, owner)
        self._check_open()
        removed = self._shared.prune_sync(cutoff, owner)
        self._sessions.clear()
        return removed

    def delete_sessions(self, *, owner: str) -> int:
        """Remove every conversation of ``owner``, as :meth:`prune` removes one; how many
        went (a user's "delete my data")."""
        checked = check_owner(owner)
        self._check_open()
        removed = self._shared.delete_sync(checked)
        self._sessions.clear()
        return removed

    def close(self) -> None:
        """Close the pool or client; sessions handed out can no longer be used."""
        if not self._closed:
            self._closed = True
            self._sessions.clear()
            self._shared.close_sync()

    def __enter__(self) -> SessionStore:
        return self

    # Hidden from type checkers, which flag the mistake themselves; at run time it gets
    # a message saying which ``with`` to write instead of Python's bare TypeError.
    if not TYPE_CHECKING:

        async def __aenter__(self) -> NoReturn:
            raise WrongContextError(
                f"the store {self.url} is synchronous: open it with `with open_store(url) as "
                "store:`; for `async with`, open the async store: `async with open_store(url, "
                "asynchronous=True) as store:`"
            )

        async def __aexit__(self, *exc_info: object) -> None:
            return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncSessionStore(_Store):
    """A store's async sessions, sharing one pool or client (see :func:`open_store`). Use it
    from one event loop."""

    def session(self, id: str) -> AsyncStoredSession:
        """The async session ``id``: the one handed out before while it is kept, else a new
        one. Makes no connection (a plain method: no ``await``)."""
        if not self._shared.opened:
            raise UserError(
                f"open the store {self.url} first: `async with open_store(url, "
                "asynchronous=True) as store:`, or `await store.open()`"
            )
        session: AsyncStoredSession = self._session(id)
        return session

    async def open(self) -> AsyncSessionStore:
        """Open the pool (``postgresql:``); ``async with`` calls it. Idempotent."""
        if self._closed:
            raise UserError(f"the store {self.url} is closed; open it again to use it")
        await self._shared.open_async()
        return self

    async def list_sessions(
        self,
        *,
        owner: str | None = None,
        tag: str | None = None,
        updated_after: datetime | None = None,
        limit: int | None = None,
        cursor: SessionInfo | None = None,
        order: Literal["updated"] = "updated",
    ) -> list[SessionInfo]:
        """:meth:`SessionStore.list_sessions`, awaited."""
        listing = check_listing(
            owner=owner,
            tag=tag,
            updated_after=updated_after,
            limit=limit,
            cursor=cursor,
            order=order,
        )
        self._check_open()
        await self.open()
        return list(await self._shared.list_async(listing))

    async def prune(self, *, older_than: timedelta, owner: str | None = None) -> int:
        """:meth:`SessionStore.prune`, awaited."""
        cutoff = check_prune(older_than, owner)
        self._check_open()
        await self.open()
        removed = await self._shared.prune_async(cutoff, owner)
        self._sessions.clear()
        return removed

    async def delete_sessions(self, *, owner: str) -> int:
        """:meth:`SessionStore.delete_sessions`, awaited."""
        checked = check_owner(owner)
        self._check_open()
        await self.open()
        removed = await self._shared.delete_async(checked)
        self._sessions.clear()
        return removed

    async def aclose(self) -> None:
        """Close the pool or client; sessions handed out can no longer be used."""
        if not self._closed:
            self._closed = True
            self._sessions.clear()
            await self._shared.close_async()

    async def __aenter__(self) -> AsyncSessionStore:
        return await self.open()

    if not TYPE_CHECKING:  # as on SessionStore: a message instead of the bare TypeError

        def __enter__(self) -> NoReturn:
            raise WrongContextError(
                f"the store {self.url} is asynchronous: open it with `async with "
                "open_store(url, asynchronous=True) as store:`; for `with`, open the sync "
                "store: `with open_store(url) as store:`"
            )

        def __exit__(self, *exc_info: object) -> None:
            return None

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
