"""Owning a vendor client: one per event loop, built on first use.

A vendor client pools HTTP connections, and a pooled connection belongs to the event loop
that opened it. ``Runner.run_sync`` (or a test suite) may run each call in a fresh loop,
so a provider keeps one client per loop instead of sharing one across loops.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

from ..errors import UserError

__all__ = [
    "PerLoopClient",
    "check_client_options",
    "check_retry_options",
    "display_url",
    "from_env",
]


class _Closable(Protocol):
    def close(self) -> Awaitable[None]: ...


C = TypeVar("C", bound=_Closable)


class PerLoopClient(Generic[C]):
    """Builds a client with ``factory`` the first time each event loop asks for one."""

    def __init__(self, factory: Callable[[], C]) -> None:
        self._factory = factory
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, C] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> C:
        """The running loop's client (built now if it has none)."""
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = self._factory()
        return client

    async def aclose(self) -> None:
        """Close the running loop's client, if it has one; the next call builds a new one."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()


def from_env(explicit: str | None, env_var: str) -> str | None:
    """``explicit`` when given, else the environment variable (empty counts as unset)."""
    if explicit is not None:
        return explicit
    return os.environ.get(env_var) or None


def display_url(url: str) -> str:
    """``url`` without any user:password part, safe for messages and reprs."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


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
