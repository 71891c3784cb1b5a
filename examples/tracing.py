"""Tracing a run with OpenTelemetry, printed as a tree of spans (docs/tracing.md).

The spans go to an in-memory exporter here; in production they go to whatever exporter the
application's TracerProvider has (OTLP to a collector, the console, ...).
"""

from __future__ import annotations

import asyncio

from _model import model_and_provider
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import aniki.tracing
from aniki import Agent, ModelRequest, Runner, ToolCall, Usage, tool
from aniki.testing import MockReply


@tool
async def get_weather(city: str) -> str:
    """Look up the current weather.

    Args:
        city: The city to look up.
    """
    await asyncio.sleep(0.01)
    return f"4 degrees and light rain in {city}"


def script(request: ModelRequest) -> MockReply:
    if request.messages[-1].role == "user":  # ask for both cities at once
        calls = (
            ToolCall("call_1", "get_weather", '{"city": "Oslo"}'),
            ToolCall("call_2", "get_weather", '{"city": "Bergen"}'),
        )
        return MockReply(tool_calls=calls, usage=Usage(input_tokens=310, output_tokens=40))
    usage = Usage(input_tokens=420, output_tokens=18, cache_read_tokens=256)
    return MockReply(content="Rainy in both, 4 degrees.", usage=usage)


SHOWN = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.response.finish_reasons",
    "aniki.context.sent_messages",
    "gen_ai.tool.call.id",
)


def print_tree(spans: list[ReadableSpan]) -> None:
    """Each span under its parent, in the order they started, with a few attributes."""
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent, []).append(span)

    def show(span: ReadableSpan, depth: int) -> None:
        attributes = span.attributes or {}
        said = ", ".join(f"{k}={_text(attributes[k])}" for k in SHOWN if k in attributes)
        took = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
        print(f"{'    ' * depth}{span.name} ({took:.1f} ms){': ' + said if said else ''}")
        for child in children.get(span.context.span_id, []):
            show(child, depth + 1)

    for root in children.get(None, []):
        show(root, 0)


def _text(value: object) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


async def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    aniki.tracing.enable(provider)  # without an argument: the global TracerProvider

    model, model_provider = model_and_provider(script)
    agent = Agent(
        "Forecaster",
        "Answer with the weather.",
        model=model,
        provider=model_provider,
        tools=[get_weather],
    )
    result = await Runner().run(agent, message="What's the weather in Oslo and Bergen?")
    print(f"answer: {result.content}\n")
    print_tree(list(exporter.get_finished_spans()))
    aniki.tracing.disable()


if __name__ == "__main__":
    asyncio.run(main())
