"""Benchmark what tracing costs a run: off (the default), without the hooks at all, and on.

One run is a user message, a reply asking for two tools at once, the two tool calls and the
final reply (``MockProvider``, a fresh ``InMemorySession`` per run): five spans when traced.
Each way runs in a process of its own, the ways interleaved over 5 rounds (their order
turned each round); a round's figure is the median time of one run, and the table shows the
best round and the median round of each way (the best is the steadier on a shared machine,
where other work slows some rounds down):

- ``tracing off``: this tree, tracing never enabled (what every user pays);
- ``hooks absent``: the tree of ``--baseline REV``, a commit from before the hooks, taken
  out with ``git archive`` (only with ``--baseline``);
- ``tracing on``: ``aniki.tracing.enable(provider)``, an in-memory exporter behind a
  ``SimpleSpanProcessor``;
- ``tracing on, with content``: the same with ``include_content=True``.

The hooks' price when off is too small for whole runs to show above the noise, so it is also
priced directly: one check of the module attribute, timed with ``timeit``, times the five
checks a run makes (the run, two model calls, two tool calls).

Run: ``python bench/bench_tracing.py --baseline REV`` (``--quick``, ``--smoke``: fewer runs).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import timeit
from pathlib import Path

from _ways import compared, heading, measure, options, table

WAYS = ("tracing off", "hooks absent", "tracing on", "tracing on, with content")
CHECKS_PER_RUN = 5
TURN = ["user", "assistant", "tool", "tool", "assistant"]


def _worker(way: str, runs: int) -> None:
    """Time ``runs`` runs the way ``way`` says, in this process; print the median as JSON."""
    import aniki
    from aniki import Agent, InMemorySession, Runner, ToolCall, tool
    from aniki.testing import MockProvider, MockReply

    exporter = None
    if way.startswith("tracing on"):
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        import aniki.tracing

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        aniki.tracing.enable(provider, include_content=way.endswith("with content"))

    @tool
    async def weather(city: str) -> str:
        """Look up the weather."""
        return f"18 degrees in {city}"

    def model(request: object) -> MockReply:
        last = request.messages[-1]  # type: ignore[attr-defined]
        if last.role == "user":
            calls = (
                ToolCall("c1", "weather", '{"city": "Oslo"}'),
                ToolCall("c2", "weather", '{"city": "Bergen"}'),
            )
            return MockReply(tool_calls=calls)
        return MockReply(content="Sunny in both.")

    agent = Agent(
        "Bench",
        "Answer briefly.",
        model="bench",
        provider=MockProvider(handler=model),
        tools=[weather],
    )
    runner = Runner()

    async def measure() -> list[float]:
        times = []
        for number in range(runs):
            start = time.perf_counter()
            result = await runner.run(agent, message=f"run {number}", session=InMemorySession())
            times.append(time.perf_counter() - start)
            assert [m.role for m in result.new_messages] == TURN, result.new_messages
            if exporter is not None and number % 100 == 99:
                exporter.clear()  # keep the process's memory flat
        return times

    times = asyncio.run(measure())
    if exporter is not None:
        spans = len(exporter.get_finished_spans())
        assert spans == 5 * (runs % 100), f"{spans} spans"  # five per run since the clear
    median_ms = statistics.median(times[len(times) // 5 :]) * 1000  # the first fifth warms up
    print(json.dumps({"ms": median_ms, "aniki": aniki.__file__}))


def _check_ns() -> float:
    """Nanoseconds one disabled hook takes: the module attribute checked against ``None``."""
    from aniki._run import observe

    number = 2_000_000
    best = min(
        timeit.repeat(
            "observe.OBSERVER is None", globals={"observe": observe}, number=number, repeat=5
        )
    )
    return best / number * 1e9


def _measure(way: str, runs: int, src: Path) -> float:
    return measure(__file__, way, runs, src)


def main() -> None:
    args = options(__doc__, WAYS, "a commit from before the hooks")
    if args.worker:
        _worker(args.worker, args.runs)
        return
    figures, runs, rounds = compared(args, WAYS, "hooks absent", _measure)
    what = "One run (2 model calls, 2 concurrent tool calls)"
    print(heading(what, runs, rounds, "hooks absent", args.baseline))
    print(table(figures, "tracing off"))
    best = min(figures["tracing off"])
    check = _check_ns()
    share = check * CHECKS_PER_RUN / (best * 1e6)
    print(
        f"\nOne disabled hook: {check:.1f} ns; {CHECKS_PER_RUN} per run: "
        f"{check * CHECKS_PER_RUN / 1000:.2f} us, {share:.3%} of a run"
    )


if __name__ == "__main__":
    main()
