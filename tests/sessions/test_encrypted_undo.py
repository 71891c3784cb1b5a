"""undo through EncryptedSession: the removed turn comes back decrypted, the chain of what
stays still checks, and appends after it chain on. What an undo may remove (the newest
records) reads like a history cut short at its end; records removed, put back or moved
anywhere else are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from aniki import InMemorySession, Message, StoreUnavailableError, UserError
from aniki.sessions import AsyncSQLiteSession, EncryptedSession, SQLiteSession
from aniki.sessions.encrypted import AlteredDataError

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


def rewrite(inner: SQLiteSession, records: list[Message]) -> None:
    """What someone with write access to the store (and no key) does: store other records."""
    inner.clear()
    inner.add_messages(records)


def reads(inner: SQLiteSession, key: str, limit: int | None = None) -> list[str]:
    fresh = EncryptedSession(SQLiteSession(inner.id, inner.path), key)
    return [m.content for m in fresh.get_messages(limit)]


def test_an_undone_turn_put_back_after_later_records_is_refused(tmp_path: Path) -> None:
    key = EncryptedSession.generate_key()
    inner = SQLiteSession("s", tmp_path / "chat.db")
    session = EncryptedSession(inner, key)
    session.add_messages(TURNS)
    kept = list(inner.get_messages()[2:])  # the undone records' ciphertext, kept aside
    session.undo()
    session.add_message(Message("user", "and my name?"))
    rewrite(inner, [*inner.get_messages(), *kept])
    with pytest.raises(AlteredDataError, match=r"message 3 .* right after the record before it"):
        reads(inner, key)
    with pytest.raises(AlteredDataError, match="right after the record before it"):
        reads(inner, key, limit=2)


@pytest.mark.parametrize("removed", [0, 1, 2])
def test_a_record_removed_from_anywhere_but_the_end_is_refused(
    tmp_path: Path, removed: int
) -> None:
    key = EncryptedSession.generate_key()
    inner = SQLiteSession("s", tmp_path / "chat.db")
    EncryptedSession(inner, key).add_messages(TURNS)
    records = list(inner.get_messages())
    rewrite(inner, records[:removed] + records[removed + 1 :])
    with pytest.raises(AlteredDataError, match=f"message {removed} "):
        reads(inner, key)
    with pytest.raises(AlteredDataError):
        reads(inner, key, limit=len(TURNS) - 1 - removed)


def test_two_records_swapped_are_refused(tmp_path: Path) -> None:
    key = EncryptedSession.generate_key()
    inner = SQLiteSession("s", tmp_path / "chat.db")
    EncryptedSession(inner, key).add_messages(TURNS)
    records = list(inner.get_messages())
    records[1], records[2] = records[2], records[1]
    rewrite(inner, records)
    with pytest.raises(AlteredDataError):
        reads(inner, key)


def test_records_cut_off_the_end_read_like_an_undo(tmp_path: Path) -> None:
    # Nothing outside the store records how long a history was: cutting its newest records
    # off leaves what an undo leaves, a whole chain, and reads as the shorter history.
    key = EncryptedSession.generate_key()
    inner = SQLiteSession("s", tmp_path / "chat.db")
    session = EncryptedSession(inner, key)
    session.add_messages(TURNS)
    rewrite(inner, list(inner.get_messages()[:3]))
    assert reads(inner, key) == [m.content for m in TURNS[:3]]
    session.add_message(Message("assistant", "after the cut"))  # and the chain goes on
    assert reads(inner, key) == [*(m.content for m in TURNS[:3]), "after the cut"]


class RefusingStore(InMemorySession):
    """Offers the append-after check, and finds another record last every time."""

    def _add_after(
        self,
        messages: list[Message],
        after: str | None,
        *,
        read: bool = False,
        limit: int | None = None,
    ) -> None:
        return None


def test_an_append_that_keeps_losing_the_race_gives_up_writing_nothing() -> None:
    inner = RefusingStore("busy")
    session = EncryptedSession(inner, EncryptedSession.generate_key())
    with pytest.raises(StoreUnavailableError, match="'busy' changed 64 times in a row"):
        session.add_message(Message("user", "hello"))
    assert inner.get_messages() == ()


class IdlessStore(InMemorySession):
    """Offers the check, but its records carry no ids (stored before ids existed)."""

    def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        return tuple(
            Message(m.role, m.content, tool_calls=m.tool_calls, tool_call_id=m.tool_call_id)
            for m in super().get_messages(limit)
        )

    def _add_after(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("no id to name: the batch is appended without the check")


def test_a_last_record_without_an_id_is_appended_after_unchecked() -> None:
    inner = IdlessStore("old")
    key = EncryptedSession.generate_key()
    inner.add_messages(EncryptedSession(inner, key)._chain.seal(TURNS[:1], ()))
    session = EncryptedSession(inner, key)
    session.add_message(TURNS[1])
    assert session.get_messages() == tuple(TURNS[:2])
