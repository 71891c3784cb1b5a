"""Commands of many asyncio sessions sent together: while one of a client's commands is in
flight, the commands other sessions send are held until the event loop's next turn and go
to the server as one pipeline, on one connection.

A web server's conversations come in bursts: a model's replies wake many of them in the same
turn of the loop, and each then appends and reads. redis-py spends some 75 us of CPU per
command sent alone (taking a connection from the pool, packing, a write, a read woken by the
loop) and 13-16 us per command in a pipeline of 50 or more, so the burst sent together costs a
fifth of the process's time; the server runs the same commands in the same order. A command
sent while nothing else is in flight goes out at once, as before: a single conversation, or
appends one after another, pay nothing for this.

Each command keeps its own reply and its own error (a pipeline without a transaction, errors
returned in place): a refused script, or ``NOSCRIPT``, reaches the session that sent it only.
A connection that fails fails every command of its pipeline, as it would each command sent on
it alone. A call whose time runs out before its pipeline left is taken out of it, unsent.

When aniki can open a connection like the client's own (``_wire``), the commands go on that
one connection instead, each written as it comes (those that come while others wait, on the
loop's next turn, together), with no pool and no pipeline object: the same grouping, at a
fraction of redis-py's cost per command. A command whose connection breaks is sent again on a
new one, up to three times, as redis-py's retry would (the write scripts carry a token, so a
resent write the server had applied is not applied twice).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from typing import Any

from ..._aio import within_about
from ._client import BACKOFF_BASE, BACKOFF_CAP, RETRIES
from ._steps import RAW
from ._wire import Wire, open_wire, wire_settings

__all__ = ["LIMIT", "Batcher", "batcher", "close_batcher"]

LIMIT = 128
"""The most commands one pipeline carries; a larger burst goes out as several, on as many
connections."""
_SILENT = 0.5
"""Seconds with a command waiting and no reply at all on the connection after which a caller
that gives up closes it: the server or the network is stuck, and a new connection may not be
(redis-py drops a connection whose reply a cancelled call was waiting for)."""

_BATCHERS: weakref.WeakKeyDictionary[Any, Batcher] = weakref.WeakKeyDictionary()


def batcher(client: Any) -> Batcher:
    """The batcher of the asyncio client ``client`` (a plain client, not a cluster's: there a
    pipeline's commands would span slots) on the running loop."""
    loop = asyncio.get_running_loop()
    found = _BATCHERS.get(client)
    if found is None or found.loop is not loop:  # its connections belong to one loop
        if found is not None:
            found.close()
        found = _BATCHERS[client] = Batcher(client, loop)
        weakref.finalize(client, _dropped, found)  # a client dropped unclosed: its wire too
    return found


def _dropped(found: Batcher) -> None:
    """Close ``found``'s connection on its loop: the client it served was garbage-collected,
    perhaps in another thread."""
    if not found.loop.is_closed():
        with contextlib.suppress(RuntimeError):  # closed meanwhile: its sockets went with it
            found.loop.call_soon_threadsafe(found.close)


async def close_batcher(client: Any) -> None:
    """Close the connection aniki opened beside ``client`` (with the client itself)."""
    found = _BATCHERS.pop(client, None)
    if found is not None:
        await found.aclose()


class Batcher:
    """Sends a client's commands, together when several are waiting (see the module)."""

    def __init__(self, client: Any, loop: asyncio.AbstractEventLoop) -> None:
        from redis.exceptions import AuthenticationError, ResponseError
        from redis.exceptions import ConnectionError as LostConnection
        from redis.exceptions import TimeoutError as Late

        self._lost: type[Exception] = LostConnection
        """A broken connection: the command is sent again (unless credentials were refused)."""
        self._refused_sign_in: type[Exception] = AuthenticationError
        self._late: type[Exception] = Late

        self._refused: type[Exception] = ResponseError
        """A reply that is an error (a pipeline returns those in place)."""
        self.loop = loop
        self._client = weakref.ref(client)  # a strong one would keep the key of _BATCHERS
        self._settings = wire_settings(client)
        """How to open aniki's own connection (``None``: the commands go through redis-py)."""
        self._wire: Wire | None = None
        self._opening: asyncio.Task[Wire] | None = None
        self._flying = 0
        """Commands sent and not answered yet."""
        self._held: list[tuple[tuple[Any, ...], asyncio.Future[Any]]] = []
        self._tasks: set[asyncio.Task[None]] = set()  # referenced until done

    async def send(self, *command: Any) -> Any:
        """The server's reply to ``command`` (bytes, never decoded), or its error raised."""
        if self._settings is not None:
            return await self._send_wire(command)
        if not self._flying and not self._held:
            self._flying += 1
            try:
                return await self._redis().execute_command(*command, **RAW)
            finally:
                self._flying -= 1
        future: asyncio.Future[Any] = self.loop.create_future()
        if not self._held:
            self.loop.call_soon(self._flush)
        self._held.append((command, future))
        return await future

    def close(self) -> None:
        """Close aniki's own connection, if one is open (a later command opens another)."""
        wire, self._wire = self._wire, None
        if self.loop.is_closed():
            return  # its connections ended with it
        if self._opening is not None:
            self._opening.cancel()
        if wire is not None:
            wire.close()

    async def aclose(self) -> None:
        """:meth:`close`, and wait until the socket is closed."""
        wire = self._wire
        self.close()
        if wire is not None and not self.loop.is_closed():
            await wire.wait_closed()

    def _redis(self) -> Any:
        client = self._client()
        if client is None:  # the sessions that send hold it
            raise RuntimeError("the Redis client of this batcher was garbage-collected")
        return client

    async def _send_wire(self, command: tuple[Any, ...]) -> Any:
        for attempt in range(RETRIES):
            try:
                return await self._send_once(command)
            except self._lost as exc:
                if isinstance(exc, self._refused_sign_in):
                    raise
            await asyncio.sleep(min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt))
        return await self._send_once(command)

    async def _send_once(self, command: tuple[Any, ...]) -> Any:
        wire = self._wire
        if wire is None or wire.broken is not None:
            wire = await self._open()
        return await self._reply(wire, wire.received, wire.send(command))

    async def _open(self) -> Wire:
        """The new connection: one for a whole burst of first commands, each of which
        resumes on the same turn of the loop (so they go out together)."""
        assert self._settings is not None
        opening = self._opening
        if opening is None:
            opening = self._opening = self.loop.create_task(open_wire(self._settings))
            opening.add_done_callback(self._opened)
        return await asyncio.shield(opening)  # a caller that gives up leaves it to the rest

    def _opened(self, opening: asyncio.Task[Wire]) -> None:
        self._opening = None
        if not opening.cancelled() and opening.exception() is None:  # its waiters get that
            self._wire = opening.result()

    async def _reply(self, wire: Wire, mark: int, future: asyncio.Future[Any]) -> Any:
        """The reply, within the client's ``socket_timeout`` when it has one. A caller that
        gives up (its deadline, a cancellation) after :data:`_SILENT` seconds in which no
        reply at all came on the connection closes it (``mark``: the replies it had had)."""
        assert self._settings is not None
        bound = self._settings.reply_timeout
        sent = self.loop.time()
        try:
            if bound is None:
                return await future
            return await within_about(bound, future)
        except asyncio.CancelledError:
            if wire.received == mark and self.loop.time() - sent >= _SILENT:
                wire.close()
            raise
        except asyncio.TimeoutError:
            wire.close()  # what it still owes may arrive out of step: redis-py drops it too
            raise self._late(f"Timeout reading from {self._settings.where}") from None

    def _flush(self) -> None:
        held = [(command, future) for command, future in self._held if not future.done()]
        self._held = []
        for start in range(0, len(held), LIMIT):
            task = self.loop.create_task(self._pipeline(held[start : start + LIMIT]))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipeline(self, held: list[tuple[tuple[Any, ...], asyncio.Future[Any]]]) -> None:
        self._flying += len(held)
        try:
            if len(held) == 1:  # alone after all: no pipeline to pay for
                try:
                    replies = [await self._redis().execute_command(*held[0][0], **RAW)]
                except self._refused as exc:
                    replies = [exc]
            else:
                async with self._redis().pipeline(transaction=False) as pipe:
                    for command, _ in held:
                        pipe.execute_command(*command, **RAW)
                    replies = await pipe.execute(raise_on_error=False)
        except asyncio.CancelledError:
            for _, future in held:
                future.cancel()
            raise
        except Exception as exc:
            for _, future in held:
                if not future.done():
                    future.set_exception(exc)
            return
        finally:
            self._flying -= len(held)
        for (_, future), reply in zip(held, replies, strict=True):
            if future.done():
                continue  # its caller's time ran out meanwhile
            if isinstance(reply, Exception):
                future.set_exception(reply)
            else:
                future.set_result(reply)
