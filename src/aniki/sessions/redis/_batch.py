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
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from ._steps import RAW

__all__ = ["LIMIT", "Batcher", "batcher"]

LIMIT = 128
"""The most commands one pipeline carries; a larger burst goes out as several, on as many
connections."""

_BATCHERS: weakref.WeakKeyDictionary[Any, Batcher] = weakref.WeakKeyDictionary()


def batcher(client: Any) -> Batcher:
    """The batcher of the asyncio client ``client`` (a plain client, not a cluster's: there a
    pipeline's commands would span slots) on the running loop."""
    loop = asyncio.get_running_loop()
    found = _BATCHERS.get(client)
    if found is None or found.loop is not loop:  # its connections belong to one loop
        found = _BATCHERS[client] = Batcher(client, loop)
    return found


class Batcher:
    """Sends a client's commands, together when several are waiting (see the module)."""

    def __init__(self, client: Any, loop: asyncio.AbstractEventLoop) -> None:
        from redis.exceptions import ResponseError

        self._refused: type[Exception] = ResponseError
        """A reply that is an error (a pipeline returns those in place)."""
        self.loop = loop
        self._client = client
        self._flying = 0
        """Commands sent and not answered yet."""
        self._held: list[tuple[tuple[Any, ...], asyncio.Future[Any]]] = []
        self._tasks: set[asyncio.Task[None]] = set()  # referenced until done

    async def send(self, *command: Any) -> Any:
        """The server's reply to ``command`` (bytes, never decoded), or its error raised."""
        if not self._flying and not self._held:
            self._flying += 1
            try:
                return await self._client.execute_command(*command, **RAW)
            finally:
                self._flying -= 1
        future: asyncio.Future[Any] = self.loop.create_future()
        if not self._held:
            self.loop.call_soon(self._flush)
        self._held.append((command, future))
        return await future

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
                    replies = [await self._client.execute_command(*held[0][0], **RAW)]
                except self._refused as exc:
                    replies = [exc]
            else:
                async with self._client.pipeline(transaction=False) as pipe:
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
