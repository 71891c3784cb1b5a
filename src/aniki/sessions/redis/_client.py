"""The redis-py client of the Redis sessions: the URL and timeout checks, the client built
from a URL (with bounded waits and retries) or checked when passed in, how errors name the
store, and redis-py's exceptions as the aniki errors a caller can act on."""

from __future__ import annotations

import functools
import inspect
import weakref
from typing import Any

from ..._secrets import hide_password, url_problem
from ...errors import CorruptStoreError, StoreError, StoreUnavailableError, UserError
from .._args import check_seconds

__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_CAP",
    "BOUNDS",
    "DEFAULT_TIMEOUT",
    "DEFAULT_URL",
    "RETRIES",
    "check_timeout",
    "check_url",
    "client_from_url",
    "describe",
    "import_redis",
    "settings",
    "sibling_options",
    "translate",
]

DEFAULT_URL = "redis://localhost:6379/0"
DEFAULT_TIMEOUT = 10.0
"""Seconds a client aniki builds waits to connect, and for each reply."""
_SCHEMES = ("redis://", "rediss://", "unix://")


RETRIES = 3
"""How often a client aniki builds (and aniki's own connection, ``_wire``) resends a command
whose connection broke. An append's,
an undo's and a fork's script carry a token, so a resent one that the server had applied is
not applied again."""


BACKOFF_BASE, BACKOFF_CAP = 0.02, 0.5
"""Seconds before the first resend, doubled each time up to the cap."""


BOUNDS: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()
"""The asyncio clients aniki built, each with the seconds a whole call through it may take.
Such a client has no ``socket_timeout``: redis.asyncio bounds every write by it through
``asyncio.wait_for``, which makes a task per command (a tenth of an append's time), so
:class:`~aniki.sessions.AsyncRedisSession` bounds each call, resends included, by one
deadline instead."""


def client_from_url(
    url: str,
    module: Any,
    retry_class: Any,
    timeout: float,
    *,
    deadline: bool = False,
    max_connections: int | None = None,
) -> Any:
    """A client for ``url`` whose waits end after ``timeout``: each socket operation's, or,
    with ``deadline`` (asyncio clients), each whole call's (see :data:`BOUNDS`). With
    ``max_connections``, a call waits (within ``timeout``) for one of that many connections,
    where redis-py's default pool would refuse it with "Too many connections"."""
    from redis.backoff import ExponentialBackoff
    from redis.exceptions import ConnectionError as LostConnection

    # Only a broken connection is retried, not a timeout: each attempt may wait `timeout`,
    # and a hung server would otherwise hold a call for (retries + 1) times as long.
    backoff = ExponentialBackoff(cap=BACKOFF_CAP, base=BACKOFF_BASE)
    retry = retry_class(backoff, RETRIES, (LostConnection,))
    options: dict[str, Any] = {
        "socket_timeout": None if deadline else timeout,
        "socket_connect_timeout": timeout,
        "retry": retry,
        **_driver_info(),
    }
    try:
        if max_connections is None:
            client = module.Redis.from_url(url, **options)
        else:
            pool = module.BlockingConnectionPool.from_url(
                url, max_connections=max_connections, timeout=timeout, **options
            )
            client = module.Redis(connection_pool=pool)
    except ValueError:
        pass  # raised below, outside this handler: the parser's error can quote the password
    else:
        _check_options(url, client.connection_pool.connection_class)
        if deadline:
            BOUNDS[client] = timeout
        return client
    # The parser's own message is not repeated: it can hold part of a password.
    problem = url_problem(url) or "the Redis client cannot parse it"
    raise UserError(
        f"invalid Redis URL {hide_password(url)!r}: {problem}; "
        "expected redis://[[user]:password@]host[:port][/db]"
    )


@functools.cache
def _driver_info() -> dict[str, Any]:
    """What the client's connections tell the server about themselves (``CLIENT SETINFO``),
    made once. Left to itself, redis-py 7 and later reads its own version from the installed
    package's metadata for every connection it opens: 1-2 ms of parsing on the event loop
    each, so 50 conversations opening their connections together held the loop 30 ms."""
    try:
        import redis
        from redis.driver_info import DriverInfo
    except ImportError:  # older redis-py reads it once, at import
        return {}
    from ... import __version__

    info = DriverInfo(lib_version=redis.__version__).add_upstream_driver("aniki", __version__)
    return {"driver_info": info}


def _check_options(url: str, connection_class: type) -> None:
    """A :class:`UserError` for query options the client would pass on to its connections
    without knowing them (redis-py then raises a TypeError on first use, not here)."""
    from urllib.parse import parse_qsl, urlsplit

    from redis.connection import URL_QUERY_ARGUMENT_PARSERS

    known = set(URL_QUERY_ARGUMENT_PARSERS)
    for cls in connection_class.__mro__:
        init = cls.__dict__.get("__init__")
        if init is not None:
            known |= set(inspect.signature(init).parameters) - {"self", "args", "kwargs"}
    try:
        names = {name for name, _ in parse_qsl(urlsplit(url).query, keep_blank_values=True)}
    except ValueError:
        return  # the client parsed it; its own checks stand
    unknown = sorted(names - known)
    if unknown:
        raise UserError(
            f"unknown option(s) {unknown} in the Redis URL {hide_password(url)!r}; options the "
            "client takes include db, socket_timeout, socket_connect_timeout, "
            "health_check_interval, max_connections, client_name"
        )


