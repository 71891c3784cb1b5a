"""OpenTelemetry tracing of runs, following the GenAI semantic conventions.

One call turns it on for every run of the process::

    import aniki.tracing

    aniki.tracing.enable()  # spans go to the global TracerProvider

Each run is then an ``invoke_agent {agent}`` span; beneath it, each model call is a
``chat {model}`` span (the model, the token usage with prompt-cache reads, the finish reason,
and the call's :class:`~aniki.ContextReport` figures as ``aniki.context.*``) and each tool
call an ``execute_tool {tool}`` span. Errors are recorded on the spans they end. Message
contents — prompts, replies, tool arguments and results — are recorded only with
``include_content=True``. See ``docs/tracing.md``.

Needs the ``otel`` extra (``pip install 'aniki-sdk[otel]'``); ``import aniki`` never imports
OpenTelemetry, and a process that does not call :func:`enable` pays one attribute lookup per
run, model call and tool call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._run import observe
from ..errors import UserError

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

__all__ = ["disable", "enable", "enabled"]


def enable(tracer_provider: TracerProvider | None = None, *, include_content: bool = False) -> None:
    """Trace every run from now on (calling it again replaces the settings).

    Example::

        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        aniki.tracing.enable(provider)
        Runner().run_sync(agent, message="Hi")
        [span.name for span in exporter.get_finished_spans()]
        # ['chat gpt-4o-mini', 'invoke_agent Assistant']

    Args:
        tracer_provider: where the spans go; ``None``: OpenTelemetry's global provider
            (``opentelemetry.trace.set_tracer_provider``), even one set later.
        include_content: also record what the messages say: each model call's input and
            output messages, each tool call's arguments and result, a failing tool's error
            message, and the agent's description. Off by default: they may hold personal data.

    Raises:
        UserError: OpenTelemetry is not installed, or ``include_content`` is not a bool.
    """
    if not isinstance(include_content, bool):
        raise UserError(f"include_content must be True or False, got {include_content!r}")
    try:
        from ._otel import GenAIObserver
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("opentelemetry"):
            raise
        raise UserError(
            "tracing needs OpenTelemetry, which is not installed: pip install 'aniki-sdk[otel]'"
        ) from exc
    observe.OBSERVER = GenAIObserver(tracer_provider, include_content=include_content)


def disable() -> None:
    """Stop tracing: no new spans from now on (a run under way ends those it began)."""
    observe.OBSERVER = None


def enabled() -> bool:
    """Whether :func:`enable` is in force."""
    return observe.OBSERVER is not None
