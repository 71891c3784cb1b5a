"""undo through EncryptedSession: the removed turn comes back decrypted, the chain of what
stays still checks, and appends after it chain on."""

from __future__ import annotations

from pathlib import Path

import pytest

from aniki import Message, UserError
from aniki.sessions import AsyncSQLiteSession, EncryptedSession, SQLiteSession

TURNS = [
    Message("user", "my card ends in 4242"),
    Message("assistant", "noted"),
    Message("user", "and my address?"),
    Message("assistant", "not given yet"),
]


def test_undo_returns_plaintext_and_the_chain_goes_on(tmp_path: Path) -> None:
    key = EncryptedSession.generate_key()
    inner = SQLiteSession("s", tmp_path / "chat.db")
    session = EncryptedSession(inner, key)
    session.add_messages(TURNS)
    removed = session.undo()
    assert removed == tuple(TURNS[2:])
    assert all("address" not in m.content for m in inner.get_messages())  # still sealed
    session.add_message(Message("user", "and my name?"))
    reopened = EncryptedSession(SQLiteSession("s", tmp_path / "chat.db"), key)
    assert reopened.get_messages() == (*TURNS[:2], Message("user", "and my name?"))
    assert [m.id for m in reopened.get_messages()] == [m.id for m in inner.get_messages()]


async def test_undo_over_an_async_store(tmp_path: Path) -> None:
    session = EncryptedSession(
        AsyncSQLiteSession("s", tmp_path / "chat.db"), EncryptedSession.generate_key()
    )
    await session.add_messages(TURNS)
    assert await session.undo() == tuple(TURNS[2:])
    assert await session.get_messages() == tuple(TURNS[:2])


def test_a_store_without_undo_says_so() -> None:
    class Plain:
        id = "p"

        def add_message(self, message: object) -> None: ...
        def get_messages(self) -> tuple[Message, ...]:
            return ()

        def clear(self) -> None: ...

    with pytest.raises(UserError, match="has no undo"):
        EncryptedSession(Plain(), EncryptedSession.generate_key()).undo()
