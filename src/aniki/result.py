"""``RunResult``: what a run produced."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic

from typing_extensions import TypeVar

from .context import Context
from .messages import Message, ToolCall
from .reports import ContextReport
from .usage import Usage

__all__ = ["RunResult"]

OutputT = TypeVar("OutputT", default=str)


@dataclass(frozen=True, slots=True)
class RunResult(Generic[OutputT]):
    """The outcome of one run; generic in the type of :attr:`output` (``RunResult[Forecast]``
    for an agent whose ``output_schema`` is ``Forecast``, ``RunResult[str]`` without one).

    Example::

        result = await Runner().run(agent, message="Hi")
        result.content          # the final assistant text
        len(result.messages)    # the whole history after the run
    """

    messages: tuple[Message, ...]
    """A snapshot of the session's history at the end of the run; later appends leave it as is."""
    new_messages: tuple[Message, ...]
    """The messages this run added, the user message first."""
    content: str
    """The final assistant text."""
    output: OutputT
    """The validated structured output when the agent has an ``output_schema`` (an instance
    of that type), else ``content``."""
    usage: Usage
    """What the run's model calls cost, summed."""
    run_id: str
    """The run's id (``context.run_id``)."""
    context: Context
    """The run's context."""
    context_reports: tuple[ContextReport, ...] = ()
    """One report per model call, in order: what each request was sent, and why."""
    last_agent: str = ""
    """The name of the agent that spoke last: the one the run started with, or the agent it
    was handed off to."""
    pending_approvals: tuple[ToolCall, ...] = ()
    """The tool calls the run stopped for, awaiting approval (empty when it finished):
    ``content`` is then ``""`` and ``output`` is ``None`` until ``Runner.resume`` goes on."""
