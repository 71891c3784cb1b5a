"""The run a tool call is part of, for a tool that acts for that run while the call lasts:
an MCP server that asks the run's model (sampling), or sends progress and log messages that
belong in the run's stream.

The run engine sets it around each tool call (:func:`enter` / :func:`leave`); it is a
context variable, so it reaches the call's own task and the tasks it starts (and the work it
hands to another event loop with ``asyncio.run_coroutine_threadsafe``), and nothing else.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextvars import ContextVar, Token
from dataclasses import dataclass

from ..errors import UserError
from ..events import StreamEvent
from ..messages import ToolCall
from ..providers.base import ModelRequest, ModelResponse, ModelSettings, Provider
from ..usage import Usage
from .plan import RunPlan

__all__ = ["CallingRun", "current", "enter", "leave"]


@dataclass(frozen=True, slots=True)
class CallingRun:
    """The run a tool call is part of, as the tool may use it."""

    call: ToolCall
    """The tool call being run."""
    run_id: str
    """The run's id (calls of one run share it)."""
    agent: str
    """The name of the agent whose model asked for the call."""
    model: str
    """That agent's model."""
    provider: Provider | None
    """That agent's provider (``None`` only before the run has built it)."""
    settings: ModelSettings
    """The run's model settings."""
    loop: asyncio.AbstractEventLoop
    """The loop the run works on (its provider's clients belong to it)."""
    emit: Callable[[StreamEvent], None] | None
    """Where the run's stream events go (``None``: the run is not streamed)."""
    charge: Callable[[Usage], None]
    """Adds what a model call made for the tool cost to the run's usage."""

    def send(self, event: StreamEvent) -> None:
        """Put ``event`` in the run's stream (from any thread); nothing when not streamed."""
        emit = self.emit
        if emit is None or self.loop.is_closed():
            return
        try:
            here = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            here = False
        if here:
            emit(event)
        else:
            self.loop.call_soon_threadsafe(emit, event)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One call to the run's provider, on the run's loop, its usage charged to the run."""
        provider = self.provider
        if provider is None:
            raise UserError(f"the run of agent {self.agent!r} has no provider yet")
        if asyncio.get_running_loop() is self.loop:
            response = await provider.complete(request)
        else:
            future = asyncio.run_coroutine_threadsafe(provider.complete(request), self.loop)
            response = await asyncio.wrap_future(future)
        usage = response.usage if response.usage is not None else Usage(requests=1)
        if asyncio.get_running_loop() is self.loop:
            self.charge(usage)
        else:
            self.loop.call_soon_threadsafe(self.charge, usage)
        return response


_CURRENT: ContextVar[CallingRun | None] = ContextVar("aniki_calling_run", default=None)


def current() -> CallingRun | None:
    """The run whose tool call is being run in this context, if any."""
    return _CURRENT.get()


def enter(plan: RunPlan, call: ToolCall) -> Token[CallingRun | None]:
    """Make ``plan``'s run the one ``call`` is part of, until :func:`leave`."""

    def charge(usage: Usage) -> None:
        plan.sub_usage += usage

    return _CURRENT.set(
        CallingRun(
            call=call,
            run_id=plan.context.run_id,
            agent=plan.agent.name,
            model=plan.agent.model,
            provider=plan.provider,
            settings=plan.settings,
            loop=asyncio.get_running_loop(),
            emit=plan.emit,
            charge=charge,
        )
    )


def leave(token: Token[CallingRun | None]) -> None:
    """Undo the :func:`enter` that returned ``token``."""
    _CURRENT.reset(token)
