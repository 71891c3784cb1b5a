"""The events a :class:`~aniki.StreamedRun` yields, in the order a run produces them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from .messages import Message, ToolCall

if TYPE_CHECKING:
    from .result import RunResult

__all__ = [
    "AgentUpdated",
    "ReasoningDelta",
    "RunCompleted",
    "ServerLog",
    "StreamEvent",
    "StreamRestarted",
    "TextDelta",
    "ToolCallCompleted",
    "ToolCallStarted",
    "ToolProgress",
]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the assistant's reply text, as the model produces it."""

    text: str
    """The new text; concatenating a turn's deltas gives its reply."""


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of the model's thinking, as it streams (before the reply text it leads to).

    The whole of it is on the assistant message once the turn completes
    (:attr:`Message.reasoning <aniki.Message.reasoning>`), stored with it; deltas of a turn
    that is retried (:class:`StreamRestarted`) are void, like its text.
    """

    text: str
    """The new thinking text."""


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """The model asked for a tool call, which is about to run."""

    tool_call: ToolCall
    """The call, with its raw arguments."""


@dataclass(frozen=True, slots=True)
class ToolCallCompleted:
    """A tool call finished (or failed: the message then says what went wrong)."""

    tool_call: ToolCall
    """The call that finished."""
    message: Message
    """The ``tool`` message that answers it."""


@dataclass(frozen=True, slots=True)
class ToolProgress:
    """A running tool call reported how far it is (an MCP server's progress notification)."""

    tool_call: ToolCall
    """The call that is running."""
    progress: float
    """How much is done; it grows with each report."""
    total: float | None
    """How much there is to do, when the tool knows."""
    message: str | None
    """What the tool says it is doing, if anything."""


@dataclass(frozen=True, slots=True)
class ServerLog:
    """A log message an MCP server sent while one of its tools ran for this run (it is also
    logged on the ``aniki.mcp`` logger)."""

    server: str
    """The server's name."""
    level: Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
    """Its severity, as MCP names it (syslog's levels)."""
    message: str
    """The message: its text, or its data as JSON."""
    logger: str | None
    """The part of the server that logged it, when the server says."""


@dataclass(frozen=True, slots=True)
class AgentUpdated:
    """From here on, ``agent`` speaks: the events that follow are its own.

    A run starts with the agent it was given, and says nothing about that. This is sent when
    a handoff passes the conversation to another agent, when an agent called as a tool
    starts (its events follow, up to the next ``AgentUpdated``), and when the caller speaks
    again after it.
    """

    agent: str
    """The name of the agent that now speaks."""
    reason: Literal["handoff", "tool", "return"]
    """Why: a handoff, an agent called as a tool, or back from one."""


@dataclass(frozen=True, slots=True)
class StreamRestarted:
    """The model's stream broke and is being retried: this turn's text so far is void."""

    reason: str
    """Why the stream broke."""


@dataclass(frozen=True, slots=True)
class RunCompleted:
    """The run finished and its messages are stored; always the last event."""

    result: RunResult[Any]
    """The run's result."""


StreamEvent: TypeAlias = (
    "TextDelta | ReasoningDelta | ToolCallStarted | ToolCallCompleted | ToolProgress"
    " | ServerLog | StreamRestarted | AgentUpdated | RunCompleted"
)
"""Any event a :class:`~aniki.StreamedRun` yields."""
