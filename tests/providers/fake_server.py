"""A scriptable HTTP/1.1 server on 127.0.0.1 for provider tests, written on asyncio streams.

Tests queue replies, run a real vendor client against :attr:`FakeServer.url`, then look at
what arrived in :attr:`FakeServer.requests`. A reply is one of:

- :class:`Respond` — a whole response (any status, headers, JSON or raw bytes), or one cut
  off part-way through its body (``cut_at``);
- :class:`Stream` — a server-sent-event body, sent chunk by chunk, that ends cleanly, is cut
  off (``end="drop"``: the socket is reset mid-body) or hangs (``end="stall"``);
- :class:`Stall` — read the request and never answer;
- :class:`Drop` — close the connection without answering.

Replies are used in order, one per request; a callable ``handler`` may compute them
instead. Fault-injection tests can queue any sequence of these (bursts of 429, a drop then
a success, ...) without new server code.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Literal

__all__ = [
    "Drop",
    "FakeServer",
    "RecordedRequest",
    "Reply",
    "Respond",
    "Stall",
    "Stream",
    "sse",
]


def sse(data: Any, *, event: str | None = None) -> str:
    """One server-sent event; ``data`` that is not a string is sent as JSON."""
    text = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return head + "".join(f"data: {line}\n" for line in text.split("\n")) + "\n"


@dataclass(frozen=True)
class Respond:
    """A whole response."""

    status: int = 200
    body: Any = b""
    """bytes or str as they are; anything else as JSON."""
    headers: Mapping[str, str] = field(default_factory=dict)
    cut_at: int | None = None
    """Send only this many bytes of the body (its full length announced), then reset the
    socket: a reply cut off mid-body after the connection was made."""


@dataclass(frozen=True)
class Stream:
    """A ``text/event-stream`` body in chunked transfer encoding."""

    events: Sequence[str]
    """Events formatted by :func:`sse` (or any raw text, for malformed streams)."""
    end: Literal["finish", "drop", "stall"] = "finish"
    """``finish``: a clean end; ``drop``: reset the socket; ``stall``: never end."""
    chunk_size: int | None = None
    """Re-cut the body into pieces of this many bytes (splitting events and lines)."""
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Stall:
    """Read the request, then answer nothing until the client gives up."""


@dataclass(frozen=True)
class Drop:
    """Close the connection as soon as the request arrived, without a response."""


Reply = Respond | Stream | Stall | Drop


@dataclass
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    """Header names in lower case."""
    body: bytes
    received_at: float
    """``loop.time()`` when the request was read."""
    connection: int = 0
    """Which TCP connection it came on (numbered from 1 in order of opening)."""
    answered_at: float | None = None
    """``loop.time()`` when the response (or its headers) went out."""

    def json(self) -> Any:
        return json.loads(self.body)


class FakeServer:
    """Serve scripted replies on 127.0.0.1 (an ephemeral port) until closed.

    Use as ``async with FakeServer() as server:``; ``server.url`` is ``http://127.0.0.1:PORT``.
    """

    def __init__(self, handler: Callable[[RecordedRequest], Reply] | None = None) -> None:
        self.handler = handler
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Reply] = deque()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._connections = 0
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pending(self) -> int:
        """Queued replies not used yet."""
        return len(self._queue)

    def enqueue(self, *replies: Reply) -> None:
        self._queue.extend(replies)

    async def __aenter__(self) -> FakeServer:
        self._server = await asyncio.start_server(self._on_connection, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    def _next_reply(self, request: RecordedRequest) -> Reply:
        if self._queue:
            return self._queue.popleft()
        if self.handler is not None:
            return self.handler(request)
        return Respond(500, {"error": {"message": "fake server: no reply scripted"}})

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._connections += 1
        connection = self._connections
        try:
            while await self._serve_one(reader, writer, connection):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass  # the server is closing; asyncio would log a cancelled connection task
        finally:
            self._tasks.discard(task)
            writer.transport.abort()

    async def _serve_one(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, connection: int
    ) -> bool:
        """Answer one request; False when the connection is finished."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, path, _ = request_line.split(" ", 2)
        headers = {}
        for line in header_lines:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        loop = asyncio.get_running_loop()
        request = RecordedRequest(
            method, path, headers, body, received_at=loop.time(), connection=connection
        )
        self.requests.append(request)
        reply = self._next_reply(request)
        if isinstance(reply, Drop):
            return False
        if isinstance(reply, Stall):
            await asyncio.Event().wait()  # until the server closes and cancels us
        request.answered_at = loop.time()
        if isinstance(reply, Respond):
            await self._respond(writer, reply)
            return reply.cut_at is None  # a cut reply: the caller aborts the socket
        assert isinstance(reply, Stream)
        return await self._stream(writer, reply)

    @staticmethod
    def _head(status: int, headers: Mapping[str, str]) -> bytes:
        reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "X"
        lines = [f"HTTP/1.1 {status} {reason}", *(f"{k}: {v}" for k, v in headers.items())]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _respond(self, writer: asyncio.StreamWriter, reply: Respond) -> None:
        body = reply.body
        content_type = "application/json"
        if isinstance(body, str):
            body = body.encode()
        elif not isinstance(body, bytes):
            body = json.dumps(body).encode()
        headers = {"content-type": content_type, **reply.headers}
        headers["content-length"] = str(len(body))
        writer.write(self._head(reply.status, headers) + body[: reply.cut_at])
        await writer.drain()

    async def _stream(self, writer: asyncio.StreamWriter, reply: Stream) -> bool:
        headers = {"content-type": "text/event-stream", **reply.headers}
        headers["transfer-encoding"] = "chunked"
        writer.write(self._head(reply.status, headers))
        if reply.chunk_size:
            payload, size = "".join(reply.events).encode(), reply.chunk_size
            pieces = [payload[i : i + size] for i in range(0, len(payload), size)]
        else:
            pieces = [event.encode() for event in reply.events]
        for piece in pieces:
            if piece:
                writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                await writer.drain()
                await asyncio.sleep(0)  # let the client read event by event
        if reply.end == "drop":
            return False  # the caller aborts the socket: a mid-body reset
        if reply.end == "stall":
            await asyncio.Event().wait()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


async def closed_port() -> int:
    """A local port nothing listens on (connections to it are refused)."""
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port: int = server.sockets[0].getsockname()[1]
    server.close()
    with contextlib.suppress(Exception):
        await server.wait_closed()
    return port
