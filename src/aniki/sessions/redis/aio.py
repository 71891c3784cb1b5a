"""``AsyncRedisSession``: :class:`~aniki.sessions.RedisSession` for asyncio code (redis.asyncio).

The key layout, the Lua scripts and the incremental-read cache are the sync session's (in
``_core``, ``_scripts`` and ``_edits``); this module only runs the steps, awaited.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..._aio import within
from ..._stamps import stamp, stamp_one
from ...errors import UserError
from ...messages import Message, MessageLike, to_message
from .._codec import check_limit, to_messages
from .._edits import fork_target
from ..base import SessionInfo
from . import _edits as edits
from ._client import (
    BOUNDS,
    DEFAULT_URL,
    client_from_url,
    describe,
    import_redis,
    settings,
    sibling_options,
    translate,
)
from ._core import Eval, Flow, RedisCore

if TYPE_CHECKING:
    import redis.asyncio

__all__ = ["AsyncRedisSession"]

T = TypeVar("T")


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

        checked, self._seconds, self._timeout = settings(
            url, timeout, client, (aioredis.Redis, aioredis.RedisCluster)
        )
        self._split = isinstance(client, aioredis.RedisCluster)  # a fork spans two slots there
        self._options = sibling_options(url, ttl, prefix, client, timeout)
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

    async def _add_after(
        self,
        messages: list[Message],
        after: str | None,
        *,
        read: bool = False,
        limit: int | None = None,
    ) -> tuple[Message, ...] | None:
        # add_messages (with read, then get_messages) in one script, only after the message
        # with the id `after` (aniki.sessions._chain.AppendsAfter); None, writing nothing, if
        # another message is last.
        flow = self._core.append_after(stamp(messages), after, read, check_limit(limit))
        return await self._run(flow)

    async def clear(self) -> None:
        """Delete the history and the session's derived state."""
        await self._run(self._core.clear())

    async def _replace(self, messages: Iterable[MessageLike]) -> None:
        # clear() then add_messages() in one script (used by `aniki sessions import`).
        await self._run(self._core.replace(stamp(to_messages(messages), keep=True)))

    async def fork(self, new_id: str, *, upto: str | None = None) -> AsyncRedisSession:
        """:meth:`RedisSession.fork <aniki.sessions.RedisSession.fork>`, awaited: a new
        session ``new_id`` holding this history through message ``upto``, made atomically."""
        child = type(self)(fork_target(self.id, new_id), **self._options)
        try:
            await self._run(edits.fork(self._core, child._core, upto, split=self._split))
        except BaseException:
            await child.aclose()
            raise
        return child

    async def undo(self) -> tuple[Message, ...]:
        """:meth:`RedisSession.undo <aniki.sessions.RedisSession.undo>`, awaited: remove the
        last turn atomically and return it."""
        return await self._run(edits.undo(self._core))

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
            bound = BOUNDS.get(self._client)
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

        return client_from_url(
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
