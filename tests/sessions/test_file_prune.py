"""The file store's prune and delete beyond the conformance suite: whole sessions removed in
batches, only the owner's, and appends racing a prune."""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from aniki import Message
from aniki.sessions import FileSession, FileStore
from aniki.sessions.file import _prune
from aniki.sessions.file._format import file_stem


def _user(text: str) -> Message:
    return Message("user", text)


def _said(text: str) -> Message:
    return Message("assistant", text)


def _texts(messages: tuple[Message, ...]) -> list[str]:
    return [str(m.content) for m in messages]


def _age(session: FileSession, days: float) -> None:
    """Make the session look written ``days`` ago: its file's time, and the creation time
    its info keeps (``updated_at`` is never before ``created_at``)."""
    when = (datetime.now(timezone.utc) - timedelta(days=days)).timestamp()
    meta = session.path.with_name(file_stem(session.id) + ".meta.json")
    if meta.exists():
        document = json.loads(meta.read_bytes())
        if "info" in document:
            document["info"]["created"] = when
            meta.write_text(json.dumps(document))
    os.utime(session.path, (when, when))


def test_prune_removes_in_batches_and_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for number in range(250):
        session = FileSession(f"old-{number}", tmp_path)
        session.add_message(_user("old"))
        if number % 2:
            session.set_info(owner="o", tags=["t"])
        _age(session, 40)
    fresh = FileSession("fresh", tmp_path)
    fresh.add_message(_user("new"))
    batches: list[int] = []
    real = _prune.remove_batch

    def counting(directory: Path, batch: list[Any], **options: Any) -> int:
        batches.append(len(batch))
        return real(directory, batch, **options)

    monkeypatch.setattr(_prune, "remove_batch", counting)
    assert FileStore(tmp_path).prune(older_than=timedelta(days=30)) == 250
    assert batches == [100, 100, 50]
    # The folders by owner and tag went with their last markers; the index by update time
    # keeps the fresh session's.
    assert sorted(p.name for p in tmp_path.iterdir()) == [".index", "fresh.jsonl"]
    assert [p.name for p in (tmp_path / ".index").iterdir()] == ["updated"]
    assert [i.id for i in FileStore(tmp_path).list_sessions()] == ["fresh"]


def test_prune_by_owner_and_delete_remove_only_that_owners_sessions(tmp_path: Path) -> None:
    store = FileStore(tmp_path, durability="full")
    for owner in ("a", "b"):
        for age in (40, 1):
            session = store.session(f"{owner}-{age}")
            session.set_info(owner=owner)
            session.add_message(_user(owner))
            session.set_meta("summary", "kept beside it")
            _age(session, age)
    assert store.prune(older_than=timedelta(days=30), owner="a") == 1
    assert sorted(i.id for i in store.list_sessions()) == ["a-1", "b-1", "b-40"]
    assert FileSession("a-40", tmp_path).get_meta("summary") is None
    assert store.delete_sessions(owner="b") == 2
    assert [i.id for i in store.list_sessions()] == ["a-1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".index", "a-1.jsonl", "a-1.meta.json"]


def test_appends_racing_a_prune_leave_each_session_whole_or_gone(tmp_path: Path) -> None:
    count = 80
    writers = [FileSession(f"s{number}", tmp_path) for number in range(count)]
    for number, session in enumerate(writers):
        session.set_info(owner="o", title="whole")
        session.add_messages([_user("one"), _said("two")])
        session.get_messages()  # cached: the next append takes the fast path
        _age(session, 40 - number / 100)  # the prune goes from s0 up, the appends from the top
    errors: list[BaseException] = []
    started = threading.Barrier(2)

    def append() -> None:
        try:
            started.wait()
            for session in reversed(writers):  # they meet the prune part of the way
                session.add_message(_user("late"))
                time.sleep(0.0005)
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=append)
    thread.start()
    started.wait()
    removed = FileStore(tmp_path).prune(older_than=timedelta(days=30))
    thread.join()
    assert not errors
    kept = 0
    for session in writers:
        info = FileSession(session.id, tmp_path).info()
        texts = _texts(FileSession(session.id, tmp_path).get_messages())
        if texts[:2] == ["one", "two"]:  # kept: appended to before the prune reached it
            assert texts == ["one", "two", "late"] and info.title == "whole"
            kept += 1
        else:  # removed whole; the late append came after it, and started a new session
            assert texts == ["late"] and info.title is None and info.owner is None
    assert removed + kept == count
