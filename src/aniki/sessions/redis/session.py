"""Sessions stored in Redis: ``RedisSession`` (redis-py) and ``AsyncRedisSession`` (redis.asyncio).

Needs the ``redis`` extra: ``pip install 'aniki-sdk[redis]'``. The key layout, the Lua scripts
and the incremental-read cache are shared by both classes and live in ``_redis_core``; this
module only runs their steps against a client.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
import weakref
from collections.abc import Iterable
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..._aio import within
from ...errors import UserError
from ...messages import Message, MessageLike, stamp, stamp_one, to_message
from .._codec import check_limit, redact, to_messages, url_problem
from ..base import SessionInfo
from ._core import (
    DEFAULT_TIMEOUT,
    DEFAULT_URL,
    Eval,
    Flow,
    RedisCore,
    check_timeout,
    check_url,
    describe,
    import_redis,
    translate,
)

if TYPE_CHECKING:
    import redis
    import redis.asyncio

__all__ = ["AsyncRedisSession", "RedisSession"]

T = TypeVar("T")


_RETRIES = 3
"""How often a client aniki builds resends a command whose connection broke. An append's
script carries a token, so a resent append that the server had applied is not applied again."""


_BOUNDS: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()
"""The asyncio clients aniki built, each with the seconds a whole call through it may take.
Such a client has no ``socket_timeout``: redis.asyncio bounds every write by it through
``asyncio.wait_for``, which makes a task per command (a tenth of an append's time), so
:class:`AsyncRedisSession` bounds each call, resends included, by one deadline instead."""


def _client_from_url(
    url: str,
    module: Any,
    retry_class: Any,
    timeout: float,
    *,
    deadline: bool = False,
    max_connections: int | None = None,
) -> Any:
    """A client for ``url`` whose waits end after ``timeout``: each socket operation's, or,
    with ``deadline`` (asyncio clients), each whole call's (see :data:`_BOUNDS`). With
    ``max_connections``, a call waits (within ``timeout``) for one of that many connections,
    where redis-py's default pool would refuse it with "Too many connections"."""
    from redis.backoff import ExponentialBackoff
    from redis.exceptions import ConnectionError as LostConnection

    # Only a broken connection is retried, not a timeout: each attempt may wait `timeout`,
    # and a hung server would otherwise hold a call for (retries + 1) times as long.
    retry = retry_class(ExponentialBackoff(cap=0.5, base=0.02), _RETRIES, (LostConnection,))
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
            _BOUNDS[client] = timeout
        return client
    # The parser's own message is not repeated: it can hold part of a password.
    problem = url_problem(url) or "the Redis client cannot parse it"
    raise UserError(
        f"invalid Redis URL {redact(url)!r}: {problem}; "
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
            f"unknown option(s) {unknown} in the Redis URL {redact(url)!r}; options the "
            "client takes include db, socket_timeout, socket_connect_timeout, "
            "health_check_interval, max_connections, client_name"
        )


def _settings(
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


class RedisSession:
    """A conversation stored in Redis, shared by every instance and process using the same id.

    Every write is one atomic Lua script: a batch is stored whole or not at all. With ``ttl``
    (seconds or a ``timedelta``) the session's keys expire that long after its last write.
    Reading the history again costs only the messages appended since this instance last read.

    Example::

        session = RedisSession("conversation-42", "redis://localhost:6379/0", ttl=86400)
        session.add_message({"role": "user", "content": "Hi"})
        session.get_messages()  # (Message(role='user', content='Hi', ...),)
        session.list_sessions()  # [SessionInfo(id='conversation-42', message_count=1, ...)]
        session.close()

    Each call waits at most ``timeout`` seconds (default 10) to connect and for each reply,
    then raises :class:`~aniki.StoreUnavailableError`; a connection that breaks is made again
    and the command resent (an append is still applied once).

    Pass ``client=`` to use an existing ``redis.Redis`` instead of ``url`` (errors then name the
    client's host and port, :meth:`close` leaves the client open, and the client's own
    timeouts and retries apply).
    """

    def __init__(
        self,
        id: str,
        url: str = DEFAULT_URL,
        *,
        ttl: float | timedelta | None = None,
        prefix: str = "aniki:",
        client: redis.Redis | redis.RedisCluster | None = None,
        timeout: float | None = None,
    ) -> None:
        module = import_redis()
        checked, seconds, self._timeout = _settings(
            url, timeout, client, (module.Redis, module.RedisCluster)
        )
        store = describe(checked, prefix, client)
        self._core = RedisCore(id, store=store, prefix=prefix, ttl=ttl)
        self._owns_client = client is None
        self._client: redis.Redis = cast(
            "redis.Redis",
            _client_from_url(url, module, module.retry.Retry, seconds)
            if client is None
            else client,
        )
        self._errors: type[Exception] = module.RedisError
        self._no_script: type[Exception] = module.exceptions.NoScriptError
        self._lock = threading.Lock()

    @property
    def id(self) -> str:
        """The conversation's id."""
        return self._core.id

    def add_message(self, message: MessageLike) -> None:
        """Validate and append one message."""
        self._run(self._core.append([stamp_one(to_message(message))]))

    def add_messages(self, messages: Iterable[MessageLike]) -> None:
        """Validate all, then append all atomically: other readers see all or none."""
        self._run(self._core.append(stamp(to_messages(messages))))

    def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        """The history, oldest first; with ``limit``, only the most recent ``limit``."""
        return self._run(self._core.read(check_limit(limit)))

    def _add_then_get(
        self, messages: list[Message], limit: int | None = None
    ) -> tuple[Message, ...]:
        # add_messages then get_messages in one round trip (see aniki._run.session_io).
        return self._run(self._core.append_then_read(stamp(messages), check_limit(limit)))

    def clear(self) -> None:
        """Delete the history and the session's derived state."""
        self._run(self._core.clear())

    def _replace(self, messages: Iterable[MessageLike]) -> None:
        # clear() then add_messages() in one script (used by `aniki sessions import`).
        self._run(self._core.replace(stamp(to_messages(messages), keep=True)))

    def get_meta(self, key: str) -> Any:
        """The derived-state value stored under ``key`` (``None`` when absent)."""
        return self._run(self._core.get_meta(key))

    def set_meta(self, key: str, value: Any) -> None:
        """Store derived state (a JSON-safe value) beside the history; ``None`` deletes."""
        self._run(self._core.set_meta(key, value))

    def _swap_meta(self, key: str, expected: Any, value: Any) -> bool:
        """Set meta ``key`` to ``value`` only if it now holds ``expected``; whether it did.

        Atomic across clients (a script). Values compare as JSON (same types and values, any
        key order); ``expected=None`` means the key is absent, ``value=None`` deletes it.
        """
        return self._run(self._core.swap_meta(key, expected, value))

    def list_sessions(self) -> list[SessionInfo]:
        """Sessions holding messages (this URL and prefix), most recently updated first."""
        return self._run(self._core.list_sessions())

    def close(self) -> None:
        """Close the connections this instance opened (a passed ``client=`` stays open)."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> RedisSession:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RedisSession(id={self.id!r}, store={self._core.store!r})"

    def _run(self, flow: Flow[T]) -> T:
        with self._lock:
            try:
                step = next(flow)
                while True:
                    step = flow.send(self._execute(step))
            except StopIteration as done:
                return cast(T, done.value)
            except self._errors as exc:
                raise translate(exc, self._core.store, self._timeout) from exc

    def _execute(self, step: Any) -> Any:
        client = self._client
        if isinstance(step, Eval):
            try:
                return client.evalsha(step.script.sha, len(step.keys), *step.keys, *step.args)
            except self._no_script:
                return client.eval(step.script.source, len(step.keys), *step.keys, *step.args)
        pipe = client.pipeline(transaction=False)
        for command in step.commands:
            pipe.execute_command(*command)  # type: ignore[no-untyped-call]
        return pipe.execute()


class AsyncRedisSession:
    """:class:`RedisSession` for asyncio code (``redis.asyncio``): the same methods, awaited.

    Example::

        session = AsyncRedisSession("conversation-42", "redis://localhost:6379/0")
        await session.add_message({"role": "user", "content": "Hi"})
        await session.get_messages()  # (Message(role='user', content='Hi', ...),)
        await session.aclose()

    Use an instance from one event loop at a time (the loop its connections were opened on):
    a call from another loop raises :class:`~aniki.UserError` while the first loop lives. Once
    that loop is closed, an instance that made its own client makes a new one.
    """

    def __init__(
        self,
        id: str,
        url: str = DEFAULT_URL,
        *,
        ttl: float | timedelta | None = None,
        prefix: str = "aniki:",
        client: redis.asyncio.Redis | redis.asyncio.RedisCluster | None = None,
        timeout: float | None = None,
    ) -> None:
        module = import_redis()
        import redis.asyncio as aioredis

        checked, self._seconds, self._timeout = _settings(
            url, timeout, client, (aioredis.Redis, aioredis.RedisCluster)
        )
        store = describe(checked, prefix, client)
        self._core = RedisCore(id, store=store, prefix=prefix, ttl=ttl)
        self._owns_client = client is None
        self._url = url
        self._client: redis.asyncio.Redis = cast(
            "redis.asyncio.Redis", self._new_client() if client is None else client
        )
        self._errors: type[Exception] = module.RedisError
        self._no_script: type[Exception] = module.exceptions.NoScriptError
        self._timed_out: type[Exception] = module.exceptions.TimeoutError
        self._lock = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def id(self) -> str:
        """The conversation's id."""
        return self._core.id

    async def add_message(self, message: MessageLike) -> None:
        """Validate and append one message."""
        await self._run(self._core.append([stamp_one(to_message(message))]))

    async def add_messages(self, messages: Iterable[MessageLike]) -> None:
        """Validate all, then append all atomically: other readers see all or none."""
        await self._run(self._core.append(stamp(to_messages(messages))))

    async def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        """The history, oldest first; with ``limit``, only the most recent ``limit``."""
        return await self._run(self._core.read(check_limit(limit)))

    async def _add_then_get(
        self, messages: list[Message], limit: int | None = None
    ) -> tuple[Message, ...]:
        # add_messages then get_messages in one round trip (see aniki._run.session_io).
        return await self._run(self._core.append_then_read(stamp(messages), check_limit(limit)))

    async def clear(self) -> None:
        """Delete the history and the session's derived state."""
        await self._run(self._core.clear())

    async def _replace(self, messages: Iterable[MessageLike]) -> None:
        # clear() then add_messages() in one script (used by `aniki sessions import`).
        await self._run(self._core.replace(stamp(to_messages(messages), keep=True)))

    async def get_meta(self, key: str) -> Any:
        """The derived-state value stored under ``key`` (``None`` when absent)."""
        return await self._run(self._core.get_meta(key))

    async def set_meta(self, key: str, value: Any) -> None:
        """Store derived state (a JSON-safe value) beside the history; ``None`` deletes."""
        await self._run(self._core.set_meta(key, value))

    async def _swap_meta(self, key: str, expected: Any, value: Any) -> bool:
        """As :meth:`RedisSession._swap_meta`."""
        return await self._run(self._core.swap_meta(key, expected, value))

    async def list_sessions(self) -> list[SessionInfo]:
        """Sessions holding messages (this URL and prefix), most recently updated first."""
        return await self._run(self._core.list_sessions())

    async def aclose(self) -> None:
        """Close the connections this instance opened (a passed ``client=`` stays open)."""
        if self._owns_client:
            loop = self._loop
            if loop is not None and loop.is_closed() and loop is not asyncio.get_running_loop():
                return  # its connections ended with their loop
            await self._client.aclose()

    async def __aenter__(self) -> AsyncRedisSession:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncRedisSession(id={self.id!r}, store={self._core.store!r})"

    async def _run(self, flow: Flow[T]) -> T:
        self._bind_loop()
        async with self._lock:
            bound = _BOUNDS.get(self._client)
            try:
                if bound is None:  # a client passed in: its own socket_timeout bounds each wait
                    return await self._drive(flow)
                return await within(bound, self._drive(flow))
            except self._errors as exc:
                raise translate(exc, self._core.store, self._timeout) from exc
            except asyncio.TimeoutError as exc:
                late = self._timed_out(f"no reply within {bound:g} s")
                raise translate(late, self._core.store, self._timeout) from exc

    async def _drive(self, flow: Flow[T]) -> T:
        try:
            step = next(flow)
            while True:
                step = flow.send(await self._execute(step))
        except StopIteration as done:
            return cast(T, done.value)

    def _new_client(self) -> Any:
        import redis.asyncio
        import redis.asyncio.retry

        return _client_from_url(
            self._url, redis.asyncio, redis.asyncio.retry.Retry, self._seconds, deadline=True
        )

    def _bind_loop(self) -> None:
        """Bind this instance to the running loop on first use; refuse another loop."""
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        if self._loop is not None:
            if not (self._loop.is_closed() and self._owns_client):
                raise UserError(
                    f"AsyncRedisSession {self.id!r} is in use on another event loop, and its "
                    "connections belong to that loop; open one AsyncRedisSession per event "
                    "loop (or per thread running a loop)"
                )
            # The old loop is gone and its connections with it: nothing to close.
            self._client = self._new_client()
            self._lock = asyncio.Lock()
        self._loop = loop

    async def _execute(self, step: Any) -> Any:
        client = self._client
        if isinstance(step, Eval):
            try:
                return await client.evalsha(step.script.sha, len(step.keys), *step.keys, *step.args)
            except self._no_script:
                return await client.eval(step.script.source, len(step.keys), *step.keys, *step.args)
        async with client.pipeline(transaction=False) as pipe:
            for command in step.commands:
                pipe.execute_command(*command)
            return await pipe.execute()
