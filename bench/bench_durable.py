"""Benchmark the run journal (docs/durable.md): what a durable run costs, and how fast cut
runs are finished.

1. Per turn, journal on vs off, on SQLite (synchronous=NORMAL, the default) and PostgreSQL:
   a tool turn (the model asks for one tool, then answers: the journal records the response
   and claim, the result, and the run's end) and a text turn (the journal writes nothing).
   "Off" is the same run with the journal switched off inside aniki. Target: on/off <= 1.15.
2. Recovery: N runs on N sessions each cut inside a tool (their process killed with SIGKILL
   while every run held its claim); the time until ``Runner.recover`` has finished them all.

Run: ``python bench/bench_durable.py`` (``--quick``, ``--smoke``: fewer turns). Prints a
Markdown table; figures are medians of interleaved rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aniki import Agent, Runner, tool
from aniki._run import once
from aniki.sessions import PostgresSession, SQLiteSession
from aniki.testing import MockProvider

POSTGRES = os.environ.get("ANIKI_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: shipped"


@contextmanager
def _journal(on: bool) -> Iterator[None]:
    """The run journal on or off for the runs inside."""
    real = once.journal_of
    if not on:
        once.journal_of = lambda session, run_id: None  # type: ignore[assignment]
    try:
        yield
    finally:
        once.journal_of = real  # type: ignore[assignment]


def _turns(make: Callable[[], Any], tools: bool, turns: int, on: bool) -> float:
    """The median milliseconds of one run (one user message to its answer)."""
    agent = _tool_agent() if tools else _text_agent()
    session = make()
    runner = Runner()

    async def main() -> list[float]:
        times = []
        for number in range(turns):
            start = time.perf_counter()
            await runner.run(agent, message=f"turn {number}", session=session)
            times.append(time.perf_counter() - start)
        return times

    with _journal(on):
        times = asyncio.run(main())
    return statistics.median(times[len(times) // 5 :]) * 1000


def _tool_agent() -> Agent:
    provider = _ToolThenText()
    return Agent("Bench", "Answer briefly.", model="bench", provider=provider, tools=[lookup])


def _text_agent() -> Agent:
    provider = MockProvider(handler=lambda request: "Done.")
    return Agent("Bench", "Answer briefly.", model="bench", provider=provider, tools=[lookup])


class _ToolThenText(MockProvider):
    """Asks for ``lookup`` after each user message, then answers."""

    async def complete(self, request: Any) -> Any:
        if request.messages[-1].role == "user":
            self.enqueue_response(tool_calls=[{"name": "lookup", "arguments": {"order": "42"}}])
        else:
            self.enqueue_response(content="Done.")
        return await super().complete(request)


_CHILD = r"""
import asyncio, sys
from aniki import Agent, Runner, tool
from aniki.sessions import SQLiteSession
from aniki.testing import MockProvider

path, count, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3]
started = 0

@tool
async def ship(order: str) -> str:
    '''Ship an order.'''
    global started
    started += 1
    if started == count:
        open(ready, "w").close()
    await asyncio.Event().wait()  # held here until the process is killed
    return "shipped"

async def main():
    runs = []
    for n in range(count):
        provider = MockProvider()
        provider.enqueue_response(tool_calls=[{"name": "ship", "arguments": {"order": str(n)}}])
        agent = Agent("Shop", model="bench", provider=provider, tools=[ship])
        runs.append(Runner().run(agent, message="ship", session=SQLiteSession(f"s{n}", path)))
    await asyncio.gather(*runs)

asyncio.run(main())
"""


def _recovery(count: int) -> tuple[float, int]:
    """Seconds for ``Runner.recover`` to finish ``count`` runs cut by a kill, and how many."""
    folder = Path(tempfile.mkdtemp())
    path, ready = folder / "cut.db", folder / "ready"
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(path), str(count), str(ready)])
    deadline = time.monotonic() + 120
    while not ready.exists():
        if time.monotonic() > deadline or child.poll() is not None:
            child.kill()
            raise RuntimeError("the runs to cut did not start")
        time.sleep(0.02)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    agent = Agent("Shop", model="bench", provider=MockProvider(handler=lambda r: "Shipped."))

    async def main() -> int:
        runner = Runner()
        done = await asyncio.gather(
            *(runner.recover(agent, session=SQLiteSession(f"s{n}", path)) for n in range(count))
        )
        return sum(len(results) for results in done)

    start = time.perf_counter()
    finished = asyncio.run(main())
    return time.perf_counter() - start, finished


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    turns, rounds, cut = (10, 1, 5) if args.smoke else (60, 3, 30) if args.quick else (200, 5, 100)
    folder = Path(tempfile.mkdtemp())
    stores: dict[str, Callable[[], Any]] = {
        "sqlite": lambda: SQLiteSession(uuid.uuid4().hex, folder / "bench.db"),
        "postgres": lambda: PostgresSession(uuid.uuid4().hex, POSTGRES),
    }
    print("| store | turn | journal off (ms) | journal on (ms) | on/off | target |")
    print("|---|---|---|---|---|---|")
    for name, make in stores.items():
        for kind, tools in (("tool turn", True), ("text turn", False)):
            off: list[float] = []
            on: list[float] = []
            for _ in range(rounds):  # interleaved, so a busy spell hits both
                off.append(_turns(make, tools, turns, on=False))
                on.append(_turns(make, tools, turns, on=True))
            a, b = statistics.median(off), statistics.median(on)
            print(f"| {name} | {kind} | {a:.3f} | {b:.3f} | {b / a:.2f} | <= 1.15 |")
    seconds, finished = _recovery(cut)
    print()
    print("| recovery | cut runs | finished | seconds |")
    print("|---|---|---|---|")
    print(f"| sqlite, one recover per session, all at once | {cut} | {finished} | {seconds:.2f} |")
    return 0 if finished == cut else 1


if __name__ == "__main__":
    sys.exit(main())
