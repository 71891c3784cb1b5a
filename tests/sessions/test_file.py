"""FileSession beyond the conformance suite: torn lines, file names, foreign files, the cache."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from aniki import CorruptStoreError, Message, SchemaVersionError, UserError
from aniki.sessions import FileSession, FileStore
from aniki.sessions.file import _file as file
from aniki.sessions.file._format import file_stem, header


def _user(text: str) -> Message:
    return Message(role="user", content=text)


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")


# --- torn writes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "torn",
    [
        b'{"role":"user","cont',
        b"[",
        b'{"role":"user","content":"complete but no newline"}',
        b"\x00" * 9,
    ],
)
def test_a_torn_last_line_is_ignored_and_cut_off_by_the_next_append(
    tmp_path: Path, torn: bytes
) -> None:
    session = FileSession("s", tmp_path)
    session.add_messages([_user("one"), _user("two")])
    with session.path.open("ab") as handle:  # what a crash half-way through a write leaves
        handle.write(torn)
    assert FileSession("s", tmp_path).get_messages() == (_user("one"), _user("two"))
    assert session.get_messages() == (_user("one"), _user("two"))
    FileSession("s", tmp_path).add_message(_user("three"))
    assert FileSession("s", tmp_path).get_messages() == (_user("one"), _user("two"), _user("three"))
    assert session.get_messages() == (_user("one"), _user("two"), _user("three"))
    head, batch, single, end = session.path.read_bytes().split(b"\n")
    assert head + b"\n" == header("s", 0) and end == b""
    assert _said(json.loads(batch)) == [_user("one").to_dict(), _user("two").to_dict()]
    assert _said([json.loads(single)]) == [_user("three").to_dict()]


def _said(records: list[dict[str, object]]) -> list[dict[str, object]]:
    """Stored records without the id and time the store adds (checked to be there)."""
    for record in records:
        assert isinstance(record.pop("id"), str) and isinstance(record.pop("created_at"), str)
    return records


def test_a_torn_header_means_an_empty_session_that_can_be_written(tmp_path: Path) -> None:
    path = FileSession("s", tmp_path).path
    tmp_path.mkdir(exist_ok=True)
    path.write_bytes(header("s", 0)[:17])
    assert FileSession("s", tmp_path).get_messages() == ()
    FileSession("s", tmp_path).add_message(_user("hi"))
    assert FileSession("s", tmp_path).get_messages() == (_user("hi"),)
    assert _lines(path)[0] + b"\n" == header("s", 0)


def test_a_batch_is_one_line_so_it_is_whole_or_absent(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.add_message(_user("single"))
    session.add_messages([_user("b1"), _user("b2"), _user("b3")])
    lines = _lines(session.path)
    assert len(lines) == 4 and lines[-1] == b""  # header, single, batch, end
    assert _said(json.loads(lines[2])) == [{"role": "user", "content": f"b{i}"} for i in (1, 2, 3)]
    session.path.write_bytes(session.path.read_bytes()[:-10])  # tear the batch line
    assert FileSession("s", tmp_path).get_messages() == (_user("single"),)


def test_line_separators_inside_content_are_not_record_breaks(tmp_path: Path) -> None:
    content = "a\nb\r\nc\u2028d\u2029e\x85f\x0bg\x0ch\x1c"
    FileSession("s", tmp_path).add_message(_user(content))
    assert FileSession("s", tmp_path).get_messages() == (_user(content),)


# --- files that are not ours ---------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        b"just some notes\nmore notes\n",
        b'{"some": "json"}\n{"role":"user","content":"x"}\n',
        b"\x89PNG\r\n\x1a\n binary",
    ],
)
def test_a_foreign_file_is_refused_and_left_alone(tmp_path: Path, content: bytes) -> None:
    path = FileSession("s", tmp_path).path
    path.write_bytes(content)
    with pytest.raises(CorruptStoreError) as info:
        FileSession("s", tmp_path).get_messages()
    assert str(path) in str(info.value)
    with pytest.raises(CorruptStoreError):
        FileSession("s", tmp_path).add_message(_user("x"))
    with pytest.raises(CorruptStoreError):
        FileSession("s", tmp_path).clear()
    assert path.read_bytes() == content


def test_a_file_of_another_session_is_refused(tmp_path: Path) -> None:
    FileSession("other", tmp_path).add_message(_user("x"))
    (tmp_path / (file_stem("mine") + ".jsonl")).write_bytes(
        (tmp_path / (file_stem("other") + ".jsonl")).read_bytes()
    )
    with pytest.raises(CorruptStoreError, match="belongs to session 'other'"):
        FileSession("mine", tmp_path).get_messages()


def test_a_newer_format_version_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = FileSession("s", tmp_path).path
    content = b'{"aniki":"session","version":99,"id":"s","generation":0}\n{"future": 1}\n'
    path.write_bytes(content)
    with pytest.raises(SchemaVersionError, match="upgrade aniki"):
        FileSession("s", tmp_path).add_message(_user("x"))
    assert path.read_bytes() == content


def test_a_damaged_record_in_the_middle_is_corruption_not_a_torn_tail(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.add_messages([_user("a")])
    session.add_messages([_user("b")])
    lines = _lines(session.path)
    lines[1] = b'{"role":"user","content":'
    session.path.write_bytes(b"\n".join(lines))
    with pytest.raises(CorruptStoreError, match="cannot be read"):
        FileSession("s", tmp_path).get_messages()


# --- ids and file names --------------------------------------------------------------------


def test_hostile_ids_never_escape_the_directory(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    ids = [
        "../../x",
        "..",
        ".",
        "/etc/passwd",
        "a/../../b",
        "\\..\\x",
        ".hidden",
        "A",
        "a",
        "x" * 1024,
    ]
    for session_id in ids:
        FileSession(session_id, root).add_message(_user(session_id[:30]))
    outside = [p for p in tmp_path.rglob("*") if root not in p.parents and p != root]
    assert outside == []
    names = [p.name for p in root.iterdir() if p.name != ".index"]  # the index by time
    assert len(names) == len(ids)  # "A" and "a" too: names differ even ignoring case
    assert len({name.lower() for name in names}) == len(names)
    assert all(not name.startswith(".") and "/" not in name and len(name) < 255 for name in names)
    for session_id in ids:
        assert FileSession(session_id, root).get_messages() == (_user(session_id[:30]),)
    assert {info.id for info in FileStore(root).list_sessions()} == set(ids)


@pytest.mark.parametrize("session_id", ["", "a\x00b", "x" * 10_000])
def test_unusable_ids_are_refused(tmp_path: Path, session_id: str) -> None:
    with pytest.raises(UserError, match="session id"):
        FileSession(session_id, tmp_path / "d")
    assert not (tmp_path / "d").exists()


# --- meta ----------------------------------------------------------------------------------


def test_meta_is_replaced_atomically_and_dropped_by_clear(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.set_meta("summary", {"text": "so far"})
    session.set_meta("other", 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl", "s.meta.json"]
    session.clear()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]
    assert session.get_meta("summary") is None


def test_meta_left_behind_by_an_interrupted_clear_is_ignored(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.set_meta("summary", "stale")
    meta = tmp_path / "s.meta.json"
    saved = meta.read_bytes()
    session.clear()
    meta.write_bytes(saved)  # as if the process died before deleting it
    assert FileSession("s", tmp_path).get_meta("summary") is None


def test_an_interrupted_clear_looks_like_no_clear_to_every_reader(tmp_path: Path) -> None:
    session, reader = FileSession("s", tmp_path), FileSession("s", tmp_path)
    session.add_messages([_user("a"), _user("b")])
    assert len(reader.get_messages()) == 2
    data = session.path.read_bytes()
    # The clear bumps the generation first, then truncates: die in between.
    session.path.write_bytes(header("s", 1) + data[len(header("s", 0)) :])
    assert reader.get_messages() == (_user("a"), _user("b"))
    reader.add_message(_user("c"))
    assert FileSession("s", tmp_path).get_messages() == (_user("a"), _user("b"), _user("c"))


# --- the cache and the store ---------------------------------------------------------------


def test_a_reader_decodes_only_new_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[bytes] = []
    real = file.decode_messages

    def counting(text: bytes, *, store: str) -> list[Message]:
        decoded.append(text)
        return real(text, store=store)

    monkeypatch.setattr(file, "decode_messages", counting)
    writer, reader = FileSession("s", tmp_path), FileSession("s", tmp_path)
    for i in range(50):
        writer.add_message(_user(f"m{i}"))
    assert len(reader.get_messages()) == 50
    assert len(decoded) == 50
    writer.add_messages([_user("x"), _user("y")])
    assert reader.get_messages()[-2:] == (_user("x"), _user("y"))
    assert len(decoded) == 51
    writer.get_messages()
    assert len(decoded) == 51  # the writer kept what it wrote


def test_a_limited_read_on_a_fresh_instance_decodes_only_the_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = FileSession("s", tmp_path)
    for i in range(200):
        writer.add_message(_user(f"m{i}"))
    decoded: list[bytes] = []
    real = file.decode_messages
    monkeypatch.setattr(
        file,
        "decode_messages",
        lambda text, *, store: decoded.append(text) or real(text, store=store),
    )
    reader = FileSession("s", tmp_path)
    assert reader.get_messages(3) == (_user("m197"), _user("m198"), _user("m199"))
    assert len(decoded) == 3
    assert reader.get_messages(0) == ()
    assert len(reader.get_messages()) == 200  # a full read still sees everything
    assert reader.get_messages(2) == (_user("m198"), _user("m199"))  # now from the cache


@pytest.mark.parametrize("chunk", [7, 64, 65536])
def test_the_tail_is_the_end_of_the_whole_history_whatever_the_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    # Batches span the window's edge, lines span the chunks read, and a torn line ends the file.
    real = file.last_records
    monkeypatch.setattr(
        file, "last_records", lambda *args, **kwargs: real(*args, **kwargs, chunk=chunk)
    )
    writer = FileSession("s", tmp_path)
    assert FileSession("s", tmp_path).get_messages(5) == ()
    history: list[Message] = []
    for i in range(12):
        batch = [_user(f"{i}.{j} " + "long " * (i * 7 % 23)) for j in range(1 + i % 3)]
        writer.add_messages(batch)
        history += batch
    with writer.path.open("ab") as handle:
        handle.write(b'{"role":"user","content":"torn')
    for limit in range(len(history) + 3):
        expected = tuple(history)[-limit:] if limit else ()
        assert FileSession("s", tmp_path).get_messages(limit) == expected
    writer.clear()
    assert FileSession("s", tmp_path).get_messages(4) == ()


def test_list_sessions_reports_counts_and_never_creates_the_directory(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "d")
    assert store.list_sessions() == []
    assert not (tmp_path / "d").exists()
    store.session("a").add_messages([_user("1"), _user("2"), _user("3")])
    store.session("b").add_message(_user("1"))
    store.session("c").add_message(_user("1"))
    store.session("c").clear()
    store.session("b").set_meta("k", 1)
    counts = {info.id: info.message_count for info in store.list_sessions()}
    assert counts == {"a": 3, "b": 1}


def test_close_releases_the_file_and_the_session_stays_usable(tmp_path: Path) -> None:
    with FileSession("s", tmp_path, durability="full") as session:
        session.add_message(_user("a"))
    session.add_message(_user("b"))
    assert session.get_messages() == (_user("a"), _user("b"))
    assert repr(session).startswith("FileSession(id='s'")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_opens_its_own_file(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.add_message(_user("parent"))
    pid = os.fork()
    if pid == 0:  # the child: must not share the parent's descriptor
        signal.alarm(60)  # never hang the test run, whatever another thread held at fork
        code = 0
        try:
            session.add_message(_user("child"))
            code = 0 if len(session.get_messages()) == 2 else 3
        except BaseException:
            code = 4
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert session.get_messages() == (_user("parent"), _user("child"))
