"""The file store's index by update time (``.index/updated/``), which serves a page of the
newest sessions: every write that moves a file's time keeps its marker in step, a page reads
only the newest folders, a store without the index is listed from the directory and indexed
on the way, and markers left by a crash or a removal are healed by the listings that meet
them."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from aniki import Message
from aniki.sessions import FileSession, FileStore
from aniki.sessions._catalog import from_timestamp
from aniki.sessions.base import SessionInfo
from aniki.sessions.file import _listing, _timeline
from aniki.sessions.file._format import file_stem

TICK_S = _timeline.TICK / 1e9


def _user(text: str) -> Message:
    return Message("user", text)


def _said(text: str) -> Message:
    return Message("assistant", text)


def _marked(directory: Path) -> dict[str, set[int]]:
    """Each session's markers: the ticks of the folders it is marked in."""
    found: dict[str, set[int]] = {}
    root = directory / ".index" / "updated"
    for path in root.glob("*/*/*/*"):
        found.setdefault(path.name, set()).add(int(path.parent.name))
    return found


def _tick(path: Path) -> int:
    return os.stat(path).st_mtime_ns // _timeline.TICK


def _in_step(directory: Path) -> dict[str, int]:
    """Assert every session file is marked once, at its time's tick (or the next, when the
    file system's coarser clock stamped a write just before the tick marked); the ticks."""
    ticks = {p.name.removesuffix(".jsonl"): _tick(p) for p in directory.glob("*.jsonl")}
    marked = _marked(directory)
    assert marked.keys() == ticks.keys()
    for stem, tick in ticks.items():
        assert len(marked[stem]) == 1 and min(marked[stem]) - tick in (0, 1), stem
    return ticks


def _next_tick() -> None:
    """Wait into the next tick of the index."""
    time.sleep(TICK_S * 1.5)


def _early_in_a_tick() -> None:
    """Wait until 10 ms into a tick, with 80 ms of it left: a write made now is stamped in
    it (the kernel's clock, which stamps files, can lag Python's by a few ms, and would time
    a write at a tick's very start in the tick before), and so are many more after it."""
    into = time.time_ns() % _timeline.TICK
    time.sleep(((10_000_000 - into) % _timeline.TICK) / 1e9)


def _pages(store: FileStore, size: int) -> list[SessionInfo]:
    """Every session, a page of ``size`` at a time, each page after the one before."""
    listed: list[SessionInfo] = []
    while True:
        page = store.list_sessions(limit=size, cursor=listed[-1] if listed else None)
        listed.extend(page)
        if len(page) < size:
            return listed


# --- kept in step by every write -------------------------------------------------------------


def test_appends_keep_one_marker_at_the_files_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = FileSession("s", tmp_path)
    _early_in_a_tick()  # else "a" may be stamped in the tick before, and "b" marked again
    session.add_message(_user("a"))
    first = _in_step(tmp_path)["s"]
    made: list[Path] = []
    real = _timeline._make

    def counting(path: Path, *, durable: bool) -> None:
        made.append(path)
        real(path, durable=durable)

    monkeypatch.setattr(_timeline, "_make", counting)
    began = time.time_ns() // _timeline.TICK
    for _ in range(200):
        session.add_message(_said("b"))
    passed = time.time_ns() // _timeline.TICK - began
    assert len(made) <= 2 * passed  # in a row, a marker only when a tick passes
    monkeypatch.undo()
    _next_tick()
    session.add_messages([_user("c"), _said("d")])
    assert _in_step(tmp_path)["s"] > first  # moved: the old marker removed


