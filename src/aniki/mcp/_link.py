"""One connection to an MCP server, held by a task of its own.

The SDK's client is an async context manager built on anyio task groups and cancel scopes,
which must be left by the task that entered them; but the run that first uses a server is
not the task that closes it. So a connection is entered by an owner task on the loop that
made it (its *home*), which waits until it is told to stop or the server goes away, then
leaves the client's context. For a stdio server that is the SDK's shutdown, every step of
it bounded: close the server's stdin, wait for it to exit, then kill its process group.

The server going away is seen when the transport's read stream ends (a stdio server's
output closing when its process dies, an HTTP transport giving up): the owner leaves at
once, and the next use connects anew.

Changes to the tool list reach :class:`Link` as ``notifications/tools/list_changed``: a
server on a handshake-era protocol sends them unasked; on 2026-07-28 the client opens a
``subscriptions/listen`` stream for them, and reopens it (backing off) if it drops.

At interpreter exit every connection still open is stopped on its loop (within
:data:`EXIT_WAIT` seconds), before aniki's ``run_sync`` loop winds down.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
from mcp.client import IncomingMessage
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared.message import SessionMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp import Client, MCPError, types

from .._aio import within

__all__ = ["CLOSE_WITHIN", "EXIT_WAIT", "Link"]

logger = logging.getLogger("aniki")

CLOSE_WITHIN = 10.0
"""Seconds a connection may take to close before its owner task is cancelled outright (the
SDK's stdio shutdown takes at most about 6.5 s: 2 s for the server to exit on its own, 2 s
after SIGTERM, 2 s after SIGKILL)."""

EXIT_WAIT = 8.0
"""Seconds the connections still open at interpreter exit are given to close."""

_LISTEN_PAUSE = (1.0, 30.0)
"""The first and the longest pause before a dropped ``subscriptions/listen`` is reopened."""

Streams = tuple[Any, Any]
"""A transport's read stream and write stream."""


