"""Streaming a reply, and what an aborted stream leaves behind (docs/streaming.md)."""

from __future__ import annotations

import asyncio

from _model import model_and_provider

from aniki import Agent, ModelRequest, Runner, TextDelta
from aniki.testing import MockReply


def script(request: ModelRequest) -> MockReply:
    text = "Once upon a time, a small agent remembered everything it was told."
    return MockReply(content=text)  # streamed word by word


async def main() -> None:
    model, provider = model_and_provider(script)
    agent = Agent("Storyteller", "Tell very short stories.", model=model, provider=provider)
    runner = Runner()

    print("streamed: ", end="")
    async with runner.stream(agent, message="Tell me a story.") as stream:
        async for event in stream:
            if isinstance(event, TextDelta):
                print(event.text, end="", flush=True)
    print(f"\nstored after completion: {[m.role for m in agent.session.get_messages()]}")

    stream = runner.stream(agent, message="Another one, please.")
    async for event in stream:
        if isinstance(event, TextDelta):
            break  # the user stopped reading
    await stream.aclose()
    roles = [m.role for m in agent.session.get_messages()]
    print(f"stored after an aborted stream: {roles} (only the new user message was kept)")


if __name__ == "__main__":
    asyncio.run(main())
