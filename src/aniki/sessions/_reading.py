"""The run a session is read for, as a history policy may use it: a
:class:`~aniki.sessions.SummarizingSession` without a summarizer of its own asks the run's own
model for its summary, in the run's own terms (its instructions, its tools, the history the
last request sent), so that the request is the previous one plus a question and a provider's
prompt cache serves nearly all of it; and any summarizer's calls are charged to the run.

The run engine sets it around each read of the session (:func:`reading`); it is a context
variable, so it reaches that read and the tasks it starts, and nothing else.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass

from ..messages import Message
from ..providers.base import ModelRequest, ModelResponse, ModelSettings, Provider, ToolDefinition
from ..usage import Usage

__all__ = ["Head", "ReadingRun", "current", "reading"]

Head = tuple[tuple[Message, ...], tuple[ToolDefinition, ...]]
"""What every request of a run starts with: its instructions (a system message, or nothing)
and the definitions of its tools."""


@dataclass(frozen=True, slots=True)
class ReadingRun:
    """The run a session read is part of."""

    model: str
    """The model the run's agent calls."""
    provider: Provider
    """Its provider."""
    settings: ModelSettings
    """The run's model settings."""
    head: Callable[[], Awaitable[Head]]
    """The instructions and tool definitions the run's next request will start with."""
    charge: Callable[[Usage], None]
    """Adds what a model call made for the read cost to the run's usage."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One call to the run's provider, its usage charged to the run."""
        response = await self.provider.complete(request)
        self.charge(response.usage if response.usage is not None else Usage(requests=1))
        return response


_CURRENT: ContextVar[ReadingRun | None] = ContextVar("aniki_reading_run", default=None)


def current() -> ReadingRun | None:
    """The run whose read of a session is under way in this context, if any."""
    return _CURRENT.get()


class reading:  # lower case: used as a function, `with reading(run):`
    """Make ``run`` the one the reads inside the block are for.

    A class rather than a generator: it wraps every write and read of a run, and costs half
    as much this way."""

    __slots__ = ("_run", "_token")

    def __init__(self, run: ReadingRun) -> None:
        self._run = run

    def __enter__(self) -> None:
        self._token = _CURRENT.set(self._run)

    def __exit__(self, *exc: object) -> None:
        _CURRENT.reset(self._token)
