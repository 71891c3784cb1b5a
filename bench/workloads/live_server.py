"""Live workload: what each history policy costs a real model server, turn by turn.

    rows = await run()                      # 40 turns per policy; 8 minutes on 2 busy cores
    print(table(rows))

    python bench/workloads/live_server.py   # the same, from the command line

``async def run(*, turns=40, ranges=((1, 10), (31, 40)), max_tokens=16, n_ctx=4096,
log_dir=None, progress=None) -> list[LiveRow]``

- ``turns``: turns of each conversation (one per policy, each on its own SQLite store).
- ``ranges``: the turn ranges (first, last; inclusive) to report, one row per policy and range.
- ``max_tokens``: the length of each reply (temperature 0).
- ``n_ctx``: the server's context size; the unbounded history must fit it at the last turn.
- ``log_dir``: where the server's log goes (default: a temporary directory, removed after).
- ``progress``: called with a line of text as each policy finishes.

It starts llama-cpp-python's OpenAI-compatible server with SmolLM2-135M-Instruct (installed by
``python3 scripts/live_server.py setup``; it raises ``LiveUnavailable`` from that module,
saying why, when the server is not installed) and drives one conversation per policy through
aniki's ``OpenAIProvider``: no policy, ``TokenBudgetSession(600)`` (stepped: its cut moves to
half the budget when it overflows), ``TokenBudgetSession(600, trim_to=600)`` (slides every
turn), ``WindowedSession(12)``, ``WindowedSession(12, trim_to=12)`` and
``SummarizingSession(600)`` whose summarizer is an agent on the same server. Each row gives,
per turn over its range, the prompt tokens sent, those the server had to evaluate (the rest
came from its KV cache: the prefix the prompt shares with the tokens it evaluated last, read
from the server's verbose log), and the wall time of the turn. Summarizer calls count in the
turn that made them. The server serves one request at a time, so a summary call also
replaces the cached prefix of the conversation: the next turn is evaluated afresh.

:mod:`workloads.live_tools`, the tool-heavy variant, shares :func:`serving` (a warmed-up
server and a counting provider), :func:`warm_up`, :func:`timed_turn` and :func:`summarize`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

LAUNCHER = Path(__file__).resolve().parents[2] / "scripts" / "live_server.py"
INSTRUCTIONS = "You are a terse assistant. Answer every question in one short sentence."


def launcher() -> ModuleType:
    # scripts/ is not a package; tests/live loads the same file under the same name.
    name = "aniki_live_server"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, LAUNCHER)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@dataclass(frozen=True)
class LiveRow:
    """One policy over one range of turns; figures are means per turn."""

    policy: str
    turns: tuple[int, int]
    """The first and last turn (inclusive)."""
    prompt_tokens: float
    """Prompt tokens sent per turn, summarizer calls included."""
    evaluated_tokens: float
    """Of those, the tokens the server computed (the others came from its KV cache)."""
    seconds: float
    """Wall time per turn, as the caller of ``Runner.run`` sees it."""
    requests: int
    """Model calls in the range: one per turn, plus the summarizer's."""

    @property
    def reused_share(self) -> float:
        """The share of the prompt tokens served from the KV cache."""
        if not self.prompt_tokens:
            return 0.0
        return 1 - self.evaluated_tokens / self.prompt_tokens


@dataclass(frozen=True)
class TurnCost:
    """What one turn cost the server, read from its log (see :class:`LiveRow`)."""

    prompt_tokens: int
    evaluated_tokens: int
    seconds: float
    requests: int
    """Requests the server served for the turn."""


class Counting:
    """A provider that counts the calls it passes on (the turn's and the summarizer's)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0

    async def complete(self, request: Any) -> Any:
        self.calls += 1
        return await self.inner.complete(request)

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        self.calls += 1
        async for event in self.inner.stream(request):
            yield event


Wrap = Callable[[Any, Any], Any]
"""(store, summarizer agent) -> the session the conversation's agent uses."""


def policies() -> dict[str, Wrap]:
    """The policies compared, by the name the table shows."""
    from aniki.sessions import SummarizingSession, TokenBudgetSession, WindowedSession

    return {
        "no policy": lambda store, summarizer: store,
        "TokenBudgetSession(600)": lambda store, summarizer: TokenBudgetSession(store, 600),
        "TokenBudgetSession(600, trim_to=600)": lambda store, summarizer: TokenBudgetSession(
            store, 600, trim_to=600
        ),
        "WindowedSession(12)": lambda store, summarizer: WindowedSession(store, 12),
        "WindowedSession(12, trim_to=12)": lambda store, summarizer: WindowedSession(
            store, 12, trim_to=12
        ),
        "SummarizingSession(600)": lambda store, summarizer: SummarizingSession(
            store, summarizer, 600
        ),
    }


