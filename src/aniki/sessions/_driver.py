"""Operations written once as generators, run from sync or async code (pure, no I/O).

An operation is a *flow*: a generator that yields requests (a script to run, a statement,
"the last N messages", a call on a wrapped store), is sent each one's reply, and returns its
result. The flow holds the logic; whoever runs it holds the I/O and answers each request:

- :func:`drive`, from sync code: ``answer(request)`` returns the reply;
- :func:`adrive`, from async code: ``answer(request)`` returns the reply or an awaitable
  of it, which is awaited;
- :func:`drive_either`, for a wrapper of a store that may be sync or async (a history
  policy, an encrypted session): answers synchronously while the replies are plain, and at
  the first awaitable reply returns a coroutine that finishes the flow.

An exception ``answer`` raises reaches the caller; it is not thrown into the flow, which holds
nothing to release. Each step costs a ``send`` and a call of ``answer``, and the loops
allocate nothing per step: a store's hot path pays for its own requests only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from inspect import isawaitable
from types import CoroutineType
from typing import Any, TypeVar, cast

__all__ = ["Flow", "adrive", "awaitable", "drive", "drive_either"]

Q = TypeVar("Q")
T = TypeVar("T")

Flow = Generator[Q, Any, T]
"""An operation: yields requests of type ``Q``, is sent each one's reply, returns a ``T``."""

_PLAIN = frozenset({type(None), bool, int, str, bytes, tuple, list, dict})
"""Types of reply that are never awaitable. ``isawaitable()`` tells the others apart, through
an ABC check that costs more than a whole step of a sync store's flow."""


def awaitable(value: object) -> bool:
    """``inspect.isawaitable(value)``, answered at once for a coroutine and for the plain
    values a store's call returns (a history is a tuple or a list, a write returns None)."""
    kind = type(value)
    return kind is CoroutineType or (kind not in _PLAIN and isawaitable(value))


def drive(flow: Flow[Q, T], answer: Callable[[Q], Any], reply: Any = None) -> T:
    """Run ``flow`` to its result, answering each request with ``answer(request)``.

    ``reply`` is sent first: ``None`` starts a flow not started yet; after a request taken
    from the flow by hand (to look at it before choosing how to run the rest), its reply.
    ``answer`` must not raise ``StopIteration`` (it would read as the flow's end).
    """
    send = flow.send
    try:
        request = send(reply)
        while True:
            request = send(answer(request))
    except StopIteration as done:
        return cast(T, done.value)


async def adrive(flow: Flow[Q, T], answer: Callable[[Q], Any], reply: Any = None) -> T:
    """:func:`drive`, awaiting each reply that is awaitable (``reply`` too)."""
    while True:
        if awaitable(reply):
            reply = await reply
        try:
            request = flow.send(reply)
        except StopIteration as done:
            return cast(T, done.value)
        reply = answer(request)


def drive_either(flow: Flow[Q, T], answer: Callable[[Q], Any]) -> T | Awaitable[T]:
    """Run ``flow`` as :func:`drive` while the replies are plain; from the first awaitable
    one on, as :func:`adrive`: then the result is a coroutine giving the flow's result."""
    reply: Any = None
    while True:
        try:
            request = flow.send(reply)
        except StopIteration as done:
            return cast(T, done.value)
        reply = answer(request)
        if awaitable(reply):
            return adrive(flow, answer, reply)
