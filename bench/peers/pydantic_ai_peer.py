"""PydanticAI (``pydantic-ai-slim``) behind the benchmark interface.

The model is a ``FunctionModel`` answering :data:`REPLY`. PydanticAI ships no persistent
store of its own; its documentation persists a conversation by serialising messages with
``ModelMessagesTypeAdapter`` and its chat-app example keeps them in SQLite, one row per run
(``result.new_messages_json()``), reloading and validating every row before each run. The
``sqlite`` store here is exactly that pattern (WAL, ``synchronous`` set from the store's
durability, one commit per turn); ``memory`` keeps ``result.all_messages()`` in a list. Other
stores are not offered: there would be nothing of PydanticAI's in them to measure.

Its way of trimming what the model is sent is a history processor keeping the last messages
(``history_processors=`` in older releases, the ``ProcessHistory`` capability in newer ones,
which replaced it), used by ``trimmed_chat``.
"""

from __future__ import annotations

import importlib.util
import math
import sqlite3
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

_SYNCHRONOUS = {"off": "OFF", "normal": "NORMAL", "full": "FULL"}
_SELECT_ALL = "SELECT message_list FROM pydantic_ai_messages WHERE conversation = ? ORDER BY id"
_SELECT_LAST = (
    "SELECT message_list FROM pydantic_ai_messages WHERE conversation = ? ORDER BY id DESC LIMIT ?"
)
_INSERT = "INSERT INTO pydantic_ai_messages (conversation, message_list) VALUES (?, ?)"


class _SQLiteHistory:
    """The chat-app pattern: one row of JSON messages per run, all reloaded before each run."""

    def __init__(self, conn: sqlite3.Connection, conversation_id: str) -> None:
        self.conn = conn
        self.id = conversation_id

    def load(self, limit: int | None = None) -> list[Any]:
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        if limit is None:
            rows = self.conn.execute(_SELECT_ALL, (self.id,)).fetchall()
        else:  # rows hold two messages each
            wanted = math.ceil(limit / 2) + 1
            rows = self.conn.execute(_SELECT_LAST, (self.id, wanted)).fetchall()[::-1]
        messages: list[Any] = []
        for (row,) in rows:
            messages.extend(ModelMessagesTypeAdapter.validate_json(row))
        return messages if limit is None else messages[-limit:] if limit else []

    def save(self, result: Any) -> None:
        self.conn.execute(_INSERT, (self.id, result.new_messages_json()))


class _MemoryHistory:
    def __init__(self) -> None:
        self.messages: list[Any] = []

    def load(self, limit: int | None = None) -> list[Any]:
        return self.messages if limit is None else self.messages[-limit:] if limit else []

    def save(self, result: Any) -> None:
        self.messages = result.all_messages()


def _pairs(instructions: str | None, messages: list[Any]) -> list[tuple[str, str]]:
    """The request as ``(role, content)`` pairs, the instructions first."""
    from pydantic_ai.messages import ModelRequest, SystemPromptPart, TextPart, UserPromptPart

    pairs = [("system", instructions)] if instructions else []
    for message in messages:
        parts = message.parts
        if isinstance(message, ModelRequest):
            for part in parts:
                if isinstance(part, SystemPromptPart):
                    pairs.append(("system", part.content))
                elif isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    pairs.append(("user", part.content))
                else:
                    raise ValueError(f"pydantic-ai sent a part the benchmark does not read: {part}")
        elif all(isinstance(part, TextPart) for part in parts):
            pairs.append(("assistant", "".join(part.content for part in parts)))
        else:
            raise ValueError(f"pydantic-ai sent a response the benchmark does not read: {message}")
    return pairs


def _keep_last(count: int) -> dict[str, Any]:
    """``Agent`` options that send the model only the last ``count`` messages."""
    import inspect

    from pydantic_ai import Agent

    def keep_last(messages: list[Any]) -> list[Any]:
        return messages[-count:]

    if "history_processors" in inspect.signature(Agent.__init__).parameters:
        return {"history_processors": [keep_last]}
    from pydantic_ai.capabilities import ProcessHistory

    return {"capabilities": [ProcessHistory(keep_last)]}


