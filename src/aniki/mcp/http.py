"""``MCPServerHTTP``: an MCP server reached over streamable HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx2
from mcp.client.streamable_http import streamable_http_client

from mcp import MCPError, types

from .._secrets import Secrets, shown_url, url_secrets
from ..errors import UserError
from ._base import MCPServerBase

__all__ = ["MCPServerHTTP"]

_STREAM_READ = 300.0
"""Seconds a response stream may stay silent (the SDK's default: servers hold streams open)."""


class MCPServerHTTP(MCPServerBase):
    """An MCP server at a streamable HTTP endpoint, connected on first use.

    The connection (an MCP session) is opened when a run first needs the server's tools (or
    on ``connect()`` or ``async with``), kept across runs, and closed by ``close()`` or at
    interpreter exit. If the server goes away, the next call connects again.

    Example::

        from aniki import Agent
        from aniki.mcp import MCPServerHTTP

        docs = MCPServerHTTP(
            "https://mcp.example.com/mcp", headers={"Authorization": f"Bearer {token}"}
        )
        agent = Agent("Helper", "Use the docs.", model="gpt-4o", mcp_servers=[docs])
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        timeout: float = 30.0,
        connect_timeout: float = 30.0,
        tool_prefix: str = "",
        cache_tools: bool = True,
        attach_media: bool = False,
    ) -> None:
        """
        Args:
            url: the endpoint, ``http://`` or ``https://`` (often ending in ``/mcp``). Put
                tokens in ``headers``: a URL's query string is not shown anywhere, but
                HTTP libraries may log it.
            headers: sent with every request (``Authorization``, API keys). Their values
                never appear in errors, logs or the repr.
            name: the server's name in errors and logs (default: the URL's host and path).
            timeout: seconds a tool call, or the listing of the tools, may take; a call that
                takes longer is answered with an error the model reads.
            connect_timeout: seconds reaching the server and the MCP handshake may take.
            tool_prefix: put before each tool's name as the model sees it (``"docs_"``), to
                keep two servers' tools apart.
            cache_tools: keep the tool list across runs until the server says it changed
                (``False``: ask the server at the start of every run).
            attach_media: put images and PDFs that tools return on the tool message as
                attachments, for providers that take them in a tool result (Anthropic,
                OpenAI Responses); by default they are described in the text.
        """
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            shown = shown_url(url) if isinstance(url, str) else type(url).__name__
            raise UserError(f"url must be an http:// or https:// URL, got {shown}")
        if headers is not None and not (
            isinstance(headers, Mapping)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
        ):
            raise UserError("headers must map header names to string values")
        self.url = url
        """The endpoint (its password and query string are never shown)."""
        self._headers = dict(headers) if headers is not None else {}
        super().__init__(
            name=name if name is not None else _default_name(url),
            timeout=timeout,
            connect_timeout=connect_timeout,
            tool_prefix=tool_prefix,
            cache_tools=cache_tools,
            attach_media=attach_media,
            secrets=Secrets([*self._headers.values(), *url_secrets(url)]),
        )

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        return _http(self.url, self._headers, self.connect_timeout)

    def _forgot_us(self, exc: MCPError) -> bool:
        # A server answers 404 to a session it does not know (it restarted, or ended the
        # session): the SDK makes that an "invalid request" error naming the session.
        return exc.code == types.INVALID_REQUEST and "session" in exc.message.lower()

    def _shown(self) -> str:
        headers = f", headers=<{len(self._headers)} headers>" if self._headers else ""
        return f"{shown_url(self.url)!r}{headers}"


@asynccontextmanager
async def _http(url: str, headers: dict[str, str], connect: float) -> AsyncIterator[Any]:
    timeout = httpx2.Timeout(connect, read=_STREAM_READ)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as client,
        streamable_http_client(url, http_client=client) as streams,
    ):
        yield streams


def _default_name(url: str) -> str:
    """``"mcp.example.com/mcp"`` for ``https://user:pw@mcp.example.com/mcp?key=...``."""
    shown = shown_url(url).partition("://")[2].partition("?")[0]
    return shown.rpartition("@")[2].rstrip("/") or shown_url(url)
