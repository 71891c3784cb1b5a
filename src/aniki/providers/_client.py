"""Owning a vendor client: one per event loop, built on first use, off the loop.

A vendor client pools HTTP connections, and a pooled connection belongs to the event loop
that opened it. Several loops may use one provider (the caller's own, and the one
``Runner.run_sync`` keeps in a background thread), so a provider keeps one client per loop
instead of sharing one across loops.

Building a client takes tens of milliseconds (TLS certificates are loaded), so it happens in
a worker thread while the loop goes on serving other tasks.

A client is closed on its loop before that loop closes, when the loop is shut down as
``asyncio.run`` shuts it down: an async generator started with the client is finalized by
``loop.shutdown_asyncgens()``, and closes it. Left to be collected after its loop closed,
the vendor's client would schedule its own closing on whatever loop runs then, and log a
"Task exception was never retrieved ... Event loop is closed" traceback per connection.

A provider collected while its loops still run (an agent made per request, served by
``Runner.run_sync``'s long-lived loop) has its clients closed on those loops: the clients are
held apart from the provider, so they outlive it until closed, rather than being collected
with it, their sockets still open.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar

from .._threads import SETUP
from ..errors import UserError

__all__ = [
    "PerLoopClient",
    "check_client_options",
    "check_retry_options",
    "close_loop_clients",
    "from_env",
]


class _Closable(Protocol):
    def close(self) -> Awaitable[None]: ...


C = TypeVar("C", bound=_Closable)

_ALL: weakref.WeakSet[PerLoopClient[Any]] = weakref.WeakSet()

_CLOSING: set[asyncio.Task[None]] = set()
"""Closings of clients whose owner was collected, kept until done (a loop holds its tasks
only weakly), and awaited by :func:`close_loop_clients` before the loop closes."""


class _Held(Generic[C]):
    """An owner's clients, by loop, kept apart from the owner so that they outlive it: a
    collected provider's clients are closed on their loops instead of being collected with
    it, sockets open (``ResourceWarning: unclosed``)."""

    def __init__(self) -> None:
        self.clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, C] = (
            weakref.WeakKeyDictionary()
        )


class PerLoopClient(Generic[C]):
    """Builds a client with ``factory`` (in a worker thread) the first time each event loop
    asks for one."""

    def __init__(self, factory: Callable[[], C]) -> None:
        self._factory = factory
        self._held: _Held[C] = _Held()
        self._building: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Future[C]] = (
            weakref.WeakKeyDictionary()
        )
        self._guards: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, AsyncGenerator[None, None]
        ] = weakref.WeakKeyDictionary()
        _ALL.add(self)
        # Not at exit: the loops' own shutdown closes the clients of the owners left then.
        weakref.finalize(self, _orphaned, self._held).atexit = False

    async def get(self) -> C:
        """The running loop's client (built now if it has none).

        Calls that arrive while it is being built wait for that one client; a failed build
        (a missing key, say) is not kept, so the next call tries again.
        """
        loop = asyncio.get_running_loop()
        client = self._held.clients.get(loop)
        if client is not None:
            return client
        building = self._building.get(loop)
        if building is None:
            building = self._building[loop] = SETUP.submit(self._factory)
            building.add_done_callback(lambda done: self._built(loop, done))
        # Shielded: one caller giving up (its run timed out) must not fail the others.
        client = await asyncio.shield(building)
        if loop not in self._guards:
            # The guard refers to the clients, never to this owner: an owner the guard kept
            # alive would be collected only as part of a cycle, its sockets with it, unclosed.
            guard = _close_at_shutdown(self._held, client)
            await guard.__anext__()  # started: the loop now finalizes it at shutdown
            self._guards[loop] = guard
        return client

    def _built(self, loop: asyncio.AbstractEventLoop, done: asyncio.Future[C]) -> None:
        self._building.pop(loop, None)
        if not done.cancelled() and done.exception() is None:  # the error is seen: retrieved
            self._held.clients[loop] = done.result()

    async def aclose(self) -> None:
        """Close the running loop's client, if it has one; the next call builds a new one."""
        loop = asyncio.get_running_loop()
        client = self._held.clients.pop(loop, None)
        guard = self._guards.pop(loop, None)
        if guard is not None:
            await guard.aclose()  # nothing left for it to close
        if client is not None:
            await client.close()


async def _close_at_shutdown(held: _Held[C], client: C) -> AsyncGenerator[None, None]:
    """Waits, at its ``yield``, for the loop's ``shutdown_asyncgens()``; then closes ``client``
    unless it was closed or replaced meanwhile."""
    try:
        yield
    finally:
        loop = asyncio.get_running_loop()
        if held.clients.get(loop) is client:
            held.clients.pop(loop, None)  # the collector's thread may have taken it meanwhile
            with contextlib.suppress(Exception):  # a client that fails to close is gone
                await client.close()


def _orphaned(held: _Held[Any]) -> None:
    """Close, each on its own loop, the clients of an owner that was collected.

    Called by the garbage collector, in whatever thread it runs: the closing is handed to
    each loop that still runs. A closed loop's client was closed at its shutdown.
    """
    for loop in list(held.clients):
        client = held.clients.pop(loop, None)
        if client is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(_start_closing, loop, client)


def _start_closing(loop: asyncio.AbstractEventLoop, client: _Closable) -> None:
    task = loop.create_task(_close_quietly(client))
    _CLOSING.add(task)
    task.add_done_callback(_CLOSING.discard)


async def _close_quietly(client: _Closable) -> None:
    with contextlib.suppress(Exception):  # a client that fails to close is gone anyway
        await client.close()


async def close_loop_clients() -> None:
    """Close every provider's client of the running loop (before the loop itself closes)."""
    for owner in list(_ALL):
        with contextlib.suppress(Exception):  # a client that fails to close is gone anyway
            await owner.aclose()
    loop = asyncio.get_running_loop()
    closing = [task for task in _CLOSING if task.get_loop() is loop]
    if closing:
        await asyncio.wait(closing)


def from_env(explicit: str | None, env_var: str) -> str | None:
    """``explicit`` when given, else the environment variable (empty counts as unset)."""
    if explicit is not None:
        return explicit
    return os.environ.get(env_var) or None


def check_retry_options(timeout: float | None, max_retries: int) -> None:
    """Reject a ``timeout`` or ``max_retries`` the clients would misread."""
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise UserError(f"max_retries must be a non-negative integer, got {max_retries!r}")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0
    ):
        raise UserError(f"timeout must be a positive number of seconds or None, got {timeout!r}")


def check_client_options(client_class: Any, options: dict[str, Any]) -> None:
    """Reject options the vendor client does not take, now rather than at the first call."""
    try:
        inspect.signature(client_class).bind_partial(**options)
    except TypeError as exc:
        raise UserError(f"{client_class.__name__} does not take these options: {exc}") from None