async def timed_turn(
    server: Any, provider: Counting, runner: Any, agent: Any, message: str
) -> tuple[TurnCost, Any]:
    """Run one turn of ``agent``'s conversation; what it cost the server, and its result.

    ``provider`` must be the one every model call of the turn goes through (the summarizer's
    included): its count says how many of the server's log records belong to the turn.
    """
    logged, calls = len(server.prompt_evals()), provider.calls
    started = time.perf_counter()
    result = await runner.run(agent, message=message)
    seconds = time.perf_counter() - started
    made = provider.calls - calls
    evals = server.wait_prompt_evals(logged + made)[logged:]
    cost = TurnCost(
        # A prompt found whole in the cache logs no length (rare: an exact repeat).
        prompt_tokens=sum(e.prompt_tokens or 0 for e in evals),
        evaluated_tokens=sum(e.evaluated_tokens for e in evals),
        seconds=seconds,
        requests=made,
    )
    return cost, result


async def _conversation(
    server: Any, provider: Counting, session: Any, turns: int, max_tokens: int
) -> list[TurnCost]:
    from aniki import Agent, Runner

    agent = Agent(
        "Live",
        INSTRUCTIONS,
        model=launcher().MODEL_NAME,
        provider=provider,
        session=session,
        settings={"max_tokens": max_tokens, "temperature": 0},
    )
    runner = Runner()
    costs: list[TurnCost] = []
    for turn in range(1, turns + 1):
        message = f"Turn {turn}: name one fact about the number {turn}."
        cost, _ = await timed_turn(server, provider, runner, agent, message)
        costs.append(cost)
    return costs


def summarize(
    policy: str, costs: Sequence[TurnCost], ranges: Sequence[tuple[int, int]]
) -> list[LiveRow]:
    rows = []
    for first, last in ranges:
        part = costs[first - 1 : last]
        if not part:
            continue
        rows.append(
            LiveRow(
                policy=policy,
                turns=(first, first + len(part) - 1),
                prompt_tokens=sum(c.prompt_tokens for c in part) / len(part),
                evaluated_tokens=sum(c.evaluated_tokens for c in part) / len(part),
                seconds=sum(c.seconds for c in part) / len(part),
                requests=sum(c.requests for c in part),
            )
        )
    return rows


async def warm_up(provider: Any) -> None:
    """One short request of no conversation: made first, so that no policy pays for the
    server's first evaluation; made again, it leaves the KV cache holding nothing of the
    conversation before."""
    from aniki import Agent, Runner

    live = launcher()
    agent = Agent("Warm-up", model=live.MODEL_NAME, provider=provider, settings={"max_tokens": 4})
    await Runner().run(agent, message="Hello.")


@contextlib.asynccontextmanager
async def serving(
    *, n_ctx: int, log_dir: Path | None = None, compat: str = "openai"
) -> AsyncIterator[tuple[Any, Counting, Path]]:
    """A warmed-up server, a counting ``OpenAIProvider`` pointed at it (shaped for ``compat``)
    and a scratch directory for the stores; everything stopped and removed after."""
    from aniki.providers import OpenAIProvider

    live = launcher()
    runtime = live.find_runtime()
    with tempfile.TemporaryDirectory(prefix="aniki-live-bench-") as scratch:
        log = (log_dir or Path(scratch)) / "llama-server.log"
        server = await asyncio.to_thread(live.LlamaServer.launch, log, runtime=runtime, n_ctx=n_ctx)
        try:
            await asyncio.to_thread(server.wait_ready)
            inner = OpenAIProvider(
                base_url=server.base_url, api_key="none", max_retries=0, compat=compat
            )
            try:
                await warm_up(inner)
                yield server, Counting(inner), Path(scratch)
            finally:
                await inner.aclose()
        finally:
            await asyncio.to_thread(server.stop)


async def run(
    *,
    turns: int = 40,
    ranges: Sequence[tuple[int, int]] = ((1, 10), (31, 40)),
    max_tokens: int = 16,
    n_ctx: int = 4096,
    log_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[LiveRow]:
    """Run every policy's conversation against one server; see the module docstring."""
    from aniki import Agent, SQLiteSession

    rows: list[LiveRow] = []
    async with serving(n_ctx=n_ctx, log_dir=log_dir) as (server, provider, scratch):
        summarizer = Agent(
            "Summarizer",
            model=launcher().MODEL_NAME,
            provider=provider,
            settings={"max_tokens": 64, "temperature": 0},
        )
        for name, wrap in policies().items():
            session = wrap(SQLiteSession(name, scratch / "bench.db"), summarizer)
            costs = await _conversation(server, provider, session, turns, max_tokens)
            rows.extend(summarize(name, costs, ranges))
            if progress:
                progress(f"{name}: {sum(c.seconds for c in costs):.1f} s")
    return rows


def table(rows: Sequence[LiveRow]) -> str:
    """The rows as a Markdown table."""
    lines = [
        "| policy | turns | prompt tokens / turn | evaluated / turn | from cache | wall ms / turn "
        "| requests |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row.policy} | {row.turns[0]}-{row.turns[1]} | {row.prompt_tokens:,.0f} "
            f"| {row.evaluated_tokens:,.0f} | {row.reused_share:.0%} | {row.seconds * 1000:,.0f} "
            f"| {row.requests} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--max-tokens", type=int, default=16)
    args = parser.parse_args(argv)
    last = args.turns
    ranges = sorted({(1, min(10, last)), (max(1, last - 9), last)})
    rows = asyncio.run(
        run(
            turns=last,
            ranges=ranges,
            max_tokens=args.max_tokens,
            progress=lambda text: print(text, file=sys.stderr),
        )
    )
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
