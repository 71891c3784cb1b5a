"""``open_session(url, id)``: pick a store by URL, so configuration can choose it.

================================  =============================================================
URL                               store
================================  =============================================================
``memory:``                       :class:`~aniki.InMemorySession` (nothing is shared)
``sqlite:///chat.db``             :class:`~aniki.sessions.SQLiteSession`, ``chat.db`` relative
                                  to the working directory (``sqlite:///./chat.db`` is the same)
``sqlite:////var/lib/chat.db``    the same, absolute path ``/var/lib/chat.db`` (four slashes)
``file:///var/lib/chats``         :class:`~aniki.sessions.FileSession`, absolute directory
``file:chats``                    the same, ``chats`` relative to the working directory
``redis://host:6379/0``           ``RedisSession`` (also ``rediss://`` for TLS); needs the
                                  ``redis`` extra
``postgresql://user@host/db``     ``PostgresSession`` (also ``postgres://``); needs the
                                  ``postgres`` extra
================================  =============================================================

SQLite URLs follow the convention SQLite users know from other libraries (three slashes then a
relative path, four for an absolute one); file URLs follow the file URL standard (``file:///``
then an absolute path). Local stores take options as query parameters:
``sqlite:///chat.db?durability=full&timeout=10`` and ``file:///var/chats?durability=full``.
Redis and PostgreSQL URLs are handed to their drivers unchanged.

With ``asynchronous=True`` every scheme gives its async twin: ``AsyncInMemorySession``,
``AsyncSQLiteSession``, ``AsyncFileSession``, ``AsyncRedisSession``, ``AsyncPostgresSession``.

Backends with optional dependencies are imported only when their URL is used.
"""

from __future__ import annotations

import importlib
from typing import Any, Literal, overload
from urllib.parse import parse_qsl, unquote

from ..errors import StoreError, UserError
from ._codec import check_durability, redact, url_problem
from .base import AsyncSession, Session, SessionInfo

__all__ = ["list_sessions", "open_session"]

# scheme -> (module, sync class, async class); the module is imported on first use.
_REMOTE: dict[str, tuple[str, str, str]] = {
    "redis": ("aniki.sessions.redis.session", "RedisSession", "AsyncRedisSession"),
    "rediss": ("aniki.sessions.redis.session", "RedisSession", "AsyncRedisSession"),
    "postgresql": ("aniki.sessions.postgres.session", "PostgresSession", "AsyncPostgresSession"),
    "postgres": ("aniki.sessions.postgres.session", "PostgresSession", "AsyncPostgresSession"),
}
_SCHEMES = ("memory:", "sqlite:///", "file:///", "redis://", "rediss://", "postgresql://")


@overload
def open_session(url: str, id: str, *, asynchronous: Literal[False] = False) -> Session: ...
@overload
def open_session(url: str, id: str, *, asynchronous: Literal[True]) -> AsyncSession: ...
def open_session(url: str, id: str, *, asynchronous: bool = False) -> Session | AsyncSession:
    """The session ``id`` in the store ``url`` names (see the module docstring for URLs).

    With ``asynchronous=True`` the store's async twin is returned, for every scheme
    (``sqlite:`` gives :class:`~aniki.sessions.AsyncSQLiteSession`, ``file:``
    :class:`~aniki.sessions.AsyncFileSession`, ``memory:``
    :class:`~aniki.sessions.AsyncInMemorySession`); its calls never block the event loop.

    Example::

        session = open_session("sqlite:///chat.db", "conversation-42")
        session.add_message({"role": "user", "content": "Hi"})

        twin = open_session("sqlite:///chat.db", "conversation-42", asynchronous=True)
        await twin.get_messages()  # (Message(role='user', content='Hi', ...),)
    """
    scheme = _scheme(url)
    if scheme in _REMOTE:
        _check_remote(scheme, url)
        module, sync_name, async_name = _REMOTE[scheme]
        cls = getattr(importlib.import_module(module), async_name if asynchronous else sync_name)
        session: Session | AsyncSession = cls(id, url)
        return session
    local: Session = _local_store(scheme, url).session(id)
    return _async_twin(local) if asynchronous else local


def _async_twin(local: Session) -> AsyncSession:
    """The async twin of a local store's session, on the same store and settings."""
    from .file.aio import AsyncFileSession
    from .file.session import FileSession
    from .memory_async import AsyncInMemorySession
    from .sqlite.aio import AsyncSQLiteSession
    from .sqlite.session import SQLiteSession

    if isinstance(local, SQLiteSession):
        return AsyncSQLiteSession._of(local)
    if isinstance(local, FileSession):
        return AsyncFileSession._of(local)
    return AsyncInMemorySession(local.id)


