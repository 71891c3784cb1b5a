"""Your first agent: a two-turn conversation that remembers (docs/first-agent.md)."""

from __future__ import annotations

import asyncio

from _model import model_and_provider

from aniki import Agent, ModelRequest, Runner


def script(request: ModelRequest) -> str:
    said = request.messages[-1].content
    if said.startswith("My name is"):
        return f"Nice to meet you, {said.removeprefix('My name is ').rstrip('.')}!"
    names = [m.content for m in request.messages if m.content.startswith("My name is")]
    return f"You told me: {names[-1]!r}" if names else "I don't know yet."


async def main() -> None:
    model, provider = model_and_provider(script)
    agent = Agent("Assistant", "You are a helpful assistant.", model=model, provider=provider)
    runner = Runner()
    for message in ("My name is Lalit.", "What's my name?"):
        result = await runner.run(agent, message=message)
        print(f"you:       {message}\nassistant: {result.content}\n")
    print(f"{len(result.messages)} messages in the session; this run used {result.usage}")


if __name__ == "__main__":
    asyncio.run(main())
