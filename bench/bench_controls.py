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

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WAYS = (
    "none configured",
    "before controls",
    "tool middleware",
    "guardrails",
    "sync guardrails",
    "all",
)
ROUNDS = 5
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


def _baseline_tree(rev: str, into: Path) -> Path:
    """The ``src`` directory of commit ``rev``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "src"],
        capture_output=True,
        check=True,
    ).stdout
    tar_path = into / "baseline.tar"
    tar_path.write_bytes(archive)
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # 3.10.12 and later
    with tarfile.open(tar_path) as tar:
        tar.extractall(into, **safe)  # type: ignore[arg-type]
    tar_path.unlink()
    return into / "src"


def _measure(way: str, runs: int, src: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(src))
    worker_way = "none configured" if way == "before controls" else way
    done = subprocess.run(
        [sys.executable, __file__, "--worker", worker_way, "--runs", str(runs)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{way} failed:\n{done.stderr[-3000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(figures["aniki"]).resolve().is_relative_to(src.resolve()):
        raise SystemExit(f"{way} imported aniki from {figures['aniki']}, not from {src}")
    ms: float = figures["ms"]
    return ms


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--baseline", metavar="REV", help="a commit from before the controls")
    parser.add_argument("--quick", action="store_true", help="300 runs per way and round")
    parser.add_argument("--smoke", action="store_true", help="20 runs per way, 2 rounds")
    parser.add_argument("--worker", choices=WAYS, help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args.worker, args.runs)
        return
    runs = 20 if args.smoke else 300 if args.quick else 2000
    with tempfile.TemporaryDirectory() as scratch:
        trees = dict.fromkeys(WAYS, ROOT / "src")
        if args.baseline:
            trees["before controls"] = _baseline_tree(args.baseline, Path(scratch))
        else:
            del trees["before controls"]
        figures: dict[str, list[float]] = {way: [] for way in trees}
        order = list(trees.items())
        rounds = 2 if args.smoke else ROUNDS
        for _ in range(rounds):  # interleaved, so that a busy spell hits every way
            for way, src in order:
                figures[way].append(_measure(way, runs, src))
            order.reverse()
    best = {way: min(values) for way, values in figures.items()}
    median = {way: statistics.median(values) for way, values in figures.items()}
    print(
        f"One run (2 model calls, 2 concurrent tool calls): ms, a round's median of {runs} "
        f"runs, best and median of {rounds} rounds"
    )
    if args.baseline:
        print(f"before controls: the tree of {args.baseline}")
    print("| way | best round | / none configured | median round |\n|---|---|---|---|")
    for way in figures:
        ratio = best[way] / best["none configured"]
        print(f"| {way} | {best[way]:.3f} | {ratio:.3f}x | {median[way]:.3f} |")


if __name__ == "__main__":
    main()
