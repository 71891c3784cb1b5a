"""A chat service: one store for the whole process, one session per request (docs/serving.md).

pip install "aniki-sdk[serve]"            # add redis or postgres for those stores
ANIKI_STORE_URL=sqlite:///chat.db uvicorn fastapi_app:app --app-dir examples

POST /chats/{chat_id}          {"message": "Hi"} -> {"reply": "..."}
POST /chats/{chat_id}/stream   {"message": "Hi"} -> the reply as plain text, as it is written
GET  /chats/{chat_id}          the stored history
GET  /chats                    every stored conversation
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from _model import model_and_provider
from fastapi import Depends, FastAPI, Path, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from aniki import Agent, AsyncSession, ModelRequest, Runner, SessionInfo, TextDelta
from aniki.sessions import open_store
from aniki.testing import MockReply

STORE_URL = os.environ.get("ANIKI_STORE_URL", "sqlite:///chat.db")


def script(request: ModelRequest) -> MockReply:
    # The offline model: it says which message of the conversation it answers, so a reply
    # shows whose history it was given. It takes 30 ms, as a model takes its time.
    asked = sum(m.role == "user" for m in request.messages)
    return MockReply(f"Message {asked} was: {request.messages[-1].content}", delay=0.03)


model, provider = model_and_provider(script)
agent = Agent("Assistant", "You are a helpful assistant.", model=model, provider=provider)
runner = Runner(max_turns=5)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    # One store, so one connection pool (or client, or database handle) for every request;
    # closed when the server stops.
    async with open_store(STORE_URL, asynchronous=True) as store:
        app.state.store = store
        yield


app = FastAPI(title="aniki chat", lifespan=lifespan)


def conversation(
    request: Request, chat_id: Annotated[str, Path(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
) -> AsyncSession:
    """The session of the conversation the URL names: a cheap handle on the shared store."""
    session: AsyncSession = request.app.state.store.session(chat_id)
    return session


Conversation = Annotated[AsyncSession, Depends(conversation)]


class Turn(BaseModel):
    message: str = Field(min_length=1, max_length=8000)


class Reply(BaseModel):
    reply: str


@app.post("/chats/{chat_id}")
async def chat(turn: Turn, session: Conversation) -> Reply:
    result = await runner.run(agent, message=turn.message, session=session, timeout=60)
    return Reply(reply=result.content)


@app.post("/chats/{chat_id}/stream")
async def chat_stream(turn: Turn, session: Conversation) -> StreamingResponse:
    async def text() -> AsyncIterator[str]:
        # Made here, inside the response: a client that leaves mid-reply closes this
        # generator, which stops the run, and the session keeps just the user's message.
        async with runner.stream(agent, message=turn.message, session=session) as stream:
            async for event in stream:
                if isinstance(event, TextDelta):
                    yield event.text

    return StreamingResponse(text(), media_type="text/plain; charset=utf-8")


@app.get("/chats/{chat_id}")
async def history(session: Conversation) -> list[dict[str, Any]]:
    return [message.to_dict() for message in await session.get_messages()]


@app.get("/chats")
async def chats(request: Request) -> list[SessionInfo]:
    listed: list[SessionInfo] = await request.app.state.store.list_sessions()
    return listed


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=8000)