def test_every_edit_keeps_the_marker_in_step(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.add_messages([_user("a"), _said("b"), _user("c"), _said("d")])  # one line
    steps: list[tuple[str, Any]] = [
        ("set_info", lambda: session.set_info(title="t", owner="o")),
        ("undo inside a batch: a new file", session.undo),
        ("append", lambda: session.add_messages([_user("e"), _said("f")])),
        ("undo at a line: a cut", session.undo),
        ("fork", lambda: session.fork("child")),
        ("import", lambda: session._replace([_user("x"), _said("y")])),
        ("set_meta: not a write", lambda: session.set_meta("summary", "kept")),
    ]
    for name, step in steps:
        _next_tick()
        before = _in_step(tmp_path)
        step()
        after = _in_step(tmp_path)
        moved = "child" if name == "fork" else "s"
        assert (after[moved] > before.get(moved, 0)) == (name != "set_meta: not a write"), name
    FileSession("child", tmp_path).clear()  # listed no more: its marker goes
    assert set(_marked(tmp_path)) == {"s"}


def test_a_prune_and_a_delete_remove_the_markers(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    for n in range(4):
        session = store.session(f"s{n}")
        session.set_info(owner="a" if n % 2 else "b")
        session.add_message(_user("x"))
    assert store.delete_sessions(owner="a") == 2
    assert set(_in_step(tmp_path)) == {"s0", "s2"}
    time.sleep(0.01)
    assert store.prune(older_than=timedelta(microseconds=1)) == 2
    assert _marked(tmp_path) == {}


def test_a_write_stamped_in_a_later_tick_than_it_was_marked_for_is_marked_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = FileSession("s", tmp_path)
    session.add_message(_user("a"))
    _next_tick()
    past = time.time_ns() - 10 * _timeline.TICK  # the clock read before the write: long ago
    monkeypatch.setattr(_timeline.time, "time_ns", lambda: past)
    session.add_message(_user("b"))
    monkeypatch.undo()
    _in_step(tmp_path)  # the tick read then is not marked: the tick it was written in is


# --- the listing -----------------------------------------------------------------------------


def _spread(tmp_path: Path, count: int) -> FileStore:
    """``count`` sessions last written a second apart ("s0" oldest), indexed at those times."""
    store = FileStore(tmp_path)
    now = time.time()
    for n in range(count):
        when = now - count + n
        session = store.session(f"s{n}")  # its message as old as its file
        session._replace([Message("user", f"{n}", created_at=from_timestamp(when - 0.5))])
        os.utime(session.path, (when, when))
    shutil.rmtree(tmp_path / ".index" / "updated")  # indexed again, at the times set
    assert [i.id for i in store.list_sessions(limit=1)] == [f"s{count - 1}"]
    _in_step(tmp_path)
    return store


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sessions whose time a listing looked at through the index."""
    seen: list[str] = []
    real = _timeline._stat

    def checking(directory: str, stem: str) -> int | None:
        seen.append(stem)
        return real(directory, stem)

    monkeypatch.setattr(_timeline, "_stat", checking)
    return seen


def test_a_page_of_the_newest_reads_only_the_newest_folders(
    tmp_path: Path, checked: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _spread(tmp_path, 200)

    def no_scan(*args: Any) -> Any:
        raise AssertionError("the directory was read")

    monkeypatch.setattr(_listing, "_every", no_scan)
    checked.clear()
    assert [i.id for i in store.list_sessions(limit=5)] == [f"s{n}" for n in range(199, 194, -1)]
    assert len(checked) <= 5 + _timeline._SLACK  # the newest folders only
    cursor = store.list_sessions(limit=100)[-1]
    after = store.list_sessions(limit=3, cursor=cursor)
    assert [i.id for i in after] == ["s99", "s98", "s97"]
    recent = store.list_sessions(updated_after=after[0].updated_at)
    assert [i.id for i in recent] == [f"s{n}" for n in range(199, 99, -1)]


def test_pages_through_the_index_list_what_the_directory_lists(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    for n in range(30):
        session = store.session(f"s{n % 17}")  # some written again, later
        session.add_message(_user(f"{n}"))
        if n % 5 == 0:
            session.set_info(title=f"t{n}")
        if n % 10 == 9:
            _next_tick()
    store.session("cleared").add_message(_user("gone"))
    store.session("cleared").clear()
    store.session("info only").set_info(owner="o")
    whole = store.list_sessions()  # from the directory, sorted by the listing rule
    assert len(whole) == 18 and "cleared" not in {i.id for i in whole}
    for size in (1, 4, 50):
        assert _pages(store, size) == whole
    assert (tmp_path / ".index" / "updated" / ".built").exists()


def test_a_store_without_the_index_is_listed_and_indexed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _spread(tmp_path, 20)
    shutil.rmtree(tmp_path / ".index")  # as an aniki before the index left it
    scans: list[int] = []
    real = _listing._every

    def scanning(directory: Path, timed: bool) -> Any:
        scans.append(1)
        return real(directory, timed)

    monkeypatch.setattr(_listing, "_every", scanning)
    assert [i.id for i in store.list_sessions(limit=3)] == ["s19", "s18", "s17"]
    assert [i.id for i in store.list_sessions(limit=3)] == ["s19", "s18", "s17"]
    assert scans == [1]  # the second one read the index
    _in_step(tmp_path)


def test_a_listing_of_no_directory_makes_none(tmp_path: Path) -> None:
    assert FileStore(tmp_path / "absent").list_sessions(limit=5) == []
    assert not (tmp_path / "absent").exists()


def test_markers_left_behind_are_healed_by_the_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _spread(tmp_path, 5)
    # A crash right after a write: the marker made before it stays, the old one too.
    monkeypatch.setattr(_timeline, "after", lambda *args, **options: None)
    _early_in_a_tick()  # stamped in the tick marked: else healing its old marker makes one
    store.session("s0").add_message(_said("late"))
    monkeypatch.undo()
    assert len(_marked(tmp_path)["s0"]) == 2
    # A crash before a write: the marker made for it stays, later than the file's time.
    tick = _tick(tmp_path / "s1.jsonl")
    _timeline._make(_timeline.marker(tmp_path, "s1", tick + 3), durable=False)
    # A session removed by hand (or by a prune that died): its marker stays.
    (tmp_path / "s2.jsonl").unlink()
    ids = [i.id for i in store.list_sessions(limit=10)]
    assert ids == ["s0", "s4", "s3", "s1"]
    marked = _marked(tmp_path)
    assert "s2" not in marked and len(marked["s0"]) == 1
    assert marked["s1"] == {tick, tick + 3}  # a marker too late is only met early


def test_a_file_touched_after_its_marker_is_moved_when_met(tmp_path: Path) -> None:
    store = _spread(tmp_path, 3)
    later = time.time() + 60
    os.utime(tmp_path / "s0.jsonl", (later, later))  # not through aniki: not marked then
    assert [i.id for i in store.list_sessions(limit=5)] == ["s0", "s2", "s1"]
    _in_step(tmp_path)  # the walk met s0's marker, too early, and moved it
    assert [i.id for i in store.list_sessions(limit=1)] == ["s0"]


def test_writers_and_listings_at_once_keep_the_index_whole(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    for n in range(6):
        store.session(f"w{n}").add_message(_user("start"))
    stop, errors = threading.Event(), []

    def write(n: int) -> None:
        session = store.session(f"w{n}")
        try:
            while not stop.is_set():
                session.add_message(_user("more"))
                if n % 2:
                    session.undo()  # a cut: the file's time moves too
                time.sleep(0.003)
        except BaseException as error:
            errors.append(error)

    def listing() -> None:
        try:
            while not stop.is_set():
                page = store.list_sessions(limit=3)
                assert len({i.id for i in page}) == len(page) == 3
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(6)]
    threads += [threading.Thread(target=listing) for _ in range(2)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    stop.set()
    for thread in threads:
        thread.join()
    assert errors == []
    store.list_sessions(limit=10)  # heals a marker a listing made for a write under way
    _in_step(tmp_path)
    assert _pages(store, 2) == store.list_sessions()


def test_a_durable_store_syncs_a_new_markers_folder_before_the_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    monkeypatch.setattr(_timeline, "fsync_directory", lambda place: events.append("sync"))
    session = FileSession("s", tmp_path, durability="full")
    real = os.pwrite

    def writing(fd: int, data: Any, offset: int) -> int:
        events.append("write")
        return real(fd, data, offset)

    session.set_meta("k", 1)  # the file and its header first: not a listed session yet
    monkeypatch.setattr(os, "pwrite", writing)
    session.add_message(_user("a"))
    monkeypatch.undo()
    assert events[: events.index("write")].count("sync") >= 1
    _in_step(tmp_path)


def test_marker_names_are_the_session_file_names(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    for session_id in ("a/b", "..", "\u00e9t\u00e9", "x" * 300):
        store.session(session_id).add_message(_user("hi"))
    assert set(_marked(tmp_path)) == {
        file_stem(s) for s in ("a/b", "..", "\u00e9t\u00e9", "x" * 300)
    }
    assert len(store.list_sessions(limit=10)) == 4


# --- kill -9 -------------------------------------------------------------------------------

_WRITER = """
import sys, time
from aniki import Message
from aniki.sessions import FileSession
sessions = [FileSession(f"k{n}", sys.argv[1]) for n in range(5)]
print("ready", flush=True)
step = 0
while True:
    session = sessions[step % 5]
    session.add_message(Message("user", f"m{step}"))
    if step % 3 == 0:
        session.set_info(title=f"t{step}")
    if step % 7 == 0:
        session.undo()
    if step % 11 == 0:
        sessions[(step + 1) % 5].clear()
    step += 1
    time.sleep(0.002)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_writer_killed_at_any_point_leaves_pages_that_list_what_the_directory_lists(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path)
    store.session("seed").add_message(_user("x"))
    store.list_sessions(limit=1)  # the index is built: from now on, only writers keep it
    rng = random.Random(7)
    for _ in range(6):
        child = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.1, 0.5))
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
        child.stdout.close()
        assert child.stderr is not None
        child.stderr.close()
        whole = store.list_sessions()  # from the directory
        for size in (1, 3):
            assert _pages(store, size) == whole


def test_a_session_reported_newer_than_its_file_is_paged_in_its_place(tmp_path: Path) -> None:
    # Where the file system's clock is coarser than Python's, a session written within one of
    # its ticks reports its first message's own time, a little after its file's time.
    store = FileStore(tmp_path)
    store.session("older").add_message(_user("1"))
    newer = store.session("newer")
    newer.add_message(_user("2"))
    stamped = newer.get_messages()[0].created_at
    assert stamped is not None
    first = int(stamped.timestamp() * 1e9)
    for stem, behind in (("older", 2_000_000), ("newer", 4_000_000)):
        os.utime(tmp_path / (file_stem(stem) + ".jsonl"), ns=(first, first - behind))
    whole = store.list_sessions()
    assert [info.id for info in whole] == ["newer", "older"]
    assert whole[0].updated_at == stamped
    for size in (1, 2):
        assert _pages(store, size) == whole
    later = store.list_sessions(updated_after=stamped - timedelta(microseconds=1))
    assert [info.id for info in later] == ["newer"]
