"""The file store's info and listing beyond the conformance suite: directories written by the
previous aniki, the index by owner and tag (and how it heals), the kept count, the order of
sessions written at one moment, and bad input (prune and delete: test_file_prune.py)."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from aniki import CorruptStoreError, Message, StoreError, UserError
from aniki._stamps import stamp
from aniki.sessions import AsyncFileSession, FileSession, FileStore, open_store
from aniki.sessions.base import SessionInfo
from aniki.sessions.file import _info, _listing, _record
from aniki.sessions.file._format import file_stem, header, record_line

FIXTURES = Path(__file__).parent / "fixtures" / "v1" / "files"


def _user(text: str) -> Message:
    return Message("user", text)


def _said(text: str) -> Message:
    return Message("assistant", text)


def _texts(messages: tuple[Message, ...] | list[Message]) -> list[str]:
    return [str(m.content) for m in messages]


def _document(directory: Path, session_id: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(
        (directory / f"{file_stem(session_id)}.meta.json").read_bytes()
    )
    return loaded


# --- a directory written by the previous aniki ---------------------------------------------


def test_a_directory_of_the_previous_aniki_is_listed_as_it_is(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES, tmp_path / "v1")
    directory = tmp_path / "v1"
    # A session of the previous aniki whose messages carry ids and times, and a meta file.
    stamped = stamp([_user("first"), _said("second")])
    later = stamp([_user("third")])
    (directory / "gamma.jsonl").write_bytes(
        header("gamma", 0) + record_line(stamped) + record_line(later)
    )
    (directory / "gamma.meta.json").write_text(
        '{"aniki": "meta", "generation": 0, "values": {"k": 1}}'
    )
    before = {path.name: path.read_bytes() for path in directory.iterdir()}
    base = int(datetime.now(timezone.utc).timestamp()) + 1000  # after the messages' times
    for name, when in (("alpha", 100), ("beta", 200), ("gamma", 300)):
        os.utime(directory / f"{name}.jsonl", (base + when,) * 2)
    listed = FileStore(directory).list_sessions()
    assert [(i.id, i.message_count) for i in listed] == [("gamma", 3), ("beta", 2), ("alpha", 4)]
    assert listed[0].updated_at == datetime.fromtimestamp(base + 300, timezone.utc)
    assert listed[0].created_at == stamped[0].created_at  # the first message's time
    assert listed[2].created_at is None  # its messages carry no time: none is known
    assert (listed[0].title, listed[0].owner, listed[0].tags) == (None, None, ())
    assert FileSession("gamma", directory).info() == listed[0]
    # Reading and listing changed nothing on disk.
    assert {path.name: path.read_bytes() for path in directory.iterdir()} == before
    # The first set_info writes the new layout; the old meta values still hold.
    gamma = FileSession("gamma", directory)
    gamma.set_info(owner="u")
    assert gamma.get_meta("k") == 1
    assert gamma.info().created_at == stamped[0].created_at
    assert [i.id for i in FileStore(directory).list_sessions(owner="u")] == ["gamma"]
    alpha = FileSession("alpha", directory)
    assert alpha.get_meta("aniki.summary") == {"text": "adding numbers", "covers": 2}
    alpha.add_message(_user("after the upgrade"))
    assert alpha.info().message_count == 5


# --- the index ------------------------------------------------------------------------------


def test_set_info_keeps_markers_in_step(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.set_info(owner="user-7", tags=["b", "a"])
    index = tmp_path / ".index"
    assert (index / "owner" / file_stem("user-7") / "s").is_file()
    assert {p.parent.name for p in index.glob("tag/*/s")} == {"a", "b"}
    session.set_info(owner="Other One", tags=["b"])
    assert not (index / "owner" / file_stem("user-7")).exists()  # its empty folder goes too
    assert (index / "owner" / file_stem("Other One") / "s").is_file()
    assert {p.parent.name for p in index.glob("tag/*/s")} == {"b"}
    session.clear()
    assert list(index.rglob("s")) == []
    assert FileStore(tmp_path).list_sessions(owner="Other One") == []


def test_listing_by_owner_reads_only_that_owners_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileStore(tmp_path)
    for number in range(120):
        session = store.session(f"other-{number}")
        session.add_message(_user("x"))
        if number % 3 == 0:
            session.set_info(owner=f"someone-{number}", tags=["pinned"])
    mine = [store.session(f"mine-{number}") for number in range(5)]
    for session in mine:
        session.set_info(owner="me", tags=["pinned"] if session.id != "mine-0" else [])
        session.add_message(_user("mine"))
        # A page reads on past its last session while the next is written within SKEW of it.
        time.sleep(_listing.SKEW.total_seconds() + 0.005)
    opened: list[Path] = []
    real = _listing.held

    def counting(path: Path, **options: Any) -> Any:
        opened.append(path)
        return real(path, **options)

    monkeypatch.setattr(_listing, "held", counting)
    monkeypatch.setattr(_listing, "_every", lambda directory: pytest.fail("a directory scan"))
    listed = store.list_sessions(owner="me")
    assert [info.id for info in listed] == [s.id for s in reversed(mine)]
    assert sorted(p.name for p in opened) == sorted(f"{s.id}.jsonl" for s in mine)
    opened.clear()
    assert [i.id for i in store.list_sessions(owner="me", tag="pinned")] == [
        s.id for s in reversed(mine[1:])
    ]
    assert len(opened) == 4
    opened.clear()
    assert [i.id for i in store.list_sessions(owner="me", limit=2)] == ["mine-4", "mine-3"]
    assert len(opened) == 2


def test_a_marker_left_by_a_crash_is_ignored_and_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = FileSession("s", tmp_path)
    session.set_info(owner="before")
    session.add_message(_user("hi"))

    def dies(*args: Any, **kwargs: Any) -> None:
        raise OSError("the process died here")

    monkeypatch.setattr(_info, "write", dies)  # after the new marker, before the meta file
    with pytest.raises(StoreError):
        session.set_info(owner="after")
    monkeypatch.undo()
    marker = tmp_path / ".index" / "owner" / "after" / "s"
    assert marker.exists() and session.info().owner == "before"
    store = FileStore(tmp_path)
    assert store.list_sessions(owner="after") == []
    assert not marker.exists()
    assert [info.id for info in store.list_sessions(owner="before")] == ["s"]
    # A marker whose session file is gone (deleted by hand) goes the same way.
    ghost = tmp_path / ".index" / "owner" / "before" / "ghost"
    ghost.touch()
    assert [info.id for info in store.list_sessions(owner="before")] == ["s"]
    assert not ghost.exists()
    assert store.delete_sessions(owner="after") == 0


def test_fork_copies_the_info_into_the_index_and_an_import_drops_it(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.set_info(title="t", owner="o", tags=["x"])
    session.add_messages([_user("a"), _said("b")])
    session.fork("child")
    store = FileStore(tmp_path)
    assert [i.id for i in store.list_sessions(owner="o")] == ["child", "s"]
    assert [i.id for i in store.list_sessions(tag="x")] == ["child", "s"]
    imported = stamp([_user("imported")], keep=True)
    FileSession("child", tmp_path)._replace(imported)  # clear() then add: the info goes
    info = FileSession("child", tmp_path).info()
    assert (info.owner, info.message_count, info.created_at) == (None, 1, imported[0].created_at)
    assert [i.id for i in store.list_sessions(owner="o")] == ["s"]
    assert not (tmp_path / ".index" / "owner" / "o" / "child").exists()


# --- the count --------------------------------------------------------------------------------


def test_a_listing_decodes_only_what_was_appended_since_the_kept_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = FileSession("s", tmp_path)
    line = "x" * 1000
    for number in range(600):  # ~660 KiB: the count is kept at least twice on the way
        session.add_message(_user(f"{number} {line}"))
    kept = _document(tmp_path, "s")["count"]
    size = session.path.stat().st_size
    assert 0 < size - kept[1] <= _record.COUNT_EVERY
    decoded: list[bytes] = []
    real = _info.decode_messages

    def counting(data: bytes, *, store: str) -> list[Message]:
        decoded.append(data)
        return real(data, store=store)

    monkeypatch.setattr(_info, "decode_messages", counting)
    (listed,) = FileStore(tmp_path).list_sessions()
    assert listed.message_count == 600
    assert len(decoded) == 600 - kept[0]  # the lines past the count, no more


def _count_everywhere(session: FileSession, expected: int) -> None:
    assert session.info().message_count == expected
    assert FileSession(session.id, session.path.parent).info().message_count == expected
    listed = FileStore(session.path.parent).list_sessions()
    assert {i.id: i.message_count for i in listed}.get(session.id, 0) == expected
    assert len(FileSession(session.id, session.path.parent).get_messages()) == expected


def test_the_count_holds_through_every_write(tmp_path: Path) -> None:
    big = "y" * 8000
    session = FileSession("s", tmp_path)
    session.set_info(title="counted")
    for number in range(40):  # past COUNT_EVERY, so a count is kept
        session.add_messages([_user(f"q{number} {big}"), _said(f"a{number}")])
    assert "count" in _document(tmp_path, "s")
    _count_everywhere(session, 80)
    # Undo inside a batch (a new file): the count kept past the cut is moved before it.
    session.add_messages([_user("u1"), _said("r1"), _user("u2"), _said("r2")])
    session.undo()
    _count_everywhere(session, 82)
    assert _document(tmp_path, "s")["count"][1] <= session.path.stat().st_size
    # Undo of a line (a cut, generation bumped).
    session.add_message(_user("u3"))
    session.undo()
    _count_everywhere(session, 82)
    # Appends from another instance, with read, and after a message.
    other = FileSession("s", tmp_path)
    other.add_messages([_user("o1")])
    last = other.get_messages()[-1].id
    assert other._add_after([_said("o2")], last, read=True) is not None
    _count_everywhere(session, 84)
    child = session.fork("child")
    _count_everywhere(child, 84)
    session.clear()
    _count_everywhere(session, 0)
    assert session.info() == SessionInfo("s", 0, None)


def test_a_count_that_no_longer_fits_the_file_is_not_trusted(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.set_info(title="t")
    session.add_messages([_user("a"), _said("b")])
    document = _document(tmp_path, "s")
    document["count"] = [50, 7]  # an offset inside the header: not a line's end
    (tmp_path / "s.meta.json").write_text(json.dumps(document))
    assert session.info().message_count == 2
    document["count"] = [50, 10**9]  # past the end of the file
    (tmp_path / "s.meta.json").write_text(json.dumps(document))
    assert session.info().message_count == 2
    document["count"] = "many"
    (tmp_path / "s.meta.json").write_text(json.dumps(document))
    with pytest.raises(CorruptStoreError, match="count is damaged"):
        session.info()


# --- order ------------------------------------------------------------------------------------


def test_sessions_written_at_the_same_moment_are_ordered_by_id_across_pages(
    tmp_path: Path,
) -> None:
    ids = ["b", "A", "a", "c-1", "x" * 400, "é"]
    moment = (int(datetime.now(timezone.utc).timestamp()) + 1000) * 10**9  # after each created
    for session_id in ids:
        session = FileSession(session_id, tmp_path)
        session.set_info(owner="o")
        os.utime(session.path, ns=(moment, moment))
    store = FileStore(tmp_path)
    expected = sorted(ids)
    assert [i.id for i in store.list_sessions()] == expected
    pages: list[str] = []
    cursor = None
    while page := store.list_sessions(owner="o", limit=4, cursor=cursor):
        pages += [i.id for i in page]
        cursor = page[-1]
    assert pages == expected


# --- refusals ------------------------------------------------------------------------------


def test_bad_input_is_refused_before_any_io(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "never")
    refused: list[Callable[[], object]] = [
        lambda: store.list_sessions(limit=0),
        lambda: store.list_sessions(owner=""),
        lambda: store.list_sessions(updated_after=datetime(2026, 1, 1)),
        lambda: store.list_sessions(cursor="s"),  # type: ignore[arg-type]
        lambda: store.list_sessions(order="created"),  # type: ignore[arg-type]
        lambda: store.prune(older_than=timedelta(0)),
        lambda: store.prune(older_than=30),  # type: ignore[arg-type]
        lambda: store.prune(older_than=timedelta(days=1), owner=""),
        lambda: store.delete_sessions(owner="nul\x00"),
        lambda: store.session("s").set_info(tags="one"),
        lambda: store.session("s").set_info(title="x" * 1001),
    ]
    for call in refused:
        with pytest.raises(UserError):
            call()
    assert not (tmp_path / "never").exists()


# --- the rest -------------------------------------------------------------------------------


def test_a_damaged_session_is_reported_by_an_owner_listing(tmp_path: Path) -> None:
    good, bad = FileSession("good", tmp_path), FileSession("bad", tmp_path)
    for session in (good, bad):
        session.set_info(owner="o")
        session.add_message(_user("x"))
    bad.path.write_bytes(bad.path.read_bytes() + b"{not json}\n")
    problems: list[StoreError] = []
    listed = FileStore(tmp_path).list_sessions(owner="o", problems=problems)
    assert [i.id for i in listed] == ["good"]
    assert [type(p) for p in problems] == [CorruptStoreError]
    with pytest.raises(CorruptStoreError):
        bad.info()


async def test_the_async_twin_and_an_async_store(tmp_path: Path) -> None:
    session = AsyncFileSession("s", tmp_path)
    await session.set_info(title="t", owner="o")
    await session.add_message(_user("hi"))
    info = await session.info()
    assert (info.title, info.owner, info.message_count) == ("t", "o", 1)
    with pytest.raises(UserError):
        await session.set_info(owner="")
    async with open_store(tmp_path.as_uri(), asynchronous=True) as store:
        assert await store.list_sessions(owner="o") == [info]
        assert await store.delete_sessions(owner="o") == 1
        assert await store.list_sessions() == []
    await session.aclose()
