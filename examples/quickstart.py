"""A conversation that remembers: two turns, then a restart that finds the history again.

Runs offline with a scripted model. Set OPENAI_API_KEY (and optionally OPENAI_BASE_URL for
a local OpenAI-compatible server) to talk to a real model instead.
"""

from __future__ import annotations

import asyncio
import os

from aniki import Agent, InMemorySession, Runner
from aniki.testing import MockProvider


def make_agent(session: InMemorySession) -> Agent:
    if os.environ.get("OPENAI_API_KEY"):
        return Agent(
            "Assistant",
            "You are a helpful assistant.",
            model="gpt-4o-mini",
            provider="openai",
            session=session,
        )
    provider = MockProvider(handler=lambda request: scripted_reply(request.messages[-1].content))
    return Agent(
        "Assistant",
        "You are a helpful assistant.",
        model="scripted",
        provider=provider,
        session=session,
    )


def scripted_reply(text: str) -> str:
    if "name is" in text:
        return f"Nice to meet you, {text.rsplit(' ', 1)[-1].rstrip('.')}! (scripted reply)"
    return "I can see our whole conversation above. (scripted reply)"


async def main() -> None:
    session = InMemorySession("quickstart")
    agent = make_agent(session)
    runner = Runner()
    for message in ("My name is Lalit.", "What's my name?"):
        result = await runner.run(agent, message=message)
        print(f"you:       {message}\nassistant: {result.content}")
    print(f"\nthe session holds {len(session.get_messages())} messages")


if __name__ == "__main__":
    asyncio.run(main())