class PydanticChat:
    """One conversation: an agent over a ``FunctionModel``, its history kept as documented."""

    def __init__(
        self,
        history: Any,
        delay: float,
        *,
        answer: Answer | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        import asyncio

        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart
        from pydantic_ai.models.function import FunctionModel

        async def respond(messages: list[Any], info: Any) -> Any:
            self.seen = len(messages)
            if answer is not None:
                self.reply = answer(_pairs(info.instructions, messages))
            if delay:
                await asyncio.sleep(delay)
            return ModelResponse(parts=[TextPart(self.reply)])

        self.seen = 0
        self.reply = REPLY
        self.agent = Agent(FunctionModel(respond), instructions=INSTRUCTIONS, **(options or {}))
        self.history = history

    async def turn(self, text: str) -> int:
        result = await self.agent.run(text, message_history=self.history.load())
        self.history.save(result)
        if result.output != self.reply:
            raise AssertionError("pydantic-ai did not return the scripted reply")
        return self.seen


class PydanticReader:
    def __init__(self, history: Any) -> None:
        self.history = history

    async def read(self, limit: int | None) -> Sequence[Any]:
        loaded: Sequence[Any] = self.history.load(limit)
        return loaded


def _pair_json() -> bytes:
    """One stored run: the user's request and the model's reply, as ``new_messages_json``."""
    from pydantic_ai.messages import (
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        TextPart,
        UserPromptPart,
    )

    pair: list[Any] = [
        ModelRequest(parts=[UserPromptPart(USER_MESSAGE)], instructions=INSTRUCTIONS),
        ModelResponse(parts=[TextPart(REPLY)]),
    ]
    return ModelMessagesTypeAdapter.dump_json(pair)


class PydanticBackend:
    def __init__(self, store: StoreSpec, conn: sqlite3.Connection | None) -> None:
        self.store = store
        self.conn = conn
        self.memory: dict[str, _MemoryHistory] = {}

    def history(self, conversation_id: str) -> Any:
        if self.conn is None:
            return self.memory.setdefault(conversation_id, _MemoryHistory())
        return _SQLiteHistory(self.conn, conversation_id)

    def chat(self, conversation_id: str, *, delay: float = 0.0) -> PydanticChat:
        return PydanticChat(self.history(conversation_id), delay)

    async def fill(self, conversation_id: str, count: int) -> None:
        if self.conn is None:
            raise Unsupported("pydantic-ai keeps in-memory history in the caller's list")
        if count % 2:
            raise ValueError("pydantic-ai stores whole runs: fill an even number of messages")
        row = (conversation_id, _pair_json())
        self.conn.execute("BEGIN")
        self.conn.executemany(_INSERT, [row] * (count // 2))
        self.conn.execute("COMMIT")

    def reader(self, conversation_id: str) -> PydanticReader:
        return PydanticReader(self.history(conversation_id))

    def appender(self, conversation_id: str) -> Appender:
        raise Unsupported(
            "pydantic-ai has no session store: appending is the application's own sqlite3 "
            "code, which is the raw sqlite3 column"
        )


class PydanticAIPeer:
    name = "pydantic-ai"
    module = "pydantic_ai"

    def available(self) -> bool:
        return importlib.util.find_spec("pydantic_ai") is not None

    def trimmed_chat(self, history: int, answer: Answer) -> Chat:
        """Messages kept in a list; a history processor keeps the last ``history + 1``."""
        return PydanticChat(_MemoryHistory(), 0.0, answer=answer, options=_keep_last(history + 1))

    @asynccontextmanager
    async def open(self, store: StoreSpec) -> AsyncIterator[Backend]:
        if store.kind not in ("memory", "sqlite"):
            raise Unsupported(f"pydantic-ai has no {store.kind} store")
        conn = None
        if store.kind == "sqlite":
            conn = sqlite3.connect(store.location, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={_SYNCHRONOUS[store.durability]}")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS pydantic_ai_messages (id INTEGER PRIMARY KEY,"
                " conversation TEXT NOT NULL, message_list BLOB NOT NULL)"
            )
            conn.execute(
                "CREATE INDEX IF NOT EXISTS pydantic_ai_messages_conversation"
                " ON pydantic_ai_messages (conversation, id)"
            )
        try:
            yield PydanticBackend(store, conn)
        finally:
            if conn is not None:
                conn.close()
