"""A Chat Completions server on 127.0.0.1, served from a thread of its own.

For tests of synchronous code (``run_sync``), which must not share an event loop with the
server it calls.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ..providers.fake_server import FakeServer, RecordedRequest, Respond
from ..providers.openai_shapes import completion


def echo(request: RecordedRequest) -> Respond:
    """Reply with the text of the last message sent."""
    return Respond(body=completion(request.json()["messages"][-1]["content"]))


@contextmanager
def threaded_server() -> Iterator[FakeServer]:
    """A :class:`FakeServer` that echoes, running until the block ends."""
    ready = threading.Event()
    box: dict[str, object] = {}

    async def serve() -> None:
        stop = asyncio.Event()
        async with FakeServer(handler=echo) as server:
            box.update(server=server, stop=stop, loop=asyncio.get_running_loop())
            ready.set()
            await stop.wait()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), name="loopback-server")
    thread.start()
    ready.wait(10)
    server = box["server"]
    assert isinstance(server, FakeServer)
    try:
        yield server
    finally:
        loop = box["loop"]
        assert isinstance(loop, asyncio.AbstractEventLoop)
        stop = box["stop"]
        assert isinstance(stop, asyncio.Event)
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)


def connections(server: FakeServer) -> int:
    """How many TCP connections the server has accepted so far."""
    accepted: int = server._connections
    return accepted
