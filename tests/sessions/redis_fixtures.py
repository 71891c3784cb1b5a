"""What the Redis session tests share: a fresh key prefix per test, sessions of either class
over it (``store``, ``kit``), a plain client to look at the keys, and the helpers of the fork
and undo checks. A test module imports the fixtures it uses and names them in ``__all__``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis as redis_module

from aniki import Message
from aniki.sessions import open_store
from aniki.sessions.base import SessionInfo
from aniki.sessions.redis import AsyncRedisSession, RedisSession

from ..servers import delete_redis_prefix, redis_url, unique_name
from .stores import Opener

__all__ = [
    "Kit",
    "client",
    "contents",
    "dumps",
    "fork",
    "keys_of",
    "kit",
    "prefix",
    "split",
    "store",
    "turn",
]


@pytest.fixture
def prefix() -> Iterator[str]:
    redis_url()
    name = unique_name("aniki-test") + ":"
    yield name
    delete_redis_prefix(name)


@pytest.fixture(params=[RedisSession, AsyncRedisSession], ids=["sync", "async"])
def store(request: pytest.FixtureRequest, prefix: str) -> Iterator[Opener]:
    opener = Opener(request.param, url=redis_url(), prefix=prefix)
    yield opener
    opener.close()


@pytest.fixture
def client() -> Iterator[redis_module.Redis]:
    connection = redis_module.Redis.from_url(redis_url())
    yield connection
    connection.close()


def keys_of(prefix: str, session_id: str) -> list[bytes]:
    base = f"{prefix}{{{session_id}}}".encode()
    return [base + b":msgs", base + b":info", base + b":meta", base + b":batches"]


# --- a store and its sessions, with the steps they run -------------------------------------


class Kit:
    """Sessions of one class (sync or async), a store over the same prefix, and the steps
    every session ran (``steps``)."""

    def __init__(self, cls: type, prefix: str, steps: list[Any]) -> None:
        self.opener = Opener(cls, url=redis_url(), prefix=prefix)
        self.store: Any = open_store(redis_url(), prefix=prefix, asynchronous=self.is_async)
        self.run(self.store.open() if self.is_async else None)
        self.steps = steps

    @property
    def is_async(self) -> bool:
        return self.opener.is_async

    def run(self, value: Any) -> Any:
        return self.opener.run(value)

    def open(self, session_id: str, **options: Any) -> Any:
        return self.opener.open(session_id, **options)

    def list(self, **query: Any) -> list[SessionInfo]:
        found: list[SessionInfo] = self.run(self.store.list_sessions(**query))
        return found

    def info(self, session: Any) -> SessionInfo:
        found: SessionInfo = self.run(session.info())
        return found

    def scripts(self, script: Any) -> int:
        """How many of the steps ran ``script``."""
        return sum(1 for step in self.steps if getattr(step, "script", None) is script)

    def close(self) -> None:
        self.run(self.store.aclose() if self.is_async else self.store.close())
        self.opener.close()


@pytest.fixture(params=[RedisSession, AsyncRedisSession], ids=["sync", "async"])
def kit(
    request: pytest.FixtureRequest, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Kit]:
    cls = request.param
    steps: list[Any] = []
    original = cls._execute
    if cls is AsyncRedisSession:

        async def spy(self: Any, step: Any) -> Any:
            steps.append(step)
            return await original(self, step)
    else:

        def spy(self: Any, step: Any) -> Any:
            steps.append(step)
            return original(self, step)

    monkeypatch.setattr(cls, "_execute", spy)
    made = Kit(cls, prefix, steps)
    yield made
    made.close()


# --- fork and undo -------------------------------------------------------------------------


@pytest.fixture(params=[False, True], ids=["one-script", "two-steps"])
def split(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def turn(n: int) -> list[Message]:
    return [Message("user", f"q{n}"), Message("assistant", f"a{n}")]


def fork(store: Opener, session: Any, new_id: str, *, split: bool, upto: str | None = None) -> Any:
    session._split = split  # as for a cluster client: read by one script, written by another
    child = store.run(session.fork(new_id, upto=upto))
    store._opened.append(child)  # closed with the sessions the opener made
    return child


def contents(messages: Any) -> list[str]:
    return [m.content for m in messages]


def dumps(client: redis_module.Redis, prefix: str, *ids: str) -> dict[bytes, Any]:
    return {key: client.dump(key) for i in ids for key in keys_of(prefix, i)}