class Link:
    """One connection to an MCP server, owned by a task on the loop that made it."""

    mode = "auto"
    """How the SDK picks the protocol: ``"auto"`` asks for 2026-07-28 (``server/discover``)
    and falls back to the ``initialize`` handshake of earlier versions; ``"legacy"`` goes
    straight to the handshake."""

    def __init__(
        self,
        transport: Callable[[], AbstractAsyncContextManager[Any]],
        *,
        label: str,
        timeout: float,
        on_tools_changed: Callable[[], None],
        client_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.loop = asyncio.get_running_loop()
        """The loop the connection lives on (its home)."""
        self.client: Client | None = None
        """The SDK's client, once connected."""
        self.gone = False
        """Whether the server went away (or the connection ended)."""
        self.watching = False
        """Whether changes to the tool list reach ``on_tools_changed``."""
        self._transport = transport
        self._label = label
        self._timeout = timeout
        self._on_tools_changed = on_tools_changed
        self._client_options = dict(client_options or {})  # callbacks, log level
        self._ready: asyncio.Future[None] = self.loop.create_future()
        self._ready.add_done_callback(_retrieve)
        self._wake = asyncio.Event()
        self._scope: anyio.CancelScope | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def start(self) -> None:
        """Start connecting, in a task of the link's own."""
        self._task = self.loop.create_task(self._own(), name=f"aniki-mcp {self._label}")
        _LIVE.add(self)

    @property
    def usable(self) -> bool:
        """Whether calls may still go through this connection (or wait for it to open)."""
        ended = self._task is not None and self._task.done()
        return not (self.gone or self._stopping or ended or self.loop.is_closed())

    @property
    def ready(self) -> bool:
        """Whether the connection is open."""
        return self._ready.done() and self._ready.exception() is None

    async def wait_ready(self) -> Client:
        """The client, once connected; the connection's failure, if it failed."""
        await asyncio.shield(self._ready)
        assert self.client is not None
        return self.client

    async def stop(self) -> None:
        """Leave the connection and wait until it has ended (its owner is cancelled outright
        if the SDK's shutdown takes over :data:`CLOSE_WITHIN` seconds)."""
        self._stopping = True
        task = self._task
        if task is None or task.done():
            return
        if self._scope is not None:
            self._scope.cancel()
        else:  # not started yet: nothing entered, nothing to leave
            task.cancel()
        self._wake.set()
        try:
            await within(CLOSE_WITHIN, asyncio.shield(task))
        except asyncio.TimeoutError:
            task.cancel()
            await asyncio.wait([task], timeout=1.0)
        except Exception:  # the owner reports its own failures
            pass

    async def _own(self) -> None:
        try:
            with anyio.CancelScope() as self._scope:
                async with self._client() as client, anyio.create_task_group() as group:
                    await self._watch_tools(client, group)
                    self.client = client
                    self._ready.set_result(None)
                    await self._wake.wait()
                    group.cancel_scope.cancel()
        except Exception as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            else:
                logger.debug("MCP server %s: the connection ended with %s", self._label, _kind(exc))
        finally:
            self.gone = True
            if not self._ready.done():
                self._ready.set_exception(ConnectionError("the connection was closed"))
            _LIVE.discard(self)

    def _client(self) -> Client:
        return Client(
            _watched(self._transport(), self._went),
            mode=self.mode,
            cache=None,
            read_timeout_seconds=self._timeout,
            message_handler=self._on_message,
            client_info=types.Implementation(name="aniki", version=_version()),
            **self._client_options,
        )

    def _went(self) -> None:
        self.gone = True
        self._wake.set()

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._on_tools_changed()
        elif isinstance(message, Exception):
            logger.debug("MCP server %s: transport error %s", self._label, _kind(message))

    async def _watch_tools(self, client: Client, group: anyio.abc.TaskGroup) -> None:
        announced = client.server_capabilities.tools
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS or not (
            announced and announced.list_changed
        ):
            # Before 2026-07-28 the server sends changes unasked; a server that does not
            # announce changes keeps its list.
            self.watching = True
            return
        await group.start(self._listen, client)

    async def _listen(
        self, client: Client, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        pause = _LISTEN_PAUSE[0]
        started = False
        while True:
            try:
                async with client.listen(tools_list_changed=True) as subscription:
                    self.watching = True
                    if not started:
                        task_status.started()
                        started = True
                    pause = _LISTEN_PAUSE[0]
                    async for _ in subscription:
                        self._on_tools_changed()
            except (ListenNotSupportedError, MCPError) as exc:
                if not isinstance(exc, MCPError) or exc.code == types.METHOD_NOT_FOUND:
                    logger.debug("MCP server %s does not stream tool list changes", self._label)
                    self._stop_watching()
                    if not started:
                        task_status.started()
                    return
                logger.debug("MCP server %s: tool list changes: %s", self._label, _kind(exc))
            except Exception as exc:
                logger.debug("MCP server %s: tool list changes: %s", self._label, _kind(exc))
            self._stop_watching()
            if not started:
                task_status.started()
                started = True
            await anyio.sleep(pause)
            pause = min(pause * 2, _LISTEN_PAUSE[1])

    def _stop_watching(self) -> None:
        self.watching = False
        self._on_tools_changed()  # anything may change unseen now


class _Watched:
    """A transport's read stream that reports its end: the server went away."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    @property
    def last_context(self) -> Any:
        # The dispatcher runs a message's handlers in the context it was sent from, if the
        # stream says (the HTTP transport's streams do).
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            item: SessionMessage | Exception = await self._inner.receive()
            return item
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Watched:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


@asynccontextmanager
async def _watched(
    transport: AbstractAsyncContextManager[Any], on_end: Callable[[], None]
) -> AsyncIterator[Streams]:
    async with transport as (read, write):
        yield _Watched(read, on_end), write


def _kind(exc: BaseException) -> str:
    """An exception's type and, for a group, its first leaf's (no text: it may hold secrets)."""
    leaf = first_leaf(exc)
    return type(leaf).__name__


def first_leaf(exc: BaseException) -> BaseException:
    """The first exception in ``exc`` that is not a group of others (anyio's task groups
    wrap what their tasks raise)."""
    while True:
        inner = getattr(exc, "exceptions", None)
        if not inner:
            return exc
        exc = inner[0]


def _version() -> str:
    from .. import __version__

    return __version__


def _retrieve(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()  # seen, so never logged as never retrieved


_LIVE: set[Link] = set()
"""The connections whose owner task has not ended."""


def _stop_at_exit() -> None:
    by_loop: dict[asyncio.AbstractEventLoop, list[Link]] = {}
    for link in list(_LIVE):
        by_loop.setdefault(link.loop, []).append(link)
    for loop, links in by_loop.items():
        if loop.is_closed() or _running() is loop:
            continue
        with contextlib.suppress(Exception):
            if loop.is_running():  # another thread's, such as run_sync's
                asyncio.run_coroutine_threadsafe(_stop_all(links), loop).result(EXIT_WAIT)
            else:
                loop.run_until_complete(within(EXIT_WAIT, _stop_all(links)))


def _running() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def _stop_all(links: list[Link]) -> None:
    await asyncio.gather(*(link.stop() for link in links), return_exceptions=True)


atexit.register(_stop_at_exit)
os.register_at_fork(after_in_child=_LIVE.clear)  # a child does not own its parent's servers
