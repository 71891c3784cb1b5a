"""A store opened with the wrong kind of ``with`` says which one it takes, on every scheme;
the mistake changes nothing, so the right form still works on the same store."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from aniki import Message, UserError
from aniki.sessions import open_store

from ..servers import postgres_dsn, redis_url

SCHEMES = ["memory", "sqlite", "file", "redis", "postgres"]


@pytest.fixture(params=SCHEMES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    scheme = request.param
    if scheme == "memory":
        return "memory:"
    if scheme == "sqlite":
        return f"sqlite:///{tmp_path / 'chats.db'}"
    if scheme == "file":
        return f"file://{tmp_path / 'chats'}"
    if scheme == "redis":
        return redis_url()
    return postgres_dsn()


@pytest.fixture
def session_id(url: str) -> object:
    session_id = f"store-context-{uuid.uuid4().hex[:10]}"
    yield session_id
    if url.startswith(("redis", "postgres")):
        with open_store(url) as store:
            store.session(session_id).clear()


def test_with_on_an_async_store_says_async_with(url: str, session_id: str) -> None:
    store = open_store(url, asynchronous=True)
    with pytest.raises(UserError) as caught, store:  # type: ignore[attr-defined]
        raise AssertionError("the body must not run")
    error = caught.value
    assert isinstance(error, TypeError)  # what Python raises for a missing __enter__
    assert "is asynchronous: open it with `async with open_store(url, asynchronous=True)" in (
        str(error)
    )

    async def main() -> int:
        async with store:
            session = store.session(session_id)
            await session.add_message(Message("user", "hi"))
            return len(await session.get_messages())

    assert asyncio.run(main()) == 1


def test_async_with_on_a_sync_store_says_with(url: str, session_id: str) -> None:
    store = open_store(url)

    async def misuse() -> None:
        async with store:  # type: ignore[attr-defined]
            raise AssertionError("the body must not run")

    with pytest.raises(UserError) as caught:
        asyncio.run(misuse())
    error = caught.value
    assert isinstance(error, TypeError)
    assert "is synchronous: open it with `with open_store(url) as store:`" in str(error)
    assert "asynchronous=True" in str(error)  # how to get a store for async with
    with store:
        store.session(session_id).add_message(Message("user", "hi"))
        assert len(store.session(session_id).get_messages()) == 1


def test_the_message_hides_a_password_in_the_url() -> None:
    store = open_store("redis://:Zq9secret@127.0.0.1:1/0", asynchronous=True)
    with pytest.raises(UserError) as caught, store:  # type: ignore[attr-defined]
        pass
    assert "Zq9secret" not in str(caught.value) and "***" in str(caught.value)
