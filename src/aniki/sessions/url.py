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

Each scheme's store package says how to open its URLs (its ``_backend`` module, found through
``_backends.py``), and is imported only when its URL is used. This module reads the URLs: the
scheme, and the parts each backend asks for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, overload
from urllib.parse import parse_qsl, unquote

from .._secrets import hide_password, url_problem
from ..errors import StoreError, UserError
from ._args import check_durability
from ._backends import SCHEMES, Backend, backend, known
from .base import AsyncSession, Session, SessionInfo

__all__ = ["list_sessions", "open_session"]


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
    found = backend_for(url)
    return found.async_session(url, id) if asynchronous else found.session(url, id)


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
    return list(backend_for(url).list_sessions(url, problems=problems))


# --- reading URLs: the scheme here, the rest for the backend that asks -------------------


def backend_for(url: object) -> Backend:
    """The backend of ``url``'s scheme; :class:`~aniki.UserError` for a URL with none, or
    with a scheme no store has."""
    if not isinstance(url, str) or ":" not in url:
        shown = repr(hide_password(url)) if isinstance(url, str) else type(url).__name__
        raise UserError(f"a session URL must be a string like {', '.join(SCHEMES)}; got {shown}")
    scheme = url.split(":", 1)[0].lower()
    if not known(scheme):
        raise UserError(
            f"unknown session URL scheme {scheme!r} in {hide_password(url)!r}; "
            f"use one of: {', '.join(SCHEMES)}"
        )
    return backend(scheme)


def check_memory_url(url: str) -> None:
    """Refuse anything but ``memory:`` (or ``memory://``)."""
    rest, options = _split(url)
    if rest not in ("", "//") or options:
        raise UserError(f"a memory URL is just 'memory:', got {hide_password(url)!r}")


def sqlite_target(url: str) -> tuple[str, dict[str, Any]]:
    """The database file of a ``sqlite:///`` URL, and its options as keyword arguments."""
    rest, options = _split(url)
    if not rest.startswith("///") or len(rest) == 3:
        raise UserError(
            f"a SQLite URL is sqlite:///relative/path.db or sqlite:////absolute/path.db, "
            f"got {hide_password(url)!r}"
        )
    return unquote(rest[3:]), _local_options(url, options)


def file_target(url: str) -> tuple[str, dict[str, Any]]:
    """The directory of a ``file:`` URL, and its options as keyword arguments."""
    rest, options = _split(url)
    return file_path(url, rest), _local_options(url, options)


def file_path(url: str, rest: str) -> str:
    """The directory a ``file:`` URL names; ``rest`` is what follows ``file:``, query
    removed."""
    if rest.startswith("//"):
        host, slash, path = rest[2:].partition("/")
        if host not in ("", "localhost") or not slash:
            raise UserError(
                "a file URL is file:///absolute/dir or file:relative/dir, got "
                f"{hide_password(url)!r} (remote hosts are not supported)"
            )
        rest = "/" + path
    if not rest:
        raise UserError(f"the file URL {hide_password(url)!r} names no directory")
    return unquote(rest)


def check_server_url(url: str, *, store: str, parse: Callable[[str], object]) -> None:
    """Refuse a server URL its driver could not parse, before the driver sees it: drivers'
    parse errors quote the URL, password included. ``parse`` is the driver's own parser; it
    raises :class:`ImportError` when the driver is missing (the store then says how to
    install it)."""
    problem = url_problem(url) or _driver_problem(url, parse)
    if problem is not None:
        raise UserError(f"invalid {store} URL {hide_password(url)!r}: {problem}")


def _driver_problem(url: str, parse: Callable[[str], object]) -> str | None:
    """What the driver's parser finds wrong with ``url``, in words that quote none of it
    (``None`` when it parses, or when the driver is not installed)."""
    try:
        parse(url)
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


def _split(url: str) -> tuple[str, dict[str, str]]:
    """What follows the scheme, up to the query; and the query's options."""
    rest, _, query = url.split(":", 1)[1].partition("?")
    try:
        return rest, dict(parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)))
    except ValueError as exc:
        problem = hide_password(str(exc))
    # Raised here, not in the handler: the parser's exception quotes the query.
    raise UserError(f"cannot read the options of {hide_password(url)!r}: {problem}")


def _local_options(url: str, options: dict[str, str]) -> dict[str, Any]:
    """A local store's URL options (``timeout``, ``durability``) as keyword arguments."""
    unknown = sorted(set(options) - {"durability", "timeout"})
    if unknown:
        raise UserError(
            f"unknown option(s) {unknown} in {hide_password(url)!r}; "
            f"allowed: {['durability', 'timeout']}"
        )
    try:
        settings: dict[str, Any] = {"timeout": float(options.get("timeout", 5.0))}
    except ValueError:
        raise UserError(f"timeout must be a number of seconds in {hide_password(url)!r}") from None
    if "durability" in options:
        settings["durability"] = check_durability(options["durability"])
    return settings
