"""The OpenAI Agents SDK (``openai-agents``) behind the benchmark interface.

The model is a ``Model`` subclass that returns one fixed ``ModelResponse``; tracing is turned
off (its exporter would try to reach the network). Stores are the SDK's own sessions:
``SQLiteSession`` on a file (``sqlite``), ``SQLiteSession`` on ``:memory:`` (``memory``) and
``extensions.memory.RedisSession`` (``redis``). It has no file store and no PostgreSQL store
without SQLAlchemy, which the bench requirements leave out.

The SDK's ``SQLiteSession`` always commits with SQLite's default ``synchronous=FULL`` in WAL
mode; workloads that compare it use aniki's ``durability="full"``, the same setting.

Its way of trimming what the model is sent is ``SessionSettings(limit=N)``, passed in the run's
``RunConfig``: the last ``N`` stored items, then the new input (``trimmed_chat``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from .base import (
    INSTRUCTIONS,
    REPLY,
    USER_MESSAGE,
    Answer,
    Appender,
    Backend,
    Chat,
    StoreSpec,
    Unsupported,
)

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
        """Answers :data:`REPLY` to every call (or what ``answer`` says), after ``delay`` s."""

        def __init__(self, delay: float, answer: Answer | None = None) -> None:
            self.delay = delay
            self.answer = answer
            self.seen = 0
            self.reply = REPLY

        async def get_response(
            self, system_instructions: Any, input: Any, *args: Any, **kw: Any
        ) -> Any:
            self.seen = len(input) if isinstance(input, list) else 1
            if self.answer is not None:
                self.reply = self.answer(_pairs(system_instructions, input))
            if self.delay:
                await asyncio.sleep(self.delay)
            message = ResponseOutputMessage(
                id="msg_bench",
                content=[ResponseOutputText(annotations=[], text=self.reply, type="output_text")],
                role="assistant",
                status="completed",
                type="message",
            )
            return ModelResponse(output=[message], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the benchmark does not stream")

    _MODEL_CLASS = ScriptedModel
    return ScriptedModel


def _pairs(system_instructions: str | None, input: Any) -> list[tuple[str, str]]:
    """The request as ``(role, content)`` pairs, the instructions first."""
    pairs = [("system", system_instructions)] if system_instructions else []
    for item in input if isinstance(input, list) else [{"role": "user", "content": input}]:
        data = item if isinstance(item, dict) else item.model_dump()
        content = data.get("content")
        if data.get("type", "message") != "message" or not isinstance(data.get("role"), str):
            raise ValueError(f"openai-agents sent an item the benchmark does not read: {data}")
        if isinstance(content, list):  # input_text / output_text parts
            content = "".join(part["text"] for part in content)
        if not isinstance(content, str):
            raise ValueError(f"openai-agents sent a message the benchmark does not read: {data}")
        pairs.append((data["role"], content))
    return pairs


class AgentsChat:
    """One conversation: an agent with the scripted model, run over one SDK session."""

    def __init__(
        self, session: Any, delay: float, *, answer: Answer | None = None, run_config: Any = None
    ) -> None:
        from agents import Agent

        self.model = _scripted_model_class()(delay, answer)
        self.agent = Agent(name="bench", instructions=INSTRUCTIONS, model=self.model)
        self.session = session
        self.run_config = run_config

    async def turn(self, text: str) -> int:
        from agents import Runner

        result = await Runner.run(
            self.agent, text, session=self.session, run_config=self.run_config
        )
        if result.final_output != self.model.reply:
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

    def trimmed_chat(self, history: int, answer: Answer) -> Chat:
        """An in-memory ``SQLiteSession`` read with ``SessionSettings(limit=history)``."""
        from agents import RunConfig, SessionSettings, SQLiteSession, set_tracing_disabled

        set_tracing_disabled(True)
        config = RunConfig(session_settings=SessionSettings(limit=history))
        return AgentsChat(SQLiteSession("trimmed"), 0.0, answer=answer, run_config=config)

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
