"""A conversation that survives a restart, in the embedded SQLite store (docs/sessions.md).

Run it twice: the second run continues the first conversation.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from _model import model_and_provider

from aniki import Agent, ModelRequest, Runner
from aniki.sessions import SQLiteSession, list_sessions


def script(request: ModelRequest) -> str:
    earlier = sum(m.role == "user" for m in request.messages) - 1
    return f"This is message {earlier + 1} you've sent me in this conversation."


async def main(path: Path) -> None:
    model, provider = model_and_provider(script)
    session = SQLiteSession("example-conversation", path=path)
    print(f"{len(session.get_messages())} messages stored before this run, in {path}")
    agent = Agent(
        "Assistant", "You are a helpful assistant.", model=model, provider=provider, session=session
    )
    result = await Runner().run(agent, message="Hello again!")
    print(f"assistant: {result.content}")
    for info in list_sessions(f"sqlite:///{path}"):
        print(f"stored: {info.id} with {info.message_count} messages")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1] if len(sys.argv) > 1 else "example-sessions.db")))
