"""Benchmark what tool middleware and guardrails cost a run, and what they cost when absent.

One run is a user message, a reply asking for two tools at once, the two tool calls and the
final reply (``MockProvider``, a fresh ``InMemorySession`` per run). Each way runs in a
process of its own, the ways interleaved over 5 rounds (their order turned each round); a
round's figure is the median time of one run, and the table shows the best round and the
median round of each way:

- ``none configured``: this tree, no tool middleware and no guardrail (what every user pays);
- ``before controls``: the tree of ``--baseline REV``, a commit from before tool middleware
  and guardrails, taken out with ``git archive`` (only with ``--baseline``);
- ``tool middleware``: one pass-through tool middleware on the runner and one on the agent;
- ``guardrails``: one input and one output guardrail, both async, both passing;
- ``sync guardrails``: the same as plain functions (each runs in a worker thread);
- ``all``: the two tool middleware and the two async guardrails together.

Target: ``none configured`` within the noise of ``before controls``.

Run: ``python bench/bench_controls.py --baseline REV`` (``--quick``, ``--smoke``: fewer runs).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

from _ways import compared, heading, measure, options, table

WAYS = (
    "none configured",
    "before controls",
    "tool middleware",
    "guardrails",
    "sync guardrails",
    "all",
)
TURN = ["user", "assistant", "tool", "tool", "assistant"]


def _options(way: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``Agent`` and ``Runner`` keyword arguments of ``way``."""

    async def passing(ctx: Any, call: Any, call_next: Any) -> Any:
        return await call_next(call)

    async def fine(ctx: Any, checked: Any) -> None:
        return None

    def fine_sync(ctx: Any, checked: Any) -> None:
        return None

    agent: dict[str, Any] = {}
    runner: dict[str, Any] = {}
    if way in ("tool middleware", "all"):
        agent["tool_middleware"] = [passing]
        runner["tool_middleware"] = [passing]
    if way in ("guardrails", "all"):
        agent["input_guardrails"] = [fine]
        agent["output_guardrails"] = [fine]
    if way == "sync guardrails":
        agent["input_guardrails"] = [fine_sync]
        agent["output_guardrails"] = [fine_sync]
    return agent, runner


def _worker(way: str, runs: int) -> None:
    """Time ``runs`` runs the way ``way`` says, in this process; print the median as JSON."""
    import aniki
    from aniki import Agent, InMemorySession, Runner, ToolCall, tool
    from aniki.testing import MockProvider, MockReply

    @tool
    async def weather(city: str) -> str:
        """Look up the weather."""
        return f"18 degrees in {city}"

    def model(request: Any) -> MockReply:
        if request.messages[-1].role == "user":
            calls = (
                ToolCall("c1", "weather", '{"city": "Oslo"}'),
                ToolCall("c2", "weather", '{"city": "Bergen"}'),
            )
            return MockReply(tool_calls=calls)
        return MockReply(content="Sunny in both.")

    agent_options, runner_options = _options(way)
    agent = Agent(
        "Bench",
        "Answer briefly.",
        model="bench",
        provider=MockProvider(handler=model),
        tools=[weather],
        **agent_options,
    )
    runner = Runner(**runner_options)

    async def measure() -> list[float]:
        times = []
        for number in range(runs):
            start = time.perf_counter()
            result = await runner.run(agent, message=f"run {number}", session=InMemorySession())
            times.append(time.perf_counter() - start)
            assert [m.role for m in result.new_messages] == TURN, result.new_messages
        return times

    times = asyncio.run(measure())
    median_ms = statistics.median(times[len(times) // 5 :]) * 1000  # the first fifth warms up
    print(json.dumps({"ms": median_ms, "aniki": aniki.__file__}))


def _measure(way: str, runs: int, src: Path) -> float:
    worker_way = "none configured" if way == "before controls" else way
    return measure(__file__, worker_way, runs, src, label=way)


def main() -> None:
    args = options(__doc__, WAYS, "a commit from before the controls")
    if args.worker:
        _worker(args.worker, args.runs)
        return
    figures, runs, rounds = compared(args, WAYS, "before controls", _measure)
    what = "One run (2 model calls, 2 concurrent tool calls)"
    print(heading(what, runs, rounds, "before controls", args.baseline))
    print(table(figures, "none configured"))


if __name__ == "__main__":
    main()
