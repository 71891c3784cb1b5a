"""Where a run's side effects happen, so a durable executor can make each one a step.

A run does three kinds of thing that must not be repeated when a crashed run is replayed:
it calls the model, it calls tools, and it writes to the session. The run engine does each
through this module. With no :class:`Steps` in force (every plain run) they happen at once;
a durable executor (:mod:`aniki.durable` on DBOS) puts its own in force with :func:`using`
around the run, and records each one as a step, so a replay after a crash gets the recorded
outcome back instead of doing it again. Reads of the session are not steps: they have no
effect, and a replayed run reads whatever the store holds then.

While a :class:`Steps` is in force, aniki's own run journal (:mod:`aniki._run.journal`) is
off: the executor is the journal.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

from ..messages import Message, ToolCall
from ..providers.base import ModelRequest, ModelResponse

__all__ = ["Steps", "current", "model_call", "store_write", "tool_call", "using"]


class Steps(Protocol):
    """How a durable executor runs each side effect of a run (each method must return
    what ``work`` returned, recorded or fresh)."""

    async def model_call(
        self, request: ModelRequest, work: Callable[[], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        """One model call (middleware included)."""
        ...

    async def tool_call(self, call: ToolCall, work: Callable[[], Awaitable[Message]]) -> Message:
        """One tool call; ``work`` never raises (a failing tool answers with an error text)."""
        ...

    async def store_write(
        self, messages: Sequence[Message], work: Callable[[], Awaitable[None]]
    ) -> None:
        """One append of ``messages`` to the run's session."""
        ...


_STEPS: ContextVar[Steps | None] = ContextVar("aniki_steps", default=None)


@contextmanager
def using(steps: Steps) -> Iterator[None]:
    """Make ``steps`` run the side effects of the runs started inside the block."""
    token = _STEPS.set(steps)
    try:
        yield
    finally:
        _STEPS.reset(token)


def current() -> Steps | None:
    """The :class:`Steps` in force, if any."""
    return _STEPS.get()


async def model_call(
    request: ModelRequest, work: Callable[[], Awaitable[ModelResponse]]
) -> ModelResponse:
    """``work()``, as a step when a :class:`Steps` is in force."""
    steps = _STEPS.get()
    return await (work() if steps is None else steps.model_call(request, work))


async def tool_call(call: ToolCall, work: Callable[[], Awaitable[Message]]) -> Message:
    """``work()``, as a step when a :class:`Steps` is in force."""
    steps = _STEPS.get()
    return await (work() if steps is None else steps.tool_call(call, work))


async def store_write(messages: Sequence[Message], work: Callable[[], Awaitable[None]]) -> None:
    """``work()``, as a step when a :class:`Steps` is in force."""
    steps = _STEPS.get()
    await (work() if steps is None else steps.store_write(messages, work))
