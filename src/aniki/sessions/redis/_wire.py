"""aniki's own connection to Redis for the scripts of the asyncio sessions: one socket per
client and event loop, every command written to it as it comes and each reply given, in
order, to the command that waits for it (Redis answers a connection's commands in the order
they were sent).

redis-py's asyncio client spends about 30 us of CPU per command beyond what a bare asyncio
socket spends (a connection taken from its pool and given back, each argument encoded on its
own, a stream reader between the socket and the parser); an append is one script, so that is
a fifth of its time, and with a client that has a ``socket_timeout`` a task per command more
(``asyncio.wait_for``). Here a command is packed in one call (hiredis), written with one
``write``, and its reply parsed by hiredis as the bytes arrive. Commands that come while
others are waiting for their replies are held until the loop's next turn and written
together, so a burst of conversations costs one system call, as a pipeline would.

The connection is made as redis-py would make it from the client's settings (host and port
or a Unix socket, user and password, database, client name, connect and reply timeouts), and
only for settings it can copy: a client over TLS, with a credential provider, another text
encoding or a connection class of its own keeps using redis-py
(:func:`wire_settings` is ``None`` for it), as does any client when hiredis is not installed.
Replies and errors are redis-py's (a refused script raises the same ``ResponseError``), so
the sessions cannot tell the two apart.
"""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..._aio import within

__all__ = ["Wire", "WireSettings", "open_wire", "wire_settings"]

_UTF8 = ("utf-8", "utf8", "UTF-8", "UTF8")


@dataclass(frozen=True, repr=False)
class WireSettings:
    """How to open a connection like the client's own (the password is never shown)."""

    host: str | None
    port: int
    path: str | None
    """A Unix socket's path (then ``host`` is ``None``)."""
    username: str | None
    password: str | None
    db: int
    client_name: str | None
    connect_timeout: float | None
    reply_timeout: float | None
    """The client's ``socket_timeout``: how long one reply may take (``None``: no bound of
    its own; the session's deadline bounds the call)."""
    keepalive: bool
    hello: bool
    """Whether redis-py would sign in with ``HELLO`` (it speaks RESP3 to this server): then
    so does this connection, keeping RESP2 (``HELLO 2 AUTH``), as a password is checked the
    same way either way."""

    def __repr__(self) -> str:
        where = self.path if self.host is None else f"{self.host}:{self.port}"
        return f"WireSettings({where}, db={self.db})"

    @property
    def where(self) -> str:
        """The server as an error names it."""
        return f"unix socket {self.path}" if self.host is None else f"{self.host}:{self.port}"


def wire_settings(client: Any) -> WireSettings | None:
    """The settings of a connection like ``client``'s when aniki's own connection can copy
    them, ``None`` otherwise (the client's commands then go through redis-py)."""
    try:
        import hiredis  # noqa: F401  (the parser and the packer)
        from redis.asyncio.connection import Connection, UnixDomainSocketConnection
    except ImportError:
        return None
    pool = getattr(client, "connection_pool", None)
    kind = getattr(pool, "connection_class", None)
    kwargs = getattr(pool, "connection_kwargs", None)
    if kind not in (Connection, UnixDomainSocketConnection) or not isinstance(kwargs, dict):
        return None  # TLS, a class of the application's own, or not a plain client
    if (
        kwargs.get("credential_provider") is not None
        or kwargs.get("redis_connect_func") is not None
        or kwargs.get("protocol") not in (None, 2, "2", 3, "3")
        or kwargs.get("encoding", "utf-8") not in _UTF8
        or kwargs.get("encoding_errors", "strict") != "strict"
    ):
        return None
    unix = kind is UnixDomainSocketConnection
    return WireSettings(
        hello=_speaks_resp3(kwargs.get("protocol")),
        host=None if unix else str(kwargs.get("host", "localhost")),
        port=int(kwargs.get("port", 6379)),
        path=str(kwargs.get("path", "")) if unix else None,
        username=kwargs.get("username"),
        password=kwargs.get("password"),
        db=int(kwargs.get("db", 0) or 0),
        client_name=kwargs.get("client_name"),
        connect_timeout=kwargs.get("socket_connect_timeout"),
        reply_timeout=kwargs.get("socket_timeout"),
        keepalive=bool(kwargs.get("socket_keepalive")),
    )


def _speaks_resp3(protocol: object) -> bool:
    """Whether redis-py's connections with ``protocol=`` open with ``HELLO 3``."""
    try:
        from redis.utils import check_protocol_version
    except ImportError:  # a redis-py before its default became RESP3
        return protocol in (3, "3")
    return bool(check_protocol_version(protocol, 3))


