"""An import into a file session (``_replace``, what ``aniki sessions import --replace`` and
``copy --replace`` use) does what it does on SQLite: ``clear()`` then an append, in one step,
so the title, owner and tags go with the old history; and an empty import (what ``aniki
sessions rm`` makes) leaves a session that is listed nowhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aniki import Message
from aniki.cli._stores import replace_messages
from aniki.sessions import FileSession, FileStore, SQLiteSession, SQLiteStore


def _stores(tmp_path: Path) -> dict[str, tuple[Any, Any, str]]:
    return {
        "file": (FileSession("s", tmp_path / "files"), FileStore(tmp_path / "files"), "file:"),
        "sqlite": (
            SQLiteSession("s", tmp_path / "chat.db"),
            SQLiteStore(tmp_path / "chat.db"),
            "sqlite:///",
        ),
    }


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_an_import_drops_the_info_with_the_old_history(tmp_path: Path, kind: str) -> None:
    session, store, _ = _stores(tmp_path)[kind]
    session.add_message(Message("user", "old"))
    session.set_info(title="Trip", owner="u1", tags=["travel"])
    session._replace([Message("user", "imported")])
    info = session.info()
    assert (info.message_count, info.title, info.owner, info.tags) == (1, None, None, ())
    assert store.list_sessions(owner="u1") == store.list_sessions(tag="travel") == []
    assert [i.id for i in store.list_sessions(limit=5)] == ["s"]


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_an_empty_import_leaves_nothing_listed(tmp_path: Path, kind: str) -> None:
    session, store, scheme = _stores(tmp_path)[kind]
    session.add_message(Message("user", "old"))
    session.set_info(title="Trip", owner="u1")
    target = tmp_path / ("files" if kind == "file" else "chat.db")
    replace_messages(f"{scheme}{target}", "s", [])  # `aniki sessions rm s`
    assert store.list_sessions() == store.list_sessions(limit=5) == []
    assert store.list_sessions(owner="u1") == []
