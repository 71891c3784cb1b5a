"""What the two kinds of MCP server share: the connection on first use, the tool list and its
cache, calls and what their failures become, closing, and use from another event loop."""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, TypeVar

from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from typing_extensions import Self

from mcp import Client, MCPError, types

from .._aio import within
from .._secrets import Secrets, redact, scrub
from ..errors import UserError
from ..messages import Message, ToolCall
from ..tools import Tool
from ._errors import MCPServerError
from ._features import MCPFeatures
from ._features_config import ClientFeatures
from ._link import Link, first_leaf
from ._results import failed, result_message
from ._tools import MCPTool, build_tools

__all__ = ["MAX_RESULT_BYTES", "MCPServerBase"]

logger = logging.getLogger("aniki")
mcp_logger = logging.getLogger("aniki.mcp")

T = TypeVar("T")

MAX_RESULT_BYTES = 1024 * 1024
"""The default ``max_result_bytes``: how much text (and base64 media) one message from a
server, such as a tool's result, keeps; the rest is not read into memory."""

_PROBE_WITHIN = 5.0
"""Seconds a connection whose call timed out has to answer a ping (then it is kept)."""

_MOST_PAGES = 100
"""The most pages of tools a server may list (a cursor that never ends cannot hang a run)."""

_BACKGROUND: set[asyncio.Task[None]] = set()
"""Connections being closed after a cancelled connect (kept so they are not collected)."""


