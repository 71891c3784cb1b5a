"""Benchmark the history policies over a long conversation (a script, not a test).

A scripted conversation of 500 turns runs through the Runner with a scripted model: each turn
is a user message and a reply, and every fifth turn the model first calls two tools in
parallel (each answering with a paragraph). The same conversation runs with no policy and
behind each policy. Measured:

1. Tokens sent per turn: the history in the turn's first model request (after the
   instructions), counted exactly for gpt-4o-mini when the ``tokens`` extra is installed
   (else with the estimate), at turns 10, 100 and 500; and the total over every request of
   the run, the summarizer's included.
2. Time in the policy per turn: the time the Runner spends in the session's
   ``get_messages()`` during a turn (the policy's selection plus the store's read), median
   over the first 50 turns, turns 51 to 100 and the last 50. The history only reaches the
   policies' limits after about 30 turns, so the window they weigh is smaller in the first 50.

Run: ``python bench/bench_policies.py`` (``--turns N``, ``--store sqlite`` for a SQLite file).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from aniki import Agent, Message, MessageLike, Runner, tool
from aniki.providers.base import ModelRequest, ModelResponse
from aniki.sessions import InMemorySession
from aniki.sessions.policies import SummarizingSession, TokenBudgetSession, WindowedSession
from aniki.sessions.sqlite import SQLiteSession
from aniki.testing import MockProvider
from aniki.tokens import counter_for_model

MODEL = "gpt-4o-mini"
WINDOW = 40
BUDGET = 4_000
CHECKPOINTS = (10, 100, 500)
PARAGRAPH = (
    "The figures for the quarter came in above the plan, mostly thanks to the northern "
    "region, where two new distributors started early. Costs rose with them, so the margin "
    "barely moved. "
)


@tool
def lookup(topic: str) -> str:
    """Look a topic up in the company notes.

    Args:
        topic: what to look up.
    """
    return f"Notes on {topic}: " + PARAGRAPH * 2


def user_text(turn: int) -> str:
    return f"Turn {turn}: " + "Could you go over the numbers again and tell me what changed? " * (
        1 + turn % 4
    )


def model_reply(request: ModelRequest) -> Any:
    last = request.messages[-1]
    turn = int(last.content.split()[1].rstrip(":")) if last.role == "user" else -1
    if last.role == "user" and turn % 5 == 0:
        return ModelResponse(
            tool_calls=(
                _call(f"t{turn}a", "sales"),
                _call(f"t{turn}b", "costs"),
            ),
            finish_reason="tool_calls",
        )
    return ModelResponse(content="Here is what changed. " + PARAGRAPH, finish_reason="stop")


def _call(call_id: str, topic: str) -> Any:
    from aniki import ToolCall

    return ToolCall(id=call_id, name="lookup", arguments=f'{{"topic": "{topic}"}}')


class Timed:
    """A session proxy that measures the time spent in ``get_messages()``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.spent = 0.0

    @property
    def id(self) -> str:
        return str(self.inner.id)

    async def add_message(self, message: MessageLike) -> None:
        await _resolve(self.inner.add_message(message))

    async def add_messages(self, messages: Iterable[MessageLike]) -> None:
        await _resolve(self.inner.add_messages(list(messages)))

    async def get_messages(self) -> tuple[Message, ...]:
        start = time.perf_counter()
        messages = tuple(await _resolve(self.inner.get_messages()))
        self.spent += time.perf_counter() - start
        return messages

    async def clear(self) -> None:
        await _resolve(self.inner.clear())


async def _resolve(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


Wrap = Callable[[Any, Agent], Any]


def policies() -> dict[str, Wrap]:
    return {
        "no policy": lambda inner, summarizer: inner,
        f"WindowedSession({WINDOW} messages)": lambda inner, summarizer: WindowedSession(
            inner, WINDOW
        ),
        f"TokenBudgetSession({BUDGET:,} tokens)": lambda inner, summarizer: TokenBudgetSession(
            inner, BUDGET, model=MODEL
        ),
        f"SummarizingSession({BUDGET:,} tokens)": lambda inner, summarizer: SummarizingSession(
            inner, summarizer, BUDGET, model=MODEL
        ),
    }


async def converse(wrap: Wrap, turns: int, store: Callable[[], Any]) -> dict[str, Any]:
    counter = counter_for_model(MODEL)
    model = MockProvider(handler=model_reply)
    summaries = MockProvider(handler=lambda request: "Summary: " + PARAGRAPH * 3)
    summarizer = Agent("Summarizer", model=MODEL, provider=summaries)
    agent = Agent("Analyst", "You explain numbers.", model=MODEL, provider=model, tools=[lookup])
    session = Timed(wrap(store(), summarizer))
    runner = Runner()
    first_request: list[int] = []
    spent: list[float] = []
    for turn in range(1, turns + 1):
        seen = len(model.requests)
        session.spent = 0.0
        await runner.run(agent, message=user_text(turn), session=session)
        spent.append(session.spent)
        history = model.requests[seen].messages[1:]
        first_request.append(sum(counter.count_message(m) for m in history))
    every = [r.messages for r in model.requests] + [r.messages for r in summaries.requests]
    return {
        "tokens": first_request,
        "total": sum(counter.count_message(m) for messages in every for m in messages),
        "spent": spent,
        "summaries": len(summaries.requests),
    }


def report(name: str, figures: dict[str, Any], turns: int) -> None:
    tokens = figures["tokens"]
    at = "  ".join(f"turn {t}: {tokens[t - 1]:>6,}" for t in CHECKPOINTS if t <= turns)
    spent = figures["spent"]
    spans = {"first 50": spent[:50], "turns 51-100": spent[50:100], "last 50": spent[-50:]}
    times = ", ".join(
        f"{label} {statistics.median(values) * 1e3:.3f} ms"
        for label, values in spans.items()
        if values
    )
    extra = f", {figures['summaries']} summarizer calls" if figures["summaries"] else ""
    print(f"{name}")
    print(f"  tokens sent (first request of the turn): {at}")
    print(f"  tokens sent over the whole run: {figures['total']:,}{extra}")
    print(f"  time in get_messages per turn (median): {times}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--store", choices=("memory", "sqlite"), default="memory")
    args = parser.parse_args()
    counter = counter_for_model(MODEL)
    print(f"{args.turns} turns, store: {args.store}, counter: {counter!r}\n")
    with tempfile.TemporaryDirectory() as folder:
        for index, (name, wrap) in enumerate(policies().items()):
            path = Path(folder) / f"bench-{index}.db"

            def store(path: Path = path) -> Any:
                if args.store == "sqlite":
                    return SQLiteSession("bench", path)
                return InMemorySession()

            report(name, await converse(wrap, args.turns, store), args.turns)


if __name__ == "__main__":
    asyncio.run(main())
