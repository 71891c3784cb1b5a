"""Workload 6: how many tokens each history policy sends per turn over a long conversation.

aniki runs ``economy_turns`` turns over an in-memory store, bare and behind each policy in
``aniki.sessions`` (a policy that has not landed is skipped with a note). Tokens are counted
on every request the model receives, summariser calls included, with aniki's estimating
counter (characters / 4 plus 4 per message), the same one the policies use. The peers have
history trimming of other shapes (openai-agents' ``SessionSettings.limit``, pydantic-ai's
``history_processors``), so this workload reports aniki's figures alone.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from peers import INSTRUCTIONS, REPLY, USER_MESSAGE

from workloads._common import Context, Section

NUMBER = 6
TITLE = "context economy"
SUMMARY = ("Summary of the conversation so far: the user keeps asking the same question. " * 6)[
    :400
]


def _limits(turns: int) -> dict[str, int]:
    """Policy limits scaled to the run: about a tenth of the final history."""
    if turns >= 100:
        return {"window": 50, "budget": 4_000, "summarizing": 4_000}
    return {"window": 10, "budget": 600, "summarizing": 800}


class _CountingProvider:
    """A scripted model that counts the tokens of every request it is sent."""

    def __init__(self, reply: str, counter: Any) -> None:
        from aniki import ModelResponse

        self.response = ModelResponse(content=reply, finish_reason="stop")
        self.counter = counter
        self.tokens: list[int] = []

    async def complete(self, request: Any) -> Any:
        self.tokens.append(sum(self.counter.count_message(m) for m in request.messages))
        return self.response

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        yield await self.complete(request)


Wrap = Callable[[Any, Any, Any], Any]
"""(store, counter, summarizer agent) -> the session the runner uses."""


def _policies(limits: dict[str, int]) -> dict[str, Wrap]:
    """Policy name -> how it wraps a store, for the policies aniki has."""
    sessions = importlib.import_module("aniki.sessions")
    made: dict[str, Wrap] = {"no policy": lambda inner, counter, summarizer: inner}
    if hasattr(sessions, "WindowedSession"):
        made[f"WindowedSession({limits['window']} messages)"] = lambda inner, counter, summarizer: (
            sessions.WindowedSession(inner, limits["window"])
        )
    if hasattr(sessions, "TokenBudgetSession"):
        made[f"TokenBudgetSession({limits['budget']:,} tokens)"] = (
            lambda inner, counter, summarizer: sessions.TokenBudgetSession(
                inner, limits["budget"], counter=counter
            )
        )
    if hasattr(sessions, "SummarizingSession"):
        made[f"SummarizingSession({limits['summarizing']:,} tokens)"] = (
            lambda inner, counter, summarizer: sessions.SummarizingSession(
                inner, summarizer, limits["summarizing"], counter=counter
            )
        )
    return made


async def _converse(name: str, wrap: Wrap, turns: int, section: Section) -> tuple[float, int]:
    """Run the conversation behind one policy; record its rows; return (seconds, last)."""
    from aniki import Agent, InMemorySession, Runner
    from aniki.tokens import EstimatingCounter

    counter = EstimatingCounter()
    summaries = _CountingProvider(SUMMARY, counter)
    summarizer = Agent("summarizer", model="scripted", provider=summaries)
    model = _CountingProvider(REPLY, counter)
    agent = Agent("bench", INSTRUCTIONS, model="scripted", provider=model)
    session = wrap(InMemorySession(), counter, summarizer)
    runner = Runner()
    start = time.perf_counter()
    for _ in range(turns):
        await runner.run(agent, message=USER_MESSAGE, session=session)
    elapsed = time.perf_counter() - start
    sent = model.tokens
    section.row(f"{name}: tokens sent, last turn", "tokens").values["aniki"] = sent[-1]
    section.row(f"{name}: tokens sent, all turns", "tokens").values["aniki"] = sum(sent) + sum(
        summaries.tokens
    )
    section.row(f"{name}: time per turn", "ms").values["aniki"] = elapsed / turns * 1e3
    if summaries.tokens:
        section.notes.append(
            f"{name}: {len(summaries.tokens)} summarizer calls, {sum(summaries.tokens):,} "
            "tokens sent to them (counted in 'all turns')"
        )
    return elapsed, sent[-1]


async def run(ctx: Context) -> Section:
    turns = ctx.scale.economy_turns
    section = Section(NUMBER, f"{TITLE}: tokens sent to the model over {turns} turns")
    sessions = importlib.import_module("aniki.sessions")
    for name in ("WindowedSession", "TokenBudgetSession", "SummarizingSession"):
        if not hasattr(sessions, name):
            section.notes.append(f"{name} is not in aniki.sessions yet: skipped")
    for name, wrap in _policies(_limits(turns)).items():
        elapsed, last = await _converse(name, wrap, turns, section)
        ctx.log(f"  6: {name}: {elapsed:.2f} s, {last:,} tokens on the last turn")
    section.notes.append(
        "the peers trim history in other ways (openai-agents' SessionSettings.limit, "
        "pydantic-ai's history_processors); this workload shows aniki alone"
    )
    return section
