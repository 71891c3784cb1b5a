"""FileSession's fork, undo and import (``_replace``) beyond the conformance suite: what they
do to the files, other instances and processes holding the old file, concurrent writers,
and refusals that change nothing. Crashes midway are in test_kill.py."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from aniki import CorruptStoreError, Message, UserError
from aniki.sessions import AsyncFileSession, FileSession, FileStore
from aniki.sessions.file._format import header

CLAIM = "aniki.summary.claim"


def _user(text: str) -> Message:
    return Message("user", text)


def _said(text: str) -> Message:
    return Message("assistant", text)


def _texts(messages: tuple[Message, ...] | list[Message]) -> list[str]:
    return [message.content for message in messages]


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")[:-1]


def _inode(path: Path) -> int:
    return os.stat(path).st_ino


def _digest(directory: Path) -> dict[str, str]:
    # Every file, the index's markers too (by their place in the directory).
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def _generation(path: Path) -> int:
    return int(json.loads(_lines(path)[0])["generation"])


# --- undo: what it does to the file ----------------------------------------------------------


def test_undo_of_a_turn_that_starts_a_line_cuts_the_file_in_place(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.add_messages([_user("a"), _said("b")])
    session.add_message(_user("c"))
    session.add_message(_said("d"))
    session.set_meta("summary", {"covers": 2})
    before = _lines(session.path)
    inode = _inode(session.path)
    assert _texts(session.undo()) == ["c", "d"]
    after = _lines(session.path)
    assert _inode(session.path) == inode  # no new file: a cut
    assert after[1:] == before[1:2]  # the kept line, byte for byte
    assert after[0] + b"\n" == header("s", 1)  # the generation bumped, as clear() does
    assert session.get_meta("summary") == {"covers": 2}  # derived state kept
    assert FileSession("s", tmp_path).get_meta("summary") == {"covers": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == [".index", "s.jsonl", "s.meta.json"]


def test_undo_inside_a_batch_writes_a_new_file_with_that_line_shortened(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.add_message(_user("first"))
    session.add_messages([_user("a"), _said("b"), _user("c"), _said("d")])
    session.add_message(_said("e"))
    session.set_meta("summary", "kept")
    os.chmod(session.path, 0o640)
    stored = session.get_messages()
    before = _lines(session.path)
    inode = _inode(session.path)
    assert session.undo() == stored[3:]
    after = _lines(session.path)
    assert _inode(session.path) != inode  # a new file, renamed into place
    assert after[:2] == before[:2]  # the header (same generation) and the first line
    kept = json.loads(after[2])
    assert [record["content"] for record in kept] == ["a", "b"]
    assert [record["id"] for record in kept] == [m.id for m in stored[1:3]]
    assert len(after) == 3
    assert os.stat(session.path).st_mode & 0o777 == 0o640  # the mode of the file replaced
    assert session.get_meta("summary") == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".index", "s.jsonl", "s.meta.json"]
    # The undoing instance uses the new file, its cache kept.
    session.add_message(_user("f"))
    assert _texts(FileSession("s", tmp_path).get_messages()) == ["first", "a", "b", "f"]
    assert _texts(session.get_messages()) == ["first", "a", "b", "f"]


def test_undo_keeps_ids_times_model_and_usage_of_what_stays(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.add_messages([_user("a"), Message("assistant", "b", model="m-1"), _user("c")])
    stored = session.get_messages()
    session.undo()
    kept = FileSession("s", tmp_path).get_messages()
    assert [(m.id, m.created_at, m.model) for m in kept] == [
        (m.id, m.created_at, m.model) for m in stored[:2]
    ]


def test_an_undo_that_died_before_bumping_the_header_keeps_the_meta(tmp_path: Path) -> None:
    # The meta file is written first, for the generation the undo leaves and the next one.
    session = FileSession("s", tmp_path)
    session.add_message(_user("a"))
    session.set_meta("summary", "so far")
    data = session.path.read_bytes()
    session.undo()
    document = json.loads((tmp_path / "s.meta.json").read_bytes())
    assert (document["generation"], document["previous"]) == (1, 0)
    assert session.get_meta("summary") == "so far"
    session.path.write_bytes(data)  # as if it died right after the meta file was written
    fresh = FileSession("s", tmp_path)
    assert fresh.get_messages() == (_user("a"),)
    assert fresh.get_meta("summary") == "so far"
    fresh.set_meta("summary", "later")  # written for the one generation again
    assert "previous" not in json.loads((tmp_path / "s.meta.json").read_bytes())


def test_clear_deletes_a_meta_file_that_would_hold_after_its_bump_first(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.add_message(_user("a"))
    session.set_meta("summary", "so far")
    data = session.path.read_bytes()
    session.undo()  # meta now for generations 0 and 1, header at 1
    session.path.write_bytes(data)  # header back at 0: the undo died before bumping it
    deleted: list[str] = []
    real = os.pwrite

    def watching(fd: int, payload: bytes, offset: int) -> int:
        if offset == 0:  # the header write of clear(): the meta file must already be gone
            deleted.append(str((tmp_path / "s.meta.json").exists()))
        return real(fd, payload, offset)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "pwrite", watching)
        FileSession("s", tmp_path).clear()
    assert deleted == ["False"]


def test_undo_without_a_user_message_or_a_file_writes_nothing(tmp_path: Path) -> None:
    assert FileSession("none", tmp_path / "d").undo() == ()
    assert not (tmp_path / "d").exists()
    session = FileSession("s", tmp_path)
    session.add_messages([Message("system", "rules"), _said("hello")])
    before = _digest(tmp_path)
    assert session.undo() == ()
    assert _digest(tmp_path) == before


def test_undo_refuses_a_damaged_file_and_changes_nothing(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.add_messages([_user("a"), _said("b"), _user("c")])
    session.add_message(_user("d"))
    session.path.write_bytes(session.path.read_bytes().replace(b'"b"', b'"b\xff'))
    before = _digest(tmp_path)
    with pytest.raises(CorruptStoreError):
        FileSession("s", tmp_path).undo()
    assert _digest(tmp_path) == before


def test_undo_refuses_a_damaged_meta_file_and_changes_nothing(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.add_message(_user("a"))
    session.set_meta("k", 1)
    meta = tmp_path / "s.meta.json"
    meta.write_bytes(meta.read_bytes()[:-2])
    before = _digest(tmp_path)
    with pytest.raises(CorruptStoreError, match="meta file"):
        session.undo()
    assert _digest(tmp_path) == before


# --- other instances and processes -----------------------------------------------------------


def _batch_and_single(session: FileSession) -> None:
    session.add_messages([_user("a"), _said("b"), _user("c"), _said("d")])


def test_an_instance_that_last_appended_appends_to_the_new_file(tmp_path: Path) -> None:
    # Its view ends where the old file ended, so without the mark it would take the fast path
    # and write to a file no longer at the path.
    writer, undoer = FileSession("s", tmp_path), FileSession("s", tmp_path)
    _batch_and_single(writer)
    old = os.open(writer.path, os.O_RDONLY)
    try:
        old_size = os.fstat(old).st_size
        assert _texts(undoer.undo()) == ["c", "d"]
        writer.add_message(_user("after"))
        assert os.fstat(old).st_size == old_size + 1  # only the mark went to the old file
    finally:
        os.close(old)
    assert _texts(FileSession("s", tmp_path).get_messages()) == ["a", "b", "after"]
    assert _texts(writer.get_messages()) == ["a", "b", "after"]
    assert _texts(undoer.get_messages()) == ["a", "b", "after"]


@pytest.mark.parametrize("batch", [False, True])
def test_every_kind_of_cached_instance_sees_an_undo(tmp_path: Path, batch: bool) -> None:
    writer = FileSession("s", tmp_path)
    if batch:
        _batch_and_single(writer)
    else:
        writer.add_messages([_user("a"), _said("b")])
        writer.add_message(_user("c"))
        writer.add_message(_said("d"))
    writer.set_meta("summary", "x")
    full, tail, meta = (FileSession("s", tmp_path) for _ in range(3))
    assert len(full.get_messages()) == 4
    assert len(tail.get_messages(2)) == 2  # a tail read: nothing cached
    assert meta.get_meta("summary") == "x"
    FileSession("s", tmp_path).undo()
    assert _texts(full.get_messages()) == ["a", "b"]
    assert _texts(full.get_messages(1)) == ["b"]
    assert _texts(tail.get_messages(2)) == ["a", "b"]
    assert meta.get_meta("summary") == "x"
    for instance in (full, tail, meta, writer):
        instance.add_message(_user(f"{id(instance)}"))
    assert len(FileSession("s", tmp_path).get_messages()) == 6
    assert full.get_messages() == tail.get_messages() == FileSession("s", tmp_path).get_messages()


_CHILD = """
import json, sys
from aniki import Message
from aniki.sessions import FileSession
session = FileSession("s", sys.argv[1])
for command in sys.stdin:
    if command.startswith("add "):
        session.add_message(Message("user", command[4:].strip()))
        print("added", flush=True)
    else:
        print(json.dumps([m.content for m in session.get_messages()]), flush=True)