class Wire(asyncio.Protocol):
    """One connection: commands written in the order sent, replies handed out in that order.

    :meth:`send` returns a future of the reply (bytes, an int, a list of them; an error reply
    as redis-py's exception). When the connection ends, every command still waiting fails
    with redis-py's ``ConnectionError``; the wire is then :attr:`broken` and a new one is
    opened for the next command.
    """

    def __init__(self) -> None:
        import hiredis
        from redis._parsers.base import BaseParser
        from redis.exceptions import ConnectionError as LostConnection
        from redis.exceptions import InvalidResponse

        self._reader = hiredis.Reader(
            protocolError=InvalidResponse, replyError=BaseParser.parse_error
        )
        self._pack = hiredis.pack_command
        self._lost_error = LostConnection
        self._transport: asyncio.Transport | None = None
        self._waiting: deque[asyncio.Future[Any]] = deque()
        """Futures of the commands written, oldest first."""
        self._held: list[tuple[bytes, asyncio.Future[Any]]] = []
        """Commands packed while others were waiting, written on the loop's next turn."""
        self.broken: BaseException | None = None
        """Why the connection ended (``None`` while it is open)."""
        self.received = 0
        """Replies received so far (a caller that gave up compares it with its own count)."""
        self._closed: asyncio.Future[None]

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._closed = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        reader = self._reader
        reader.feed(data)
        waiting = self._waiting
        while True:
            try:
                reply = reader.gets()
            except Exception as exc:  # not RESP: nothing after it can be matched
                self._end(exc)
                return
            if reply is False:
                return
            if not waiting:
                self._end(self._lost_error("Redis sent a reply to no command"))
                return
            self.received += 1
            future = waiting.popleft()
            if future.done():
                continue  # its caller stopped waiting: the reply is dropped, the order kept
            if isinstance(reply, Exception):
                future.set_exception(reply)
            else:
                future.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        reason = f"Connection closed by server ({exc})" if exc else "Connection closed by server."
        self._fail(self._lost_error(reason))
        if not self._closed.done():
            self._closed.set_result(None)

    def send(self, command: tuple[Any, ...]) -> asyncio.Future[Any]:
        """Write ``command`` (now, or on the loop's next turn if others are waiting) and
        return the future of its reply."""
        if self.broken is not None or self._transport is None:
            raise self._lost_error("Connection closed by server.")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        packed = self._pack(command)
        if self._waiting or self._held:
            if not self._held:
                asyncio.get_running_loop().call_soon(self._flush)
            self._held.append((packed, future))
        else:
            self._transport.write(packed)
            self._waiting.append(future)
        return future

    def close(self) -> None:
        """Close the connection; the commands still waiting fail."""
        self._end(None)

    async def wait_closed(self) -> None:
        """Return once the socket is closed (after :meth:`close`)."""
        await asyncio.shield(self._closed)

    def _flush(self) -> None:
        held, self._held = self._held, []
        if self.broken is not None or self._transport is None:
            return  # failed with the connection
        parts = []
        for packed, future in held:
            if not future.done():  # a call whose time ran out before it left is not sent
                parts.append(packed)
                self._waiting.append(future)
        if parts:
            self._transport.write(b"".join(parts))

    def _end(self, exc: BaseException | None) -> None:
        self._fail(self._lost_error(f"Connection closed ({exc})" if exc else "Connection closed"))
        if self._transport is None:
            return
        if exc is None:
            self._transport.close()
        else:
            self._transport.abort()  # what is still buffered cannot be matched any more

    def _fail(self, exc: BaseException) -> None:
        if self.broken is None:
            self.broken = exc
        waiting = [*self._waiting, *(future for _, future in self._held)]
        self._waiting.clear()
        self._held = []
        for future in waiting:
            if not future.done():
                future.set_exception(exc)


async def open_wire(settings: WireSettings) -> Wire:
    """A connection made with ``settings``, signed in and on its database; redis-py's
    ``ConnectionError`` (``AuthenticationError`` for refused credentials) or ``TimeoutError``
    when that cannot be done within the connect timeout."""
    from redis import exceptions as rx

    loop = asyncio.get_running_loop()
    bound = settings.connect_timeout
    try:
        wire = await (
            _connect(loop, settings) if bound is None else within(bound, _connect(loop, settings))
        )
        try:
            await _sign_in(wire, settings)
        except BaseException:
            wire.close()
            raise
    except asyncio.TimeoutError:
        raise rx.TimeoutError(f"Timeout connecting to {settings.where}") from None
    except OSError as exc:
        detail = exc.strerror or str(exc) or type(exc).__name__
        raise rx.ConnectionError(f"Error connecting to {settings.where}: {detail}") from None
    return wire


async def _connect(loop: asyncio.AbstractEventLoop, settings: WireSettings) -> Wire:
    if settings.host is None:
        _, wire = await loop.create_unix_connection(Wire, settings.path)
        return wire
    transport, wire = await loop.create_connection(Wire, settings.host, settings.port)
    sock = transport.get_extra_info("socket")
    if settings.keepalive and sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    return wire


async def _sign_in(wire: Wire, settings: WireSettings) -> None:
    """What redis-py sends on a new connection, for the settings aniki copies."""
    bound = settings.connect_timeout

    async def ask(*commands: tuple[Any, ...]) -> None:
        for future in [wire.send(command) for command in commands]:
            await (future if bound is None else within(bound, future))

    if settings.password is not None or settings.username:
        await _authenticate(ask, settings)
    commands: list[tuple[Any, ...]] = []
    if settings.client_name:
        commands.append(("CLIENT", "SETNAME", settings.client_name))
    if settings.db:
        commands.append(("SELECT", settings.db))
    await ask(*commands)


async def _authenticate(ask: Callable[..., Awaitable[None]], settings: WireSettings) -> None:
    """Sign in as redis-py does: with ``HELLO`` where it would send one (and, on a server that
    predates ``HELLO``, falls back to ``AUTH``), else with ``AUTH``."""
    from redis.exceptions import ResponseError

    password = settings.password or ""
    if settings.hello:
        try:
            await ask(("HELLO", 2, "AUTH", settings.username or "default", password))
            return
        except ResponseError as exc:
            reason = str(exc).lower().removeprefix("err ")
            if not reason.startswith(("unknown command", "noproto")):
                raise
    await ask(("AUTH", settings.username, password) if settings.username else ("AUTH", password))
