"""``MCPServerHTTP``: an MCP server reached over streamable HTTP."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx2
from mcp.client.streamable_http import streamable_http_client

from mcp import MCPError, types

from .._secrets import Secrets, shown_url, url_secrets
from ..errors import UserError
from ._base import MAX_RESULT_BYTES, MCPServerBase
from ._features_config import ApproveSampling, ElicitationHandler, Sampling, client_features
from ._transports import CappedTransport

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
        max_result_bytes: how much text (and base64 media) one message from the
            server, such as a tool's result, keeps (default 1 MiB); the rest is cut
            while it is read, never held in memory, and a note says so.
        sampling: who answers when the server asks for a model reply: ``"agent"`` (the
            model of the agent whose run calls the server's tool), a provider (with
            ``sampling_model=``, or the calling agent's model), or a function taking a
            :class:`~aniki.mcp.SamplingRequest` and returning the text. ``None``: the
            client does not offer sampling.
        sampling_model: the model a provider given as ``sampling=`` is asked with.
        approve_sampling: called with each :class:`~aniki.mcp.SamplingRequest` before it
            is answered: ``True`` lets it go ahead, ``False`` or a reason refuses it.
        elicitation: answers the server's questions to the user: called with an
            :class:`~aniki.mcp.ElicitationRequest`, it returns an
            :class:`~aniki.mcp.ElicitationReply`, a dict (accept with these values) or
            ``None`` (decline). Without it every question is declined.
        roots: the directories (paths or ``file://`` URIs) the server is told it may
            work in, when it asks. ``None``: the client does not offer roots.
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
        max_result_bytes: int = MAX_RESULT_BYTES,
        sampling: Sampling | None = None,
        sampling_model: str | None = None,
        approve_sampling: ApproveSampling | None = None,
        elicitation: ElicitationHandler | None = None,
        roots: Sequence[str | os.PathLike[str]] | None = None,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            shown = shown_url(url) if isinstance(url, str) else type(url).__name__
            raise UserError(f"url must be an http:// or https:// URL, got {shown}")
        if headers is not None and not (
            isinstance(headers, Mapping)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
        ):
            raise UserError("headers must map header names to string values")
        self.url = url
        self._session_lost = False
        """The endpoint (its password and query string are never shown)."""
        self._headers = dict(headers) if headers is not None else {}
        super().__init__(
            name=name if name is not None else _default_name(url),
            timeout=timeout,
            connect_timeout=connect_timeout,
            tool_prefix=tool_prefix,
            cache_tools=cache_tools,
            attach_media=attach_media,
            max_result_bytes=max_result_bytes,
            secrets=Secrets([*self._headers.values(), *url_secrets(url)]),
            features=client_features(
                sampling=sampling,
                sampling_model=sampling_model,
                approve_sampling=approve_sampling,
                elicitation=elicitation,
                roots=roots,
            ),
        )

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        self._session_lost = False  # a new connection: a new session
        transport = CappedTransport(self.max_result_bytes, self._lose_session)
        return _http(self.url, self._headers, self.connect_timeout, transport)

    def _lose_session(self) -> None:
        self._session_lost = True

    def _forgot_us(self, exc: MCPError) -> bool:
        # A server that does not know the session (it restarted, or ended the session)
        # refuses the request unrun: with 404, which the SDK makes an "invalid request" error
        # naming the session, or, as the reference TypeScript server does, with 400 and a
        # JSON-RPC error -32000 "Bad Request: No valid session ID provided".
        if self._session_lost:  # the transport saw it (the SDK's error may not say)
            return True
        server_error = -32099 <= exc.code <= -32000
        named = "session" in exc.message.lower()
        return named and (exc.code == types.INVALID_REQUEST or server_error)

    def _shown(self) -> str:
        headers = f", headers=<{len(self._headers)} headers>" if self._headers else ""
        return f"{shown_url(self.url)!r}{headers}"


@asynccontextmanager
async def _http(
    url: str, headers: dict[str, str], connect: float, transport: CappedTransport
) -> AsyncIterator[Any]:
    timeout = httpx2.Timeout(connect, read=_STREAM_READ)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout, transport=transport) as client,
        streamable_http_client(url, http_client=client) as streams,
    ):
        yield streams


def _default_name(url: str) -> str:
    """``"mcp.example.com/mcp"`` for ``https://user:pw@mcp.example.com/mcp?key=...``."""
    shown = shown_url(url).partition("://")[2].partition("?")[0]
    return shown.rpartition("@")[2].rstrip("/") or shown_url(url)