class MCPServerBase(MCPFeatures):
    """An MCP server whose tools an agent may call: the part that does not depend on how it
    is reached (:class:`~aniki.mcp.MCPServerStdio`, :class:`~aniki.mcp.MCPServerHTTP`)."""

    def __init__(
        self,
        *,
        name: str,
        timeout: float,
        connect_timeout: float,
        tool_prefix: str,
        cache_tools: bool,
        attach_media: bool,
        secrets: Secrets,
        max_result_bytes: int = MAX_RESULT_BYTES,
        features: ClientFeatures | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise UserError(f"an MCP server's name must be a non-empty string, got {name!r}")
        for option, value in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not (math.isfinite(value) and value > 0)
            ):
                raise UserError(f"{option} must be a number of seconds above 0, got {value!r}")
        if not isinstance(tool_prefix, str):
            raise UserError(f"tool_prefix must be a string, got {type(tool_prefix).__name__}")
        for option, flag in (("cache_tools", cache_tools), ("attach_media", attach_media)):
            if not isinstance(flag, bool):
                raise UserError(f"{option} must be True or False, got {flag!r}")
        if isinstance(max_result_bytes, bool) or not (
            isinstance(max_result_bytes, int) and max_result_bytes > 0
        ):
            raise UserError(
                f"max_result_bytes must be a whole number above 0, got {max_result_bytes!r}"
            )
        self._name = name
        self.timeout = float(timeout)
        """Seconds a tool call, or the listing of the tools, may take."""
        self.connect_timeout = float(connect_timeout)
        """Seconds starting (or reaching) the server and the protocol handshake may take."""
        self.tool_prefix = tool_prefix
        """Put before each tool's name, as the model sees it."""
        self.cache_tools = cache_tools
        """Whether the tool list is kept between runs (until the server says it changed)."""
        self.attach_media = attach_media
        """Whether images and PDFs in results go on the tool message as attachments."""
        self.max_result_bytes = max_result_bytes
        """Bytes of text a message from the server keeps; the rest is cut while it is read."""
        self._secrets = secrets
        self._guard = threading.Lock()
        self._link: Link | None = None
        self._tools: tuple[MCPTool, ...] | None = None
        self._changes = 0  # tool list changes announced, and connections made
        self._listed_at = -1  # the value of _changes when _tools was listed
        self._init_features(features)

    @property
    def name(self) -> str:
        """The server's name, in errors, logs and tool name clashes."""
        return self._name

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        """The SDK transport for one connection (made for each)."""
        raise NotImplementedError

    async def connect(self) -> None:
        """Connect now (a run connects on first use otherwise); raises
        :class:`~aniki.mcp.MCPServerError` if the server cannot be started or reached within
        ``connect_timeout`` seconds."""
        await self._at_home(self._connected)

    async def list_tools(self) -> Sequence[Tool]:
        """The server's tools as aniki tools, from the cache when it still holds; connects
        first when not connected. Raises :class:`~aniki.mcp.MCPServerError`."""
        return await self._at_home(self._list)

    def invalidate_tools(self) -> None:
        """Forget the cached tool list: the next ``list_tools()`` asks the server."""
        with self._guard:
            self._changes += 1

    async def close(self) -> None:
        """Close the connection: a stdio server's process is ended (asked to exit, then
        killed). The next use connects again."""
        with self._guard:
            link = self._link
        if link is None:
            return
        here = link.loop is asyncio.get_running_loop()
        if not (here or link.loop.is_running() or link.loop.is_closed()):
            raise UserError(
                f"MCP server {self._name!r} was connected on an event loop that is not "
                "running now; close it from that loop"
            )
        with self._guard:
            if self._link is link:
                self._link = None
            self._tools = None
        if here:
            await link.stop()
        elif link.loop.is_running():
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(link.stop(), link.loop))

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _reply(self, call: ToolCall, remote_name: str, arguments: dict[str, Any]) -> Message:
        """The ``tool`` message answering ``call`` to the server's tool ``remote_name``:
        its result, or what went wrong; never raises (but cancels)."""
        try:
            return await self._at_home(lambda: self._reply_here(call, remote_name, arguments))
        except UserError as exc:
            return failed(call, f"Error: {exc}", self._secrets)

    async def _at_home(self, work: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """``work()`` on the loop the server is connected on: this one when it is not
        connected, else through the other (running) loop."""
        loop = asyncio.get_running_loop()
        with self._guard:
            link = self._link
        if link is None or link.loop is loop or link.loop.is_closed() or not link.usable:
            return await work()
        if not link.loop.is_running():
            raise UserError(
                f"MCP server {self._name!r} is connected on another event loop, which is not "
                "running now; use it from that loop, or close it there first"
            )
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work(), link.loop))

    async def _connected(self) -> Link:
        loop = asyncio.get_running_loop()
        with self._guard:
            link = self._link
            if link is None or not link.usable:
                link = self._link = Link(
                    self._transport,
                    label=self._name,
                    timeout=self.timeout,
                    on_tools_changed=self.invalidate_tools,
                    client_options=self._client_options(),
                )
                self._changes += 1  # a new connection may list other tools
                link.start()
        if link.loop is not loop:
            raise UserError(
                f"MCP server {self._name!r} was connected from two event loops at once; "
                "connect it first (await server.connect()) on the loop that uses it"
            )
        try:
            await within(self.connect_timeout, link.wait_ready())
        except asyncio.TimeoutError:
            await self._drop(link)
            raise MCPServerError(
                f"MCP server {self._name!r} did not connect within {self.connect_timeout:g} s "
                "(connect_timeout=)",
                server=self._name,
            ) from None
        except asyncio.CancelledError:
            if not link.ready:  # a run cancelled while connecting leaves no server behind
                self._forget(link)
                closing = asyncio.ensure_future(link.stop())
                _BACKGROUND.add(closing)
                closing.add_done_callback(_BACKGROUND.discard)
            raise
        except Exception as exc:
            await self._drop(link)
            reason = self._reason(exc)
            raise MCPServerError(
                f"could not connect to MCP server {self._name!r}: {reason}", server=self._name
            ) from scrub(exc, self._secrets)
        return link

    def _forget(self, link: Link) -> None:
        with self._guard:
            if self._link is link:
                self._link = None

    async def _drop(self, link: Link) -> None:
        self._forget(link)
        await link.stop()

    async def _list(self) -> tuple[MCPTool, ...]:
        with self._guard:
            link, tools = self._link, self._tools
            fresh = self._listed_at == self._changes
        if (
            self.cache_tools
            and tools is not None
            and fresh
            and link is not None
            and link.usable
            and link.watching
        ):
            return tools
        with self._guard:
            changes = self._changes
        try:
            listed = await self._request(self._pages)
        except asyncio.TimeoutError:
            raise MCPServerError(
                f"MCP server {self._name!r} did not list its tools within {self.timeout:g} s "
                "(timeout=)",
                server=self._name,
            ) from None
        except MCPServerError:
            raise
        except Exception as exc:
            raise MCPServerError(
                f"MCP server {self._name!r} could not list its tools: {self._reason(exc)}",
                server=self._name,
            ) from scrub(exc, self._secrets)
        tools = build_tools(self, listed, prefix=self.tool_prefix, server_name=self._name)
        with self._guard:
            self._tools, self._listed_at = tools, changes
        return tools

    async def _request(self, work: Callable[[Client], Coroutine[Any, Any, T]]) -> T:
        """``work(client)`` within ``timeout`` seconds, connecting first when needed. A server
        that no longer knows the connection (an HTTP server that restarted) did not run the
        request, so it is sent once more, over a new connection."""
        for attempt in range(2):
            link = await self._connected()
            client = await link.wait_ready()
            try:
                return await within(self.timeout, work(client))
            except asyncio.TimeoutError:
                await self._probe(link, client)
                raise
            except MCPError as exc:
                if exc.code == types.REQUEST_TIMEOUT:
                    await self._probe(link, client)
                if attempt or not self._forgot_us(exc):
                    raise
                await self._drop(link)
        raise AssertionError("unreachable: the second attempt returns or raises")

    async def _probe(self, link: Link, client: Client) -> None:
        """After a call timed out, the connection's state is unknown (a result that never
        ends blocks what follows it): it is kept only if it answers a ping within
        :data:`_PROBE_WITHIN` seconds, else it is closed and the next call connects anew."""
        # 2026-07-28 has no ping: a page of the tool list stands in for it.
        modern = client.protocol_version in MODERN_PROTOCOL_VERSIONS
        probe = client.list_tools() if modern else client.session.send_ping()
        try:
            await within(min(_PROBE_WITHIN, self.timeout), probe)
            return
        except Exception:  # no answer, or any failure: the connection is not usable
            pass
        mcp_logger.info(
            "MCP server %s did not answer a ping after a timeout; reconnecting", self._name
        )
        await self._drop(link)

    def _forgot_us(self, exc: MCPError) -> bool:
        """Whether ``exc`` says the server no longer knows this connection."""
        return False

    async def _pages(self, client: Client) -> list[types.Tool]:
        listed: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(_MOST_PAGES):
            page = await client.list_tools(cursor=cursor)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                return listed
        raise MCPServerError(
            f"MCP server {self._name!r} lists its tools over more than {_MOST_PAGES} pages",
            server=self._name,
        )

    async def _reply_here(
        self, call: ToolCall, remote_name: str, arguments: dict[str, Any]
    ) -> Message:
        tool = call.name
        try:
            result = await self._request(
                lambda client: self._call_tool(client, remote_name, arguments)
            )
        except asyncio.TimeoutError:
            return self._failed(
                call, f"Error: the MCP tool {tool!r} did not answer within {self.timeout:g} s."
            )
        except MCPServerError as exc:
            return self._failed(call, f"Error: {exc}")
        except MCPError as exc:
            if exc.code == types.REQUEST_TIMEOUT:
                said = f"did not answer within {self.timeout:g} s"
                return self._failed(call, f"Error: the MCP tool {tool!r} {said}.")
            if exc.code == types.CONNECTION_CLOSED:
                return self._failed(
                    call,
                    f"Error: MCP server {self._name!r} closed the connection during the call "
                    f"to {tool!r}; it is connected again on the next call.",
                )
            return self._failed(
                call,
                f"Error: MCP server {self._name!r} refused the call to {tool!r}: "
                f"{exc.message} (error {exc.code}).",
            )
        except Exception as exc:
            return self._failed(call, f"Error: the call to MCP tool {tool!r} failed: {_said(exc)}")
        return result_message(
            call, result, tool=tool, attach_media=self.attach_media, secrets=self._secrets
        )

    def _failed(self, call: ToolCall, text: str) -> Message:
        message = failed(call, text, self._secrets)
        logger.warning("an MCP tool call failed: %s", message.content)
        return message

    def _reason(self, exc: BaseException) -> str:
        return redact(_said(first_leaf(exc)), self._secrets)

    def _shown(self) -> str:
        """The arguments a repr shows (never a secret)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._shown()}, name={self._name!r})"


def _said(exc: BaseException) -> str:
    leaf = first_leaf(exc)
    text = str(leaf)
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__
