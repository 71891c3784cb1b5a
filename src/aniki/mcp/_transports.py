"""What aniki adds to the SDK's two transports: a stdio server run under the watchdog
(``_watchdog.py``: no orphans, output cut while it is read), and an HTTP transport whose
JSON and event-stream bodies are cut while they are read (``_clip.py``)."""

from __future__ import annotations

import errno
import os
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx2
from mcp.client.stdio import get_default_environment

from mcp import StdioServerParameters

from ._clip import Clip, Overflow

__all__ = ["CappedTransport", "under_watchdog"]

WATCHDOG = Path(__file__).with_name("_watchdog.py")


def under_watchdog(parameters: StdioServerParameters, limit: int) -> StdioServerParameters:
    """``parameters`` run by the watchdog, which keeps ``limit`` bytes of strings per message.

    The command is looked up on the server's ``PATH`` here, so that a missing one fails as it
    would without the watchdog (``FileNotFoundError``). On Windows, or with no
    ``sys.executable`` to run the watchdog with, the server is run as it is."""
    if sys.platform == "win32" or not sys.executable:
        return parameters
    command = parameters.command
    if os.sep not in command:
        path = (get_default_environment() | (parameters.env or {})).get("PATH")
        found = shutil.which(command, path=path)
        if found is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)
        command = found
    args = ["-I", "-S", str(WATCHDOG), str(os.getpid()), str(limit), command, *parameters.args]
    return parameters.model_copy(update={"command": sys.executable, "args": args})


_SMALL_BODY = 64 * 1024
"""Bytes of an HTTP error's body read to see whether it is about the session."""


class CappedTransport(httpx2.AsyncBaseTransport):
    """An HTTP transport whose JSON and server-sent event bodies keep ``limit`` bytes of
    strings per message (a response it cannot cut, such as a compressed one, is passed on
    as it is), and that calls ``on_session_lost`` when the server refuses a request for its
    session: 404, or 400 with a body about the session (the reference TypeScript server's
    "No valid session ID provided", which the SDK passes on without the status)."""

    def __init__(
        self,
        limit: int,
        on_session_lost: Callable[[], None],
        inner: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self._limit = limit
        self._on_session_lost = on_session_lost
        self._inner = inner if inner is not None else httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["Accept-Encoding"] = "identity"  # bytes that can be cut as they come
        response = await self._inner.handle_async_request(request)
        if "mcp-session-id" in request.headers and response.status_code in (400, 404):
            response = await self._check_session(response)
        kind = response.headers.get("content-type", "").lower()
        encoded = response.headers.get("content-encoding", "identity").lower() != "identity"
        if encoded or not kind.startswith(("application/json", "text/event-stream")):
            return response
        clip = Clip(self._limit, events=kind.startswith("text/event-stream"))
        headers = [(k, v) for k, v in response.headers.raw if k.lower() != b"content-length"]
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            response.status_code,
            headers=headers,
            stream=_CappedStream(response.stream, clip),
            extensions=response.extensions,
        )

    async def _check_session(self, response: httpx2.Response) -> httpx2.Response:
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        body = b""
        try:
            async for chunk in response.stream:
                body += chunk
                if len(body) > _SMALL_BODY:
                    break
        finally:
            await response.stream.aclose()
        if response.status_code == 404 or b"session" in body.lower():
            self._on_session_lost()
        return httpx2.Response(
            response.status_code,
            headers=[(k, v) for k, v in response.headers.raw if k.lower() != b"content-length"],
            content=body[:_SMALL_BODY],
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, clip: Clip) -> None:
        self._inner = inner
        self._clip = clip

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            try:
                kept = self._clip.feed(chunk)
            except Overflow as exc:
                raise httpx2.ReadError(f"the MCP server's answer is too large: {exc}") from None
            if kept:
                yield kept

    async def aclose(self) -> None:
        await self._inner.aclose()
