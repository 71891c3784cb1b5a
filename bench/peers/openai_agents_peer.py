"""The OpenAI Agents SDK (``openai-agents``) behind the benchmark interface.

The model is a ``Model`` subclass that returns one fixed ``ModelResponse``; tracing is turned
off (its exporter would try to reach the network). Stores are the SDK's own sessions:
``SQLiteSession`` on a file (``sqlite``), ``SQLiteSession`` on ``:memory:`` (``memory``) and
``extensions.memory.RedisSession`` (``redis``). It has no file store and no PostgreSQL store
without SQLAlchemy, which the bench requirements leave out.

The SDK's ``SQLiteSession`` always commits with SQLite's default ``synchronous=FULL`` in WAL
mode; workloads that compare it use aniki's ``durability="full"``, the same setting.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from .base import INSTRUCTIONS, REPLY, USER_MESSAGE, Appender, Backend, StoreSpec, Unsupported

_MODEL_CLASS: Any = None


def _scripted_model_class() -> Any:
    """The scripted ``Model`` subclass, built on first use so importing this module is cheap."""
    global _MODEL_CLASS
    if _MODEL_CLASS is not None:
        return _MODEL_CLASS
    import asyncio

    from agents import Model, ModelResponse, Usage
    from openai.types.responses import ResponseOutputMessage, ResponseOutputText

    class ScriptedModel(Model):
        """Answers :data:`REPLY` to every call, after ``delay`` seconds."""

        def __init__(self, delay: float) -> None:
            self.delay = delay
            self.seen = 0

        async def get_response(
            self, system_instructions: Any, input: Any, *args: Any, **kw: Any
        ) -> Any:
            self.seen = len(input) if isinstance(input, list) else 1
            if self.delay:
                await asyncio.sleep(self.delay)
            message = ResponseOutputMessage(
                id="msg_bench",
                content=[ResponseOutputText(annotations=[], text=REPLY, type="output_text")],
                role="assistant",
                status="completed",
                type="message",
            )
            return ModelResponse(output=[message], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the benchmark does not stream")

    _MODEL_CLASS = ScriptedModel
    return ScriptedModel


class AgentsChat:
    """One conversation: an agent with the scripted model, run over one SDK session."""

    def __init__(self, session: Any, delay: float) -> None:
        from agents import Agent

        self.model = _scripted_model_class()(delay)
        self.agent = Agent(name="bench", instructions=INSTRUCTIONS, model=self.model)
        self.session = session

    async def turn(self, text: str) -> int:
        from agents import Runner

        result = await Runner.run(self.agent, text, session=self.session)
        if result.final_output != REPLY:
            raise AssertionError("openai-agents did not return the scripted reply")
        return int(self.model.seen)


class AgentsReader:
    def __init__(self, session: Any) -> None:
        self.session = session

    async def read(self, limit: int | None) -> Sequence[Any]:
        items: Sequence[Any] = await self.session.get_items(limit=limit)
        return items


def _items(count: int) -> list[dict[str, str]]:
    user = {"role": "user", "content": USER_MESSAGE}
    assistant = {"role": "assistant", "content": REPLY}
    return [user if i % 2 == 0 else assistant for i in range(count)]


class AgentsBackend:
    def __init__(self, store: StoreSpec, client: Any) -> None:
        self.store = store
        self.client = client
        self.memory: dict[str, Any] = {}

    def session(self, conversation_id: str) -> Any:
        from agents import SQLiteSession

        if self.store.kind == "memory":
            return self.memory.setdefault(conversation_id, SQLiteSession(conversation_id))
        if self.store.kind == "sqlite":
            return SQLiteSession(conversation_id, self.store.location)
        from agents.extensions.memory.redis_session import RedisSession

        prefix = f"{self.store.namespace}:agents"
        return RedisSession(conversation_id, redis_client=self.client, key_prefix=prefix)

    def chat(self, conversation_id: str, *, delay: float = 0.0) -> AgentsChat:
        return AgentsChat(self.session(conversation_id), delay)

    async def fill(self, conversation_id: str, count: int) -> None:
        session = self.session(conversation_id)
        items = _items(count)
        for start in range(0, count, 2000):
            await session.add_items(items[start : start + 2000])

    def reader(self, conversation_id: str) -> AgentsReader:
        return AgentsReader(self.session(conversation_id))

    def appender(self, conversation_id: str) -> Appender:
        session = self.session(conversation_id)
        items = _items(2)

        async def append(i: int) -> None:
            await session.add_items([items[i % 2]])

        return append


class OpenAIAgentsPeer:
    name = "openai-agents"
    module = "agents"

    def available(self) -> bool:
        return importlib.util.find_spec("agents") is not None

    @asynccontextmanager
    async def open(self, store: StoreSpec) -> AsyncIterator[Backend]:
        if store.kind not in ("memory", "sqlite", "redis"):
            raise Unsupported(f"openai-agents has no {store.kind} session in this setup")
        from agents import set_tracing_disabled

        set_tracing_disabled(True)
        client = None
        if store.kind == "redis":
            from . import servers

            client = await servers.redis_client(store.location)
        try:
            yield AgentsBackend(store, client)
        finally:
            if client is not None:
                from . import servers

                if store.cleanup:
                    await servers.drop_redis_keys(client, f"{store.namespace}:")
                await client.aclose()
