"""aniki behind the benchmark interface: its Runner, its stores, and a scripted provider."""

from __future__ import annotations

import asyncio
import importlib
import inspect
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from .base import INSTRUCTIONS, REPLY, USER_MESSAGE, Appender, Backend, StoreSpec, Unsupported

# Where each store class lives; a store whose module has not landed yet becomes a note.
_STORES = {
    "memory": ("aniki.sessions.memory", "InMemorySession"),
    "sqlite": ("aniki.sessions.sqlite", "SQLiteSession"),
    "file": ("aniki.sessions.file", "FileSession"),
    "redis": ("aniki.sessions.redis", "AsyncRedisSession"),
    "postgres": ("aniki.sessions.postgres", "AsyncPostgresSession"),
}


def store_class(kind: str) -> Any:
    """The aniki session class for ``kind``, or :class:`Unsupported` if aniki lacks it."""
    module_name, name = _STORES[kind]
    try:
        return getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise Unsupported(f"aniki has no {name} ({module_name}) yet") from exc


async def resolve(value: Any) -> Any:
    """``value``, awaited when a store's method was a coroutine (async stores)."""
    return await value if inspect.isawaitable(value) else value


class ScriptedProvider:
    """Answers :data:`REPLY` to every call, after ``delay`` seconds; remembers what it was sent."""

    def __init__(self, delay: float = 0.0) -> None:
        from aniki import ModelResponse

        self._response = ModelResponse(content=REPLY, finish_reason="stop")
        self.delay = delay
        self.seen = 0

    async def complete(self, request: Any) -> Any:
        self.seen = sum(1 for m in request.messages if m.role != "system")
        if self.delay:
            await asyncio.sleep(self.delay)
        return self._response

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        yield await self.complete(request)


class AnikiChat:
    """One conversation: an agent with a scripted provider, run over one session."""

    def __init__(self, session: Any, delay: float, warm: Any = None) -> None:
        from aniki import Agent, Runner

        self.provider = ScriptedProvider(delay)
        self.agent = Agent("bench", INSTRUCTIONS, model="scripted", provider=self.provider)
        self.runner = Runner()
        self.session = session
        self.warm = warm

    async def turn(self, text: str) -> int:
        if self.warm is not None:
            await self.warm()
        result = await self.runner.run(self.agent, message=text, session=self.session)
        if result.content != REPLY:
            raise AssertionError(f"aniki returned {result.content[:40]!r}, not the scripted reply")
        return self.provider.seen


class AnikiReader:
    """Reads through one session object (which keeps aniki's incremental cache)."""

    def __init__(self, session: Any) -> None:
        self.session = session

    async def read(self, limit: int | None) -> Sequence[Any]:
        if limit is None:
            history: Sequence[Any] = await resolve(self.session.get_messages())
        else:
            history = await resolve(self.session.get_messages(limit=limit))
        return history


def bench_messages(count: int) -> list[Any]:
    """``count`` messages alternating user and assistant, as a conversation stores them."""
    from aniki import Message

    user = Message(role="user", content=USER_MESSAGE)
    assistant = Message(role="assistant", content=REPLY)
    return [user if i % 2 == 0 else assistant for i in range(count)]


class AnikiBackend:
    """aniki over one store: a session object per conversation, shared clients per store."""

    def __init__(self, store: StoreSpec, cls: Any, shared: dict[str, Any]) -> None:
        self.store = store
        self.cls = cls
        self.shared = shared
        self.memory: dict[str, Any] = {}  # an in-memory history lives in its one object

    def session(self, conversation_id: str) -> Any:
        """A new session object for the conversation (the same one for in-memory stores)."""
        kind, where = self.store.kind, self.store.location
        if kind == "memory":
            return self.memory.setdefault(conversation_id, self.cls(conversation_id))
        if kind in ("sqlite", "file"):
            return self.cls(conversation_id, where, durability=self.store.durability)
        if kind == "redis":
            prefix = f"{self.store.namespace}:"
            return self.cls(conversation_id, client=self.shared["client"], prefix=prefix)
        return self.cls(conversation_id, pool=self.shared["pool"], table=self.shared["table"])

    def chat(self, conversation_id: str, *, delay: float = 0.0) -> AnikiChat:
        served = self.shared.get("store")
        if served is None:
            return AnikiChat(self.session(conversation_id), delay)
        # A conversation served as a web server serves it: its session handed out by the
        # store opened at start-up (open_store), whose connections are all open by the time
        # the first turn is taken.
        return AnikiChat(served.session(conversation_id), delay, self._warm)

    async def _warm(self) -> None:
        if self.shared.get("warm"):
            return
        self.shared["warm"] = True
        store = self.shared["store"]
        await asyncio.gather(
            *(store.session(f"warm-up-{n}").get_messages() for n in range(self.shared["size"]))
        )

    async def fill(self, conversation_id: str, count: int) -> None:
        session = self.session(conversation_id)
        messages = bench_messages(count)
        for start in range(0, count, 2000):
            await resolve(session.add_messages(messages[start : start + 2000]))

    def reader(self, conversation_id: str) -> AnikiReader:
        return AnikiReader(self.session(conversation_id))

    def appender(self, conversation_id: str) -> Appender:
        session = self.session(conversation_id)
        messages = bench_messages(2)
        add = session.add_message
        # Called the way the raw column calls its driver: directly, with no check per call of
        # whether the store is sync or async (that check is the harness's, not the store's).
        if inspect.iscoroutinefunction(add):

            async def append_async(i: int) -> None:
                await add(messages[i % 2])

            return append_async

        async def append(i: int) -> None:
            add(messages[i % 2])

        return append


class AnikiPeer:
    """aniki, the framework this harness is for."""

    name = "aniki"
    module = "aniki"

    def available(self) -> bool:
        return importlib.util.find_spec("aniki") is not None

    @asynccontextmanager
    async def open(self, store: StoreSpec) -> AsyncIterator[Backend]:
        cls = store_class(store.kind)
        shared: dict[str, Any] = {}
        if store.kind == "redis":
            from . import servers

            shared["client"] = await servers.redis_client(store.location)
        elif store.kind == "postgres":
            from . import servers

            shared["table"] = f"{store.namespace}_aniki"
            shared["pool"] = await servers.postgres_pool(store.location)
        if store.kind in ("redis", "postgres"):
            from aniki.sessions import open_store

            from . import servers

            if store.kind == "redis":
                url = store.location or servers.REDIS_URL
                options = {"prefix": f"{store.namespace}:"}
            else:
                url = store.location or servers.POSTGRES_DSN
                options = {"table": shared["table"]}
            served = open_store(
                url, asynchronous=True, max_connections=servers.POOL_SIZE, **options
            )
            shared["store"] = await served.open()
            shared["size"] = servers.POOL_SIZE
        try:
            yield AnikiBackend(store, cls, shared)
        finally:
            await _cleanup(store, shared)


async def _cleanup(store: StoreSpec, shared: dict[str, Any]) -> None:
    from . import servers

    if "store" in shared:
        await shared["store"].aclose()
    if "client" in shared:
        if store.cleanup:
            await servers.drop_redis_keys(shared["client"], f"{store.namespace}:")
        await shared["client"].aclose()
    if "pool" in shared:
        if store.cleanup:
            await servers.drop_postgres_tables(shared["pool"], shared["table"])
        await shared["pool"].close()
