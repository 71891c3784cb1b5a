"""``AsyncRedisSession``: :class:`~aniki.sessions.RedisSession` for asyncio code (redis.asyncio).

The key layout, the Lua scripts and the incremental-read cache are the sync session's (in
``_core``, ``_scripts`` and ``_edits``), and so is the constructor (``_base``); this module only
runs the steps, awaited (with :func:`aniki.sessions._driver.adrive`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..._aio import within_about
from ...errors import UserError
from ...messages import Message
from .._driver import adrive
from .._edits import fork_target
from .._flow_store import AsyncFlowSession
from . import _edits as edits
from ._base import AsyncClient, RedisBase
from ._batch import batcher, close_batcher
from ._client import BOUNDS, client_from_url, import_redis, translate
from ._core import RAW, Eval, Flow, Pipeline, RedisCore

__all__ = ["AsyncRedisSession"]

T = TypeVar("T")


class AsyncRedisSession(RedisBase[AsyncClient], AsyncFlowSession[RedisCore]):
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

    blocking = False  # awaited on the event loop
    _loop: asyncio.AbstractEventLoop | None = None
    """The loop this instance's connections belong to (``None`` before its first call)."""

    async def fork(self, new_id: str, *, upto: str | None = None) -> AsyncRedisSession:
        """:meth:`RedisSession.fork <aniki.sessions.RedisSession.fork>`, awaited: a new
        session ``new_id`` holding this history through message ``upto``, made atomically."""
        child = type(self)(fork_target(self.id, new_id), **self._options)
        try:
            await self._run(lambda: edits.fork(self._core, child._core, upto, split=self._split))
        except BaseException:
            await child.aclose()
            raise
        return child

    async def undo(self) -> tuple[Message, ...]:
        """:meth:`RedisSession.undo <aniki.sessions.RedisSession.undo>`, awaited: remove the
        last turn atomically and return it."""
        return await self._run(lambda: edits.undo(self._core))

    async def aclose(self) -> None:
        """Close the connections this instance opened (a passed ``client=`` stays open)."""
        if self._owns_client:
            loop = self._loop
            if loop is not None and loop.is_closed() and loop is not asyncio.get_running_loop():
                return  # its connections ended with their loop
            await close_batcher(self._client)
            await self._client.aclose()

    async def _run(self, make: Callable[[], Flow[T]], *, read: bool = False) -> T:
        self._bind_loop()
        async with self._lock:
            bound = BOUNDS.get(self._client)
            try:
                if bound is None:  # a client passed in: its own socket_timeout bounds each wait
                    return await adrive(make(), self._execute)
                return await within_about(bound, adrive(make(), self._execute))
            except self._errors as exc:
                raise translate(exc, self._core.store, self._timeout) from exc
            except asyncio.TimeoutError as exc:
                late = import_redis().exceptions.TimeoutError(f"no reply within {bound:g} s")
                raise translate(late, self._core.store, self._timeout) from exc

    async def _execute(self, step: Eval | Pipeline) -> Any:
        client = self._client
        if isinstance(step, Eval):  # replies stay bytes, as in RedisSession._execute
            keys = (len(step.keys), *step.keys, *step.args)
            send = self._send()
            try:
                return await send("EVALSHA", step.script.sha, *keys)
            except self._no_script:
                return await send("EVAL", step.script.source, *keys)
        async with client.pipeline(transaction=False) as pipe:
            for command in step.commands:
                pipe.execute_command(*command, **RAW)
            return await pipe.execute()

    def _send(self) -> Callable[..., Awaitable[Any]]:
        """How a command goes to the server: with those of other sessions sharing the client
        when they are sent at once (see ``_batch``), except on a cluster."""
        if self._split:
            client = self._client

            async def alone(*command: Any) -> Any:
                return await client.execute_command(*command, **RAW)

            return alone
        return batcher(self._client).send

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

    def _client_kinds(self) -> tuple[type, type]:
        import redis.asyncio as aioredis

        return aioredis.Redis, aioredis.RedisCluster

    def _new_client(self) -> Any:
        import redis.asyncio
        import redis.asyncio.retry

        return client_from_url(
            self._url, redis.asyncio, redis.asyncio.retry.Retry, self._seconds, deadline=True
        )

    def _new_lock(self) -> asyncio.Lock:
        return asyncio.Lock()
