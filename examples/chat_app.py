"""The storage side of a chat product: a user's conversations listed with their titles, a
page at a time, and deleted on request (docs/sessions.md, "Building a chat app").

Every conversation is an agent run with its own session, handed out by one store; the app
gives each a title (the first words of its first question) and an owner, lists them, and
removes them: all one user's ("delete my data"), and those nobody wrote to for a while.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

from _model import model_and_provider

from aniki import Agent, ModelRequest, Runner
from aniki.sessions import open_store

QUESTIONS = {
    "ann": ["Which temples in Kyoto open early?", "Pack list for a week of rain", "Fix my CV"],
    "bob": ["How long to boil an egg?"],
}


def script(request: ModelRequest) -> str:
    return f"Here is what I know about: {request.messages[-1].content}"


async def main(path: Path) -> None:
    model, provider = model_and_provider(script)
    agent = Agent("Assistant", "Answer briefly.", model=model, provider=provider)
    runner = Runner()
    async with open_store(f"sqlite:///{path}", asynchronous=True) as store:
        for owner, questions in QUESTIONS.items():
            for number, question in enumerate(questions):
                chat = store.session(f"{owner}-chat-{number}")
                title = " ".join(question.split()[:4])
                await chat.set_info(owner=owner, title=title, tags=["web"])
                await runner.run(agent, message=question, session=chat)

        first = await store.list_sessions(owner="ann", limit=2)  # newest first
        rest = await store.list_sessions(owner="ann", limit=2, cursor=first[-1])
        for info in first + rest:
            print(f"ann: {info.title!r}, {info.message_count} messages")

        print(f"deleted for bob: {await store.delete_sessions(owner='bob')}")
        print(f"left: {[info.id for info in await store.list_sessions()]}")
        removed = await store.prune(older_than=timedelta(days=30))
        print(f"pruned (not written for 30 days): {removed}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as scratch:
        where = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(scratch) / "chat-app.db"
        asyncio.run(main(where))