"""


def test_another_process_with_a_cached_history_sees_both_undos(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None

    def ask(command: str) -> str:
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(command + "\n")
        child.stdin.flush()
        return child.stdout.readline().strip()

    try:
        session = FileSession("s", tmp_path)
        session.add_message(_user("q1"))
        session.add_message(_said("r1"))
        _batch_and_single(session)  # a, b, c, d in one line
        assert json.loads(ask("read")) == ["q1", "r1", "a", "b", "c", "d"]
        assert ask("add e") == "added"  # the child's view ends at the end of the file
        session.undo()  # e starts a line: a cut
        assert json.loads(ask("read")) == ["q1", "r1", "a", "b", "c", "d"]
        assert ask("add e2") == "added"
        session.undo()  # e2
        session.undo()  # c, d out of the batch: a new file
        assert json.loads(ask("read")) == ["q1", "r1", "a", "b"]
        assert ask("add f") == "added"
        session.undo()  # f
        assert ask("add g") == "added"  # after a cut, in the new file
        assert _texts(FileSession("s", tmp_path).get_messages()) == ["q1", "r1", "a", "b", "g"]
    finally:
        child.stdin.close()
        child.wait(timeout=60)
        child.stdout.close()


def test_concurrent_appends_and_undos_lose_nothing_and_duplicate_nothing(
    tmp_path: Path,
) -> None:
    # Every message appended is, in the end, either in the history or in what an undo
    # returned: exactly once.
    writers, rounds, undos = 4, 25, 40
    removed: list[Message] = []
    errors: list[BaseException] = []

    def write(number: int) -> None:
        session = FileSession("s", tmp_path)
        try:
            for n in range(rounds):
                if n % 2:
                    session.add_messages(
                        [
                            _user(f"{number}.{n}.a"),
                            _said(f"{number}.{n}.b"),
                            _user(f"{number}.{n}.c"),
                        ]
                    )
                else:
                    session.add_message(_user(f"{number}.{n}.a"))
                session.get_messages()
        except BaseException as error:
            errors.append(error)

    def undo() -> None:
        session = FileSession("s", tmp_path)
        try:
            for _ in range(undos):
                removed.extend(session.undo())
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    threads.append(threading.Thread(target=undo))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    history = FileSession("s", tmp_path).get_messages()
    appended = {
        f"{number}.{n}.{part}"
        for number in range(writers)
        for n in range(rounds)
        for part in ("abc" if n % 2 else "a")
    }
    seen = _texts(history) + _texts(removed)
    assert len(seen) == len(set(seen)) and set(seen) == appended
    for number in range(writers):  # each writer's messages still in the order written
        mine = [text for text in _texts(history) if text.startswith(f"{number}.")]
        assert mine == sorted(mine, key=lambda t: (int(t.split(".")[1]), t.split(".")[2]))
    assert sorted(p.name for p in tmp_path.iterdir()) == [".index", "s.jsonl"]


# --- fork ------------------------------------------------------------------------------------


def test_fork_copies_the_records_byte_for_byte_and_the_meta_but_the_claim(
    tmp_path: Path,
) -> None:
    session = FileSession("s", tmp_path)
    session.add_message(_user("q"))
    session.add_messages([_said("r"), _user("q2"), _said("r2")])
    session.set_meta("summary", {"covers": 1})
    session.set_meta(CLAIM, {"owner": "x"})
    child = session.fork("t")
    assert _lines(child.path)[1:] == _lines(session.path)[1:]
    head = json.loads(_lines(child.path)[0])
    assert head["id"] == "t" and head["generation"] != 0  # a fresh generation: see _format
    assert child.get_meta("summary") == {"covers": 1} and child.get_meta(CLAIM) is None
    assert FileSession("t", tmp_path).get_meta("summary") == {"covers": 1}
    assert session.get_meta(CLAIM) == {"owner": "x"}  # the source keeps its claim
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".index",
        "s.jsonl",
        "s.meta.json",
        "t.jsonl",
        "t.meta.json",
    ]
    # The returned session has the copy cached and writes to the new file.
    child.add_message(_user("only in t"))
    assert _texts(FileSession("t", tmp_path).get_messages()) == ["q", "r", "q2", "r2", "only in t"]
    assert len(session.get_messages()) == 4


def test_fork_upto_a_message_inside_a_batch_cuts_that_line(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.add_message(_user("q"))
    session.add_messages([_said("r"), _user("q2"), _said("r2")])
    session.add_message(_user("q3"))
    stored = session.get_messages()
    child = session.fork("t", upto=stored[2].id)
    lines = _lines(child.path)
    assert lines[1] == _lines(session.path)[1]
    assert [record["id"] for record in json.loads(lines[2])] == [m.id for m in stored[1:3]]
    assert len(lines) == 3
    assert FileSession("t", tmp_path).get_messages() == stored[:3]
    assert [m.id for m in FileSession("t", tmp_path).get_messages()] == [m.id for m in stored[:3]]
    single = session.fork("u", upto=stored[1].id)  # one message left of the batch
    assert json.loads(_lines(single.path)[2])["id"] == stored[1].id
    assert single.get_messages() == stored[:2]


def test_fork_with_full_durability_and_of_a_session_without_a_file(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path, durability="full")
    session.add_messages([_user("a"), _said("b")])
    child = session.fork("t")
    assert child._options["durability"] == "full"
    assert FileSession("t", tmp_path).get_messages() == (_user("a"), _said("b"))
    empty = FileSession("nothing", tmp_path / "new").fork("copy")
    assert empty.get_messages() == ()
    with pytest.raises(UserError, match="no message with id"):
        FileSession("nothing", tmp_path / "new").fork("other", upto="x")


def test_fork_into_a_cleared_session_replaces_its_meta_and_its_readers_see_it(
    tmp_path: Path,
) -> None:
    session = FileSession("s", tmp_path)
    session.add_messages([_user("a"), _said("b")])
    session.set_meta("summary", "of s")
    target = FileSession("t", tmp_path)
    target.add_message(_user("old"))
    target.clear()
    target.set_meta("old-key", 1)
    assert target.get_messages() == ()
    session.fork("t")
    assert target.get_messages() == (_user("a"), _said("b"))  # the same object, cached before
    assert target.get_meta("old-key") is None and target.get_meta("summary") == "of s"
    target.add_message(_user("c"))
    assert _texts(FileSession("t", tmp_path).get_messages()) == ["a", "b", "c"]
    # With nothing to copy, the target's old meta goes too.
    other = FileSession("u", tmp_path)
    other.set_meta("old-key", 1)
    FileSession("empty", tmp_path).fork("u")
    assert other.get_meta("old-key") is None


def test_fork_refusals_change_nothing(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.add_messages([_user("a"), _said("b")])
    session.set_meta("summary", "x")
    taken = FileSession("taken", tmp_path)
    taken.add_message(_user("mine"))
    taken.set_meta("k", 1)
    torn = FileSession("torn", tmp_path)  # holds a torn line only: no message, may be forked into
    torn.add_message(_user("t"))
    torn.path.write_bytes(torn.path.read_bytes()[:-1])
    (tmp_path / "foreign.jsonl").write_bytes(b"not ours\n")
    before = _digest(tmp_path)
    for new_id, upto, match in [
        ("s", None, "needs a new session id"),
        ("taken", None, "already holds messages"),
        ("elsewhere", "no-such-id", "no message with id"),
        ("", None, "session id"),
    ]:
        with pytest.raises(UserError, match=match):
            session.fork(new_id, upto=upto)
        assert _digest(tmp_path) == before
    with pytest.raises(CorruptStoreError):
        session.fork("foreign")
    assert _digest(tmp_path) == before
    assert taken.get_messages() == (_user("mine"),) and taken.get_meta("k") == 1
    assert session.fork("torn").get_messages() == (_user("a"), _said("b"))


def test_fork_of_messages_stored_before_ids_existed(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.add_message(_user("x"))
    path = session.path
    path.write_bytes(_lines(path)[0] + b"\n" + b'{"role":"user","content":"old"}\n')
    legacy = FileSession("s", tmp_path)
    assert legacy.get_messages()[0].id is None
    with pytest.raises(UserError, match="no message with id"):
        legacy.fork("t", upto="anything")
    assert legacy.fork("t").get_messages() == (_user("old"),)


def test_a_fork_racing_appends_gets_a_prefix_of_the_history(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    stop, writing = threading.Event(), threading.Event()
    appended: list[str] = []

    def append() -> None:
        writer = FileSession("s", tmp_path)
        n = 0
        while not stop.is_set():
            if n % 3:
                writer.add_message(_user(f"{n}"))
                appended.append(f"{n}")
            else:
                writer.add_messages([_user(f"{n}"), _said(f"{n}+")])
                appended.extend([f"{n}", f"{n}+"])
            writing.set()
            n += 1

    thread = threading.Thread(target=append)
    thread.start()
    try:
        # The forks race the appends from the first one on (a loaded machine may start the
        # thread late: forks made before it wrote would all be empty, and prove nothing).
        assert writing.wait(10)
        forks = [session.fork(f"f{i}") for i in range(30)]
    finally:
        stop.set()
        thread.join()
    for fork in forks:
        copied = _texts(FileSession(fork.id, tmp_path).get_messages())
        assert copied == appended[: len(copied)]
        if copied:  # a batch [n, n+] (n a multiple of 3) is never cut in two
            assert not (copied[-1].isdigit() and int(copied[-1]) % 3 == 0)
    assert len(_texts(FileSession(forks[-1].id, tmp_path).get_messages())) > 0


def test_temporary_files_never_show_in_a_listing(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.add_messages([_user("a"), _said("b"), _user("c")])
    (tmp_path / "s.jsonl.123.abcdef01.tmp").write_bytes(b"left by a crash")
    assert [info.id for info in FileStore(tmp_path).list_sessions()] == ["s"]


# --- import (_replace) -----------------------------------------------------------------------


def test_replace_swaps_the_whole_history_keeps_ids_and_drops_meta(tmp_path: Path) -> None:
    session, reader = FileSession("s", tmp_path), FileSession("s", tmp_path)
    session.add_messages([_user("old 1"), _said("old 2")])
    session.set_meta("summary", "of the old history")
    assert len(reader.get_messages()) == 2
    source = FileSession("src", tmp_path / "elsewhere")
    source.add_messages([_user("new 1"), _said("new 2"), _user("new 3")])
    imported = [*source.get_messages(), _user("unstamped")]
    session._replace(imported)
    history = FileSession("s", tmp_path).get_messages()
    assert history == tuple(imported)
    assert [m.id for m in history[:3]] == [m.id for m in imported[:3]]
    assert history[3].id is not None
    assert len(_lines(session.path)) == 5  # the header and one line per message
    assert reader.get_messages() == history and session.get_messages() == history
    assert reader.get_meta("summary") is None
    assert sorted(p.name for p in tmp_path.iterdir()) == [".index", "elsewhere", "s.jsonl"]
    session._replace([])
    assert FileSession("s", tmp_path).get_messages() == ()
    FileSession("fresh", tmp_path / "new")._replace([_user("x")])
    assert FileSession("fresh", tmp_path / "new").get_messages() == (_user("x"),)


# --- the async twin --------------------------------------------------------------------------


async def test_the_async_twin_forks_undoes_and_replaces(tmp_path: Path) -> None:
    session = AsyncFileSession("s", tmp_path)
    await session.add_messages([_user("a"), _said("b"), _user("c"), _said("d")])
    stored = await session.get_messages()
    child = await session.fork("t", upto=stored[1].id)
    assert isinstance(child, AsyncFileSession) and child.id == "t"
    assert await child.get_messages() == stored[:2]
    assert await session.undo() == stored[2:]
    assert await AsyncFileSession("s", tmp_path).get_messages() == stored[:2]
    await child._replace([_user("z")])
    assert await AsyncFileSession("t", tmp_path).get_messages() == (_user("z"),)
    await session.aclose()
    await child.aclose()
