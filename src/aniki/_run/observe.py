"""Where an observer (such as :mod:`aniki.tracing`) sees a run: the whole run, each model
call, each tool call and each guardrail's check.

The run code checks :data:`OBSERVER` at each of those points and goes on as before when it
is ``None``, the default: a process that never turns tracing on pays one module attribute
lookup per run, model call and tool call, and imports no tracing package. An observer wraps
the work it is handed, so it sees the start, the end and any error of each, and can make
itself the context the work runs in (a span is the parent of what happens inside it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..context import Context
    from ..messages import Message, ToolCall
    from ..providers.base import ModelRequest, ModelResponse
    from ..result import RunResult
    from ..tools import Tool
    from .plan import Outcome, RunPlan

__all__ = [
    "OBSERVER",
    "UNOBSERVED",
    "Observer",
    "RunObservation",
    "first_chunk",
    "observe_stream",
]

CallModel = Callable[["ModelRequest"], Awaitable["ModelResponse"]]


class RunObservation(Protocol):
    """A streamed run as an observer follows it: its events are consumed, and the run ends,
    away from where it began (see :class:`~aniki._run.streaming.StreamedRun`)."""

    def entered(self) -> AbstractContextManager[object]:
        """The run as the current context while its tasks are made (they run inside it)."""
        ...

    def finished(self, result: RunResult[Any]) -> None:
        """The run completed with ``result``."""
        ...

    def failed(self, error: BaseException) -> None:
        """The run, or storing what it produced, raised ``error``."""
        ...

    def aborted(self) -> None:
        """The consumer stopped the run (a no-op once it finished or failed)."""
        ...


class Observer(Protocol):
    """What sees runs, model calls and tool calls (set as :data:`OBSERVER`)."""

    def run(self, plan: RunPlan, work: Awaitable[RunResult[Any]]) -> Awaitable[RunResult[Any]]:
        """Await ``work``, the whole of one ``Runner.run`` or ``Runner.resume``."""
        ...

    def stream(self, plan: RunPlan) -> RunObservation:
        """Begin following one ``Runner.stream``."""
        ...

    def model_call(
        self, plan: RunPlan, outcome: Outcome, request: ModelRequest, call_model: CallModel
    ) -> Awaitable[ModelResponse]:
        """Await ``call_model(request)``: one turn's model call, its middleware included.
        The turn's context report is ``outcome.reports.reports[-1]``."""
        ...

    def tool_call(self, tool: Tool, call: ToolCall, context: Context) -> Awaitable[Message]:
        """Await the equivalent of ``tool.invoke(call, context)``."""
        ...

    def first_chunk(self) -> None:
        """The streamed model call under way (the ``model_call`` this runs inside) received
        its first text or reasoning; a stream retried after a break begins again."""
        ...

    def guardrail(
        self, plan: RunPlan, name: str, stage: str, decide: Callable[[], Awaitable[str | None]]
    ) -> Awaitable[str | None]:
        """Await ``decide()``: one guardrail's check (``stage``: ``"input"`` or
        ``"output"``), which gives the reason it tripped, or ``None``."""
        ...


OBSERVER: Observer | None = None
"""The observer every run reports to; ``None``: no one is watching."""


class _Unobserved:
    """The :class:`RunObservation` of a stream that no observer follows."""

    def entered(self) -> AbstractContextManager[object]:
        return nullcontext()

    def finished(self, result: RunResult[Any]) -> None:
        pass

    def failed(self, error: BaseException) -> None:
        pass

    def aborted(self) -> None:
        pass


UNOBSERVED: RunObservation = _Unobserved()


def first_chunk() -> None:
    """Tell :data:`OBSERVER`, if any, that a stream delivered its first text or reasoning."""
    if OBSERVER is not None:
        OBSERVER.first_chunk()


def observe_stream(plan: RunPlan) -> RunObservation:
    """How the stream of ``plan`` is followed: by :data:`OBSERVER`, or not at all."""
    return UNOBSERVED if OBSERVER is None else OBSERVER.stream(plan)
