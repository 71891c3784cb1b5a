"""Bounded history: what a token budget sends as a conversation grows (docs/policies.md)."""

from __future__ import annotations

import asyncio

from _model import model_and_provider

from aniki import Agent, InMemorySession, ModelRequest, Runner
from aniki.sessions import TokenBudgetSession, WindowedSession
from aniki.tokens import count_tokens


def script(request: ModelRequest) -> str:
    return f"Noted: {request.messages[-1].content}"


async def main(turns: int = 20) -> None:
    model, provider = model_and_provider(script)
    views = {
        "everything": InMemorySession(),
        "last 6 messages": WindowedSession(InMemorySession(), 6),
        "300 tokens": TokenBudgetSession(InMemorySession(), 300, model=model),
    }
    sent: dict[str, list[int]] = {name: [] for name in views}
    for name, session in views.items():
        agent = Agent(
            "Notes", "Acknowledge each note.", model=model, provider=provider, session=session
        )
        for turn in range(1, turns + 1):
            await Runner().run(agent, message=f"Note {turn}: buy {turn} apples for the party.")
            sent[name].append(count_tokens(session.get_messages(), model))
    print("tokens of history sent on the next turn")
    print(f"{'turn':>5} " + " ".join(f"{name:>16}" for name in views))
    for turn in (1, 5, 10, turns):
        print(f"{turn:>5} " + " ".join(f"{sent[name][turn - 1]:>16}" for name in views))


if __name__ == "__main__":
    asyncio.run(main())
