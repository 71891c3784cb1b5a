"""``aniki sessions list --owner``, ``rm --owner`` and ``prune``, run as a user runs them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click
import pytest

from aniki import Message
from aniki.cli.retention_cmd import parse_age
from aniki.sessions.sqlite import SQLiteSession

from .test_cli import EXIT_USAGE, aniki, store_path


def _chat(home: Path, session_id: str, owner: str, title: str) -> SQLiteSession:
    session = SQLiteSession(session_id, path=store_path(home))
    session.set_info(owner=owner, title=title)
    session.add_message(Message("user", f"hello from {session_id}"))
    return session


async def test_list_filters_by_owner_and_shows_titles(tmp_path: Path) -> None:
    _chat(tmp_path, "a", "ann", "Plans [bold]not markup[/bold]")
    _chat(tmp_path, "b", "bob", "Bob's chat")
    code, out, err = await aniki(tmp_path, "sessions", "list", "--owner", "ann")
    assert code == 0, err
    assert "Plans [bold]not markup[/bold]" in out and "ann" in out
    assert "Bob's chat" not in out
    code, out, err = await aniki(tmp_path, "sessions", "list", "--owner", "nobody")
    assert code == 0 and "no sessions" in out, err


async def test_rm_owner_asks_then_removes_every_session_of_the_owner(tmp_path: Path) -> None:
    for name in ("a1", "a2", "a3"):
        _chat(tmp_path, name, "ann", name)
    _chat(tmp_path, "b1", "bob", "b1")
    code, _, err = await aniki(tmp_path, "sessions", "rm", "--owner", "ann")  # no terminal
    assert code == EXIT_USAGE and "--yes" in err
    assert SQLiteSession("a1", path=store_path(tmp_path)).get_messages()
    code, out, err = await aniki(tmp_path, "sessions", "rm", "--owner", "ann", "--yes")
    assert code == 0 and "deleted 3 sessions" in out, err
    for name in ("a1", "a2", "a3"):
        gone = SQLiteSession(name, path=store_path(tmp_path))
        assert gone.get_messages() == () and gone.info().owner is None
    assert SQLiteSession("b1", path=store_path(tmp_path)).info().owner == "bob"
    code, _, err = await aniki(tmp_path, "sessions", "rm", "b1", "--owner", "bob", "--yes")
    assert code == EXIT_USAGE and "one of them" in err


async def test_prune_removes_only_sessions_older_than_the_age(tmp_path: Path) -> None:
    _chat(tmp_path, "old", "ann", "old")
    await asyncio.sleep(2.2)
    _chat(tmp_path, "new", "ann", "new")
    code, out, err = await aniki(tmp_path, "sessions", "prune", "--older-than", "2s", "--yes")
    assert code == 0 and "deleted 1 sessions" in out, err
    assert SQLiteSession("old", path=store_path(tmp_path)).get_messages() == ()
    assert SQLiteSession("new", path=store_path(tmp_path)).get_messages()
    code, _, err = await aniki(tmp_path, "sessions", "prune", "--older-than", "soon")
    assert code == EXIT_USAGE and "30d" in err


def test_ages_are_read_with_their_unit() -> None:
    assert parse_age("30d").days == 30
    assert parse_age(" 12h ").total_seconds() == 12 * 3600
    assert parse_age("2w").days == 14
    for bad in ("0d", "5", "d", "1.5h", "-3d"):
        with pytest.raises(click.BadParameter):
            parse_age(bad)