def settings(
    url: object, timeout: object, client: object, client_types: tuple[type, ...]
) -> tuple[str | None, float, str]:
    """The checked URL (``None`` with a client), the timeout, and how errors name it."""
    if client is None:
        seconds = DEFAULT_TIMEOUT if timeout is None else check_timeout(timeout)
        return check_url(url), seconds, f"timeout= (now {seconds:g} s)"
    if not isinstance(client, client_types):
        names = " or ".join(f"{t.__module__}.{t.__qualname__}" for t in client_types)
        raise UserError(f"client must be a {names}, got {type(client).__name__}")
    if timeout is not None:
        raise UserError(
            "timeout= applies to the client aniki builds from url; with client=, set "
            "socket_timeout and socket_connect_timeout on that client"
        )
    return None, DEFAULT_TIMEOUT, "the socket_timeout of the client passed as client="


def sibling_options(
    url: str, ttl: object, prefix: str, client: object, timeout: object
) -> dict[str, Any]:
    """What a fork passes on to the session it makes: the same URL and timeout (and so a
    client of its own, which closing either session leaves usable), or the same client."""
    if client is None:
        return {"url": url, "ttl": ttl, "prefix": prefix, "timeout": timeout}
    return {"client": client, "ttl": ttl, "prefix": prefix}


def check_timeout(timeout: object) -> float:
    """``timeout`` as seconds; :class:`~aniki.UserError` unless a finite number above 0."""
    return check_seconds(timeout, name="timeout", waits_for="the Redis server to answer")


def check_url(url: object) -> str:
    """``url`` when it is a Redis URL; :class:`~aniki.UserError` saying what to pass if not."""
    if not isinstance(url, str):
        raise UserError(
            "url must be a Redis URL string such as 'redis://localhost:6379/0', got "
            f"{type(url).__name__}"
        )
    problem = url_problem(url)  # in its own words: a parser's message can quote the password
    if problem is not None:
        raise UserError(
            f"invalid Redis URL {hide_password(url)!r}: {problem}; "
            "expected redis://[[user]:password@]host[:port][/db]"
        )
    if not url.startswith(_SCHEMES):
        raise UserError(
            f"invalid Redis URL {hide_password(url)!r}: expected redis://[[user]:password@]host"
            "[:port][/db] (rediss:// for TLS, unix:///path/to/redis.sock)"
        )
    return url


def describe(url: str | None, prefix: str, client: Any) -> str:
    """How errors name the store: the URL without its password, and the key prefix."""
    if url is None:
        kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
        url = f"redis://{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"
    return f"{hide_password(url)} (prefix {prefix!r})"


def import_redis() -> Any:
    """The ``redis`` package, or :class:`~aniki.UserError` saying how to install it."""
    try:
        import redis
    except ModuleNotFoundError as exc:
        raise UserError(
            f"Redis sessions need the {exc.name!r} package: pip install 'aniki-sdk[redis]'"
        ) from exc
    return redis


def translate(exc: Exception, store: str, timeout: str) -> StoreError:
    """A redis-py exception as the aniki error a caller can act on; ``timeout`` says which
    setting bounds the wait (for the advice when it ran out)."""
    from redis import exceptions as rx

    text = str(exc) or type(exc).__name__
    if isinstance(exc, rx.TimeoutError):
        return StoreUnavailableError(
            f"Redis did not answer in time ({text}); check that the server is running and "
            f"reachable, or wait longer with {timeout}",
            store=store,
        )
    if isinstance(exc, rx.AuthenticationError):
        return StoreUnavailableError(
            f"Redis refused the credentials ({text}); check the user name and password in the URL",
            store=store,
        )
    if isinstance(exc, rx.NoPermissionError):
        return StoreError(
            f"the Redis user may not run a command aniki needs ({text}); grant it EVALSHA, "
            "EVAL, HGET, SET and SCAN on the prefix's keys",
            store=store,
        )
    if isinstance(exc, (rx.ConnectionError, rx.TimeoutError)):
        return StoreUnavailableError(
            f"cannot reach Redis ({text}); check that the server is running and the URL's host "
            "and port",
            store=store,
        )
    if isinstance(exc, rx.ReadOnlyError):
        return StoreUnavailableError(
            f"the Redis server is a read-only replica ({text}); point the URL at the primary",
            store=store,
        )
    if "DB index is out of range" in text:
        return StoreUnavailableError(
            f"the Redis server has no database with the URL's number ({text}); use a smaller "
            "number after the last '/' of the URL",
            store=store,
        )
    if "WRONGTYPE" in text:
        return CorruptStoreError(
            f"a key of this session holds data aniki did not write ({text}); choose another "
            "prefix=",
            store=store,
        )
    return StoreError(f"Redis failed: {text}", store=store)
