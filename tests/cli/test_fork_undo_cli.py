"""``aniki sessions fork`` and ``aniki sessions undo``, run as a user runs them."""

from __future__ import annotations

from pathlib import Path

from aniki import Message
from aniki.sessions.sqlite import SQLiteSession

from .test_cli import EXIT_FAILED, EXIT_USAGE, aniki, store_path


def _stored(home: Path, session_id: str) -> tuple[Message, ...]:
    return SQLiteSession(session_id, path=store_path(home)).get_messages()


async def test_fork_whole_and_upto_a_message(tmp_path: Path) -> None:
    session = SQLiteSession("chat", path=store_path(tmp_path))
    session.add_messages(
        [Message("user", "one"), Message("assistant", "1"), Message("user", "two")]
    )
    original = session.get_messages()

    code, out, err = await aniki(tmp_path, "sessions", "show", "chat")
    assert code == 0 and all(m.id is not None and m.id in out for m in original), err

    code, out, err = await aniki(tmp_path, "sessions", "fork", "chat", "whole")
    assert code == 0 and "3 messages" in out, err
    assert _stored(tmp_path, "whole") == original
    assert [m.id for m in _stored(tmp_path, "whole")] == [m.id for m in original]

    upto = original[1].id
    assert upto is not None
    code, out, err = await aniki(tmp_path, "sessions", "fork", "chat", "part", "--upto", upto)
    assert code == 0 and "2 messages" in out, err
    assert _stored(tmp_path, "part") == original[:2]

    code, _, err = await aniki(tmp_path, "sessions", "fork", "chat", "whole")
    assert code == EXIT_USAGE and "already holds messages" in err
    code, _, err = await aniki(tmp_path, "sessions", "fork", "chat", "x", "--upto", "nope")
    assert code == EXIT_USAGE and "no message with id 'nope'" in err
    assert _stored(tmp_path, "x") == ()
    code, _, err = await aniki(tmp_path, "sessions", "fork", "missing", "y")
    assert code == EXIT_FAILED and "no session 'missing'" in err
    assert _stored(tmp_path, "chat") == original


async def test_undo_asks_first_and_removes_the_last_turn(tmp_path: Path) -> None:
    session = SQLiteSession("chat", path=store_path(tmp_path))
    turns = [
        Message("user", "one"),
        Message("assistant", "1"),
        Message("user", "two"),
        Message("assistant", "2"),
    ]
    session.add_messages(turns)

    code, _, err = await aniki(tmp_path, "sessions", "undo", "chat")  # no terminal to ask on
    assert code == EXIT_USAGE and "--yes" in err
    assert _stored(tmp_path, "chat") == tuple(turns)

    code, out, err = await aniki(tmp_path, "sessions", "undo", "chat", "--yes")
    assert code == 0 and "removed 2 messages" in out and "two" in out, err
    assert _stored(tmp_path, "chat") == tuple(turns[:2])

    SQLiteSession("quiet", path=store_path(tmp_path)).add_message(Message("system", "rules"))
    code, _, err = await aniki(tmp_path, "sessions", "undo", "quiet", "--yes")
    assert code == EXIT_FAILED and "no user message" in err