def list_sessions(url: str, *, problems: list[StoreError] | None = None) -> list[SessionInfo]:
    """The sessions held in the store ``url`` names: ids, message counts, last update.

    A ``file:`` store leaves out the files it cannot list (damaged, foreign, newer) and lists
    the rest; each skipped file gives a :class:`~aniki.StoreError` naming it, appended to
    ``problems`` when a list is passed and logged as a warning otherwise. Other stores hold
    one database each, and a damaged one fails the whole call. Example::

        problems: list[StoreError] = []
        for info in list_sessions("sqlite:///chat.db", problems=problems):
            print(info.id, info.message_count, info.updated_at)
    """
    scheme = _scheme(url)
    if scheme in _REMOTE:
        _check_remote(scheme, url)
        module, sync_name, _ = _REMOTE[scheme]
        loaded = importlib.import_module(module)
        lister = getattr(loaded, "list_sessions", None)
        if lister is not None:
            return list(lister(url))
        # The remote stores list from any session of the store; this id is never written.
        session = getattr(loaded, sync_name)("aniki-list-sessions", url)
        try:
            return list(session.list_sessions())
        finally:
            session.close()
    if scheme == "memory":
        raise UserError("memory: sessions live inside one process and cannot be listed")
    store = _local_store(scheme, url)
    if scheme == "file":
        return list(store.list_sessions(problems=problems))
    return list(store.list_sessions())


def _timeout(url: str, options: dict[str, str]) -> float:
    """The ``timeout`` option of a local store's URL (default 5 seconds)."""
    try:
        return float(options.get("timeout", 5.0))
    except ValueError:
        raise UserError(f"timeout must be a number of seconds in {redact(url)!r}") from None


def _scheme(url: object) -> str:
    if not isinstance(url, str) or ":" not in url:
        shown = repr(redact(url)) if isinstance(url, str) else type(url).__name__
        raise UserError(f"a session URL must be a string like {', '.join(_SCHEMES)}; got {shown}")
    scheme = url.split(":", 1)[0].lower()
    if scheme not in _REMOTE and scheme not in ("memory", "sqlite", "file"):
        raise UserError(
            f"unknown session URL scheme {scheme!r} in {redact(url)!r}; "
            f"use one of: {', '.join(_SCHEMES)}"
        )
    return scheme


def _check_remote(scheme: str, url: str) -> None:
    """Refuse a server URL the drivers could not parse, before they see it: their parsers'
    errors quote the URL, password included."""
    redis = scheme.startswith("redis")
    problem = url_problem(url) or _driver_problem(url, redis=redis)
    if problem is not None:
        raise UserError(
            f"invalid {'Redis' if redis else 'PostgreSQL'} URL {redact(url)!r}: {problem}"
        )


def _driver_problem(url: str, *, redis: bool) -> str | None:
    """What the driver's own URL parser finds wrong with ``url``, in words that quote none of
    it (``None`` when it parses, or when the driver is not installed: the store says how to
    install it)."""
    try:
        if redis:
            from redis.asyncio.connection import parse_url

            parse_url(url)
        else:
            from psycopg.conninfo import conninfo_to_dict

            conninfo_to_dict(url)
    except ImportError:
        return None
    except Exception:
        pass
    else:
        return None
    return (
        "the driver cannot parse it (characters such as / ? # @ [ ] % or spaces in a password "
        "must be percent-encoded)"
    )


def _local_store(scheme: str, url: str) -> Any:
    rest = url.split(":", 1)[1]
    rest, _, query = rest.partition("?")
    options = _options(url, query)
    if scheme == "memory":
        if rest not in ("", "//") or options:
            raise UserError(f"a memory URL is just 'memory:', got {redact(url)!r}")
        return _MemoryStore()
    if scheme == "sqlite":
        if not rest.startswith("///") or len(rest) == 3:
            raise UserError(
                f"a SQLite URL is sqlite:///relative/path.db or sqlite:////absolute/path.db, "
                f"got {redact(url)!r}"
            )
        from .sqlite.session import SQLiteStore

        _no_more(url, options, ("durability", "timeout"))
        return SQLiteStore(
            unquote(rest[3:]), timeout=_timeout(url, options), **_durability(options)
        )
    from .file.session import FileStore

    _no_more(url, options, ("durability", "timeout"))
    return FileStore(_file_path(url, rest), timeout=_timeout(url, options), **_durability(options))


def _file_path(url: str, rest: str) -> str:
    if rest.startswith("//"):
        host, slash, path = rest[2:].partition("/")
        if host not in ("", "localhost") or not slash:
            raise UserError(
                f"a file URL is file:///absolute/dir or file:relative/dir, got {redact(url)!r} "
                "(remote hosts are not supported)"
            )
        rest = "/" + path
    if not rest:
        raise UserError(f"the file URL {redact(url)!r} names no directory")
    return unquote(rest)


def _options(url: str, query: str) -> dict[str, str]:
    try:
        return dict(parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)))
    except ValueError as exc:
        problem = redact(str(exc))
    # Raised here, not in the handler: the parser's exception quotes the query.
    raise UserError(f"cannot read the options of {redact(url)!r}: {problem}")


def _durability(options: dict[str, str]) -> dict[str, Any]:
    if "durability" not in options:
        return {}
    return {"durability": check_durability(options["durability"])}


def _no_more(url: str, options: dict[str, str], allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise UserError(f"unknown option(s) {unknown} in {redact(url)!r}; allowed: {list(allowed)}")


class _MemoryStore:
    def session(self, id: str) -> Session:
        from .memory import InMemorySession

        return InMemorySession(id)
