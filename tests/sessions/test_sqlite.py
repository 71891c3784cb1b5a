"""SQLiteSession beyond the conformance suite: files it must not touch, schema, cache, locks."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from aniki import (
    CorruptStoreError,
    Message,
    SchemaVersionError,
    StoreUnavailableError,
    UserError,
)
from aniki.sessions import SQLiteSession, SQLiteStore
from aniki.sessions.sqlite import _db as db_module
from aniki.sessions.sqlite import _decode as decode_module
from aniki.sessions.sqlite import _errors as errors_module
from aniki.sessions.sqlite import _schema as schema_module


def _user(text: str) -> Message:
    return Message(role="user", content=text)


def _aniki_store(path: Path, *messages: str) -> None:
    session = SQLiteSession("s", path)
    session.add_messages([_user(text) for text in messages])
    session.close()
    SQLiteStore(path).close()


# --- files aniki must refuse without modifying them ----------------------------------------


def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    content = b"these are my notes, not a database\n" * 100
    path.write_bytes(content)
    with pytest.raises(CorruptStoreError, match="not a SQLite database") as info:
        SQLiteSession("s", path).get_messages()
    assert str(path) in str(info.value)
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_another_applications_database_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO users (name) VALUES ('ada')")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(CorruptStoreError, match="another application"):
        SQLiteSession("s", path).add_message(_user("hi"))
    assert path.read_bytes() == before
    with sqlite3.connect(path) as check:
        assert check.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_a_store_written_by_a_newer_aniki_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    _aniki_store(path, "hello")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA user_version = {schema_module.schema_version() + 1}").close()
    # Leave no WAL behind, so the bytes on disk are the whole store.
    assert conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0] == "delete"
    conn.close()
    before = path.read_bytes()
    with pytest.raises(SchemaVersionError, match="upgrade aniki"):
        SQLiteSession("s", path).get_messages()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chat.db"]


def test_an_older_store_is_migrated_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chat.db"
    _aniki_store(path, "kept", "too")
    step = "ALTER TABLE aniki_messages ADD COLUMN note TEXT; CREATE TABLE aniki_v2 (x INTEGER)"
    monkeypatch.setattr(schema_module, "MIGRATIONS", [*schema_module.MIGRATIONS, step])
    assert SQLiteSession("s", path).get_messages() == (_user("kept"), _user("too"))
    SQLiteStore(path).close()
    with sqlite3.connect(path) as check:
        assert check.execute("PRAGMA user_version").fetchone()[0] == schema_module.schema_version()
        columns = [row[1] for row in check.execute("PRAGMA table_info(aniki_messages)")]
        assert "note" in columns


def test_a_record_that_is_not_a_message_raises_corrupt_store_error(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    _aniki_store(path, "fine")
    with sqlite3.connect(path) as conn:
        conn.execute('UPDATE aniki_messages SET body = \'{"role": "robot"}\'')
    with pytest.raises(CorruptStoreError, match="cannot be read") as info:
        SQLiteSession("s", path).get_messages()
    assert info.value.store == f"sqlite:///{path}"


def test_a_damaged_database_raises_corrupt_store_error(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    _aniki_store(path, *[f"message {i} " + "x" * 500 for i in range(200)])
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    page = 4096
    for offset in range(page, len(data), page):  # every page but the header page
        data[offset : offset + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptStoreError):
        SQLiteSession("s", path).get_messages()


def test_a_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailableError, match="does not exist"):
        SQLiteSession("s", tmp_path / "nowhere" / "chat.db").add_message(_user("hi"))
    assert not (tmp_path / "nowhere").exists()


def test_a_locked_database_times_out_with_store_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    _aniki_store(path, "first")
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreUnavailableError, match="locked"):
            SQLiteSession("s", path, timeout=0.05).add_message(_user("second"))
        # Readers are never blocked by a writer.
        assert SQLiteSession("s", path, timeout=0.05).get_messages() == (_user("first"),)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert SQLiteSession("s", path).get_messages() == (_user("first"),)


# --- ids ------------------------------------------------------------------------------------


def test_hostile_ids_stay_inside_the_database(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    ids = ["../../x", "'; DROP TABLE aniki_messages; --", 'a"b', "x" * 1024, "%", "_"]
    for session_id in ids:
        SQLiteSession(session_id, path).add_message(_user(session_id[:20]))
    for session_id in ids:
        assert SQLiteSession(session_id, path).get_messages() == (_user(session_id[:20]),)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("chat.db")) == []
    assert {info.id for info in SQLiteStore(path).list_sessions()} == set(ids)


@pytest.mark.parametrize("session_id", ["", "a\x00b", "x" * 10_000])
def test_unusable_ids_are_refused_before_touching_the_file(tmp_path: Path, session_id: str) -> None:
    with pytest.raises(UserError, match="session id"):
        SQLiteSession(session_id, tmp_path / "chat.db")
    assert not (tmp_path / "chat.db").exists()


def test_bad_arguments_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="durability"):
        SQLiteSession("s", tmp_path / "c.db", durability="sometimes")  # type: ignore[arg-type]
    session = SQLiteSession("s", tmp_path / "c.db")
    with pytest.raises(UserError, match="limit"):
        session.get_messages(limit="3")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="JSON-safe"):
        session.set_meta("k", object())
    with pytest.raises(UserError, match="meta key"):
        session.get_meta("")


# --- the incremental cache -----------------------------------------------------------------


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every record the SQLite store decodes, in order."""
    seen: list[str] = []
    real, real_compact = decode_module.decode_message, decode_module.read_compact

    def counting(text: str, *, store: str) -> Message:
        seen.append(text)
        return real(text, store=store)

    def counting_compact(text: str, store: str) -> Message:
        seen.append(text)
        return real_compact(text, store)

    monkeypatch.setattr(decode_module, "decode_message", counting)
    monkeypatch.setattr(decode_module, "read_compact", counting_compact)
    return seen


def test_a_reader_decodes_only_what_was_appended_since_it_last_read(
    tmp_path: Path, decodes: list[str]
) -> None:
    path = tmp_path / "chat.db"
    writer, reader = SQLiteSession("s", path), SQLiteSession("s", path)
    writer.add_messages([_user(f"m{i}") for i in range(100)])
    assert len(reader.get_messages()) == 100
    assert len(decodes) == 100
    writer.add_message(_user("new"))
    assert reader.get_messages()[-1] == _user("new")
    assert len(decodes) == 101
    assert len(reader.get_messages(limit=3)) == 3
    assert len(decodes) == 101


def test_a_writer_reads_back_its_own_messages_without_decoding(
    tmp_path: Path, decodes: list[str]
) -> None:
    session = SQLiteSession("s", tmp_path / "chat.db")
    for turn in range(50):
        session.add_message(_user(f"q{turn}"))
        session.add_message(Message(role="assistant", content=f"a{turn}"))
        assert len(session.get_messages()) == 2 * (turn + 1)
    assert decodes == []


def test_an_unchanged_history_is_returned_without_copying(tmp_path: Path) -> None:
    session = SQLiteSession("s", tmp_path / "chat.db")
    session.add_messages([_user("a"), _user("b")])
    first = session.get_messages()
    assert session.get_messages() is first
    session.add_message(_user("c"))
    assert session.get_messages() == (*first, _user("c"))


# --- concurrency within a process ----------------------------------------------------------


def test_threads_share_one_instance_and_several_instances_safely(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    shared = SQLiteSession("s", path)
    errors: list[BaseException] = []

    def work(thread: int) -> None:
        try:
            own = SQLiteSession("s", path)
            for i in range(40):
                target = shared if i % 2 else own
                target.add_messages([_user(f"t{thread}:{i}:a"), _user(f"t{thread}:{i}:b")])
                target.get_messages()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    history = [m.content for m in SQLiteSession("s", path).get_messages()]
    assert len(history) == 4 * 40 * 2
    for thread in range(4):
        mine = [text for text in history if text.startswith(f"t{thread}:")]
        assert mine == [f"t{thread}:{i}:{part}" for i in range(40) for part in "ab"]
    assert history == [m.content for m in shared.get_messages()]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_opens_its_own_connection(tmp_path: Path) -> None:
    session = SQLiteSession("s", tmp_path / "chat.db")
    session.add_message(_user("parent"))
    pid = os.fork()
    if pid == 0:  # the child: must not reuse the parent's connection
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


# --- the store -----------------------------------------------------------------------------


def test_list_sessions_reports_counts_and_recency(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    store = SQLiteStore(path)
    assert store.list_sessions() == []
    assert not path.exists()  # listing never creates the file
    store.session("old").add_messages([_user("1"), _user("2")])
    store.session("new").add_message(_user("3"))
    store.session("empty").add_message(_user("4"))
    store.session("empty").clear()
    infos = store.list_sessions()
    assert [(info.id, info.message_count) for info in infos] == [("new", 1), ("old", 2)]
    assert infos[0].updated_at is not None and infos[0].updated_at.tzinfo is not None
    assert infos[0].updated_at >= infos[1].updated_at  # type: ignore[operator]


def test_close_releases_and_the_session_stays_usable(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    with SQLiteSession("s", path) as session:
        session.add_message(_user("a"))
    SQLiteStore(path).close()
    session.add_message(_user("b"))
    assert session.get_messages() == (_user("a"), _user("b"))
    assert repr(session) == f"SQLiteSession(id='s', path={str(path)!r})"


def test_dropping_the_last_session_of_a_file_closes_its_connection(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    session = SQLiteSession("s", path)
    session.add_message(_user("a"))
    del session  # no gc.collect(): it must not wait for the garbage collector
    conn = sqlite3.connect(path, isolation_level=None)
    try:  # switching the journal mode needs every other connection closed
        assert conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0] == "delete"
    finally:
        conn.close()


@pytest.mark.parametrize("durability", ["off", "normal", "full"])
def test_each_durability_sets_the_matching_synchronous_mode(
    tmp_path: Path, durability: str
) -> None:
    session = SQLiteSession("s", tmp_path / "chat.db", durability=durability)  # type: ignore[arg-type]
    session.add_message(_user("a"))
    conn = db_module.database_for(session.path, session.durability, 5.0).conn
    expected = {"off": 0, "normal": 1, "full": 2}[durability]
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == expected
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_limited_read_on_a_fresh_instance_decodes_only_the_tail(
    tmp_path: Path, decodes: list[str]
) -> None:
    path = tmp_path / "tail.db"
    writer = SQLiteSession("long", path=path)
    writer.add_messages({"role": "user", "content": f"m{i}"} for i in range(1000))
    writer.close()
    decoded = decodes
    reader = SQLiteSession("long", path=path)
    assert [m.content for m in reader.get_messages(limit=3)] == ["m997", "m998", "m999"]
    assert len(decoded) == 3
    assert reader.get_messages(limit=0) == ()
    assert len(reader.get_messages()) == 1000  # a full read still sees everything
    assert [m.content for m in reader.get_messages(limit=2)] == ["m998", "m999"]


# --- real trouble is not damage, and damage is not trouble -------------------------------------


def test_a_full_disk_is_store_unavailable_and_leaves_the_file_usable(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    _aniki_store(path, "first")
    session = SQLiteSession("s", path)
    assert session.get_messages() == (_user("first"),)
    conn = db_module.database_for(path, "normal", 5.0).conn
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")  # the file may not grow: SQLITE_FULL
    with pytest.raises(StoreUnavailableError, match="the disk is full; free some space") as info:
        session.add_message(_user("x" * 100_000))
    assert not isinstance(info.value, CorruptStoreError)
    conn.execute("PRAGMA max_page_count = 1073741823")
    session.add_message(_user("second"))  # not taken for damage: writes go on once there is room
    assert SQLiteSession("s", path).get_messages() == (_user("first"), _user("second"))


def _sqlite_error(code: int, text: str) -> sqlite3.Error:
    error = sqlite3.OperationalError(text)
    error.sqlite_errorcode = code  # type: ignore[attr-defined]
    return error


@pytest.mark.parametrize(
    ("code", "text", "advice"),
    [
        (3, "access permission denied", "check the permissions"),
        (8, "attempt to write a readonly database", "check the permissions"),
        (14, "unable to open database file", "may create files in its directory"),
        (13, "database or disk is full", "the disk is full"),
        (5, "database is locked", "raise timeout="),
        (10, "disk I/O error", "the disk or file system failed"),
        (10 | (2 << 8), "disk I/O error", "the disk or file system failed"),  # extended code
    ],
)
def test_each_kind_of_trouble_gets_its_own_advice(
    tmp_path: Path, code: int, text: str, advice: str
) -> None:
    path = tmp_path / "chat.db"
    _aniki_store(path, "intact")
    error = errors_module.store_error(_sqlite_error(code, text), "sqlite:///x", 5.0, path)
    assert type(error) is StoreUnavailableError
    assert advice in str(error)
    # without a result code (Python 3.10), the text alone says the same
    plain = errors_module.store_error(sqlite3.OperationalError(text), "sqlite:///x", 5.0, path)
    assert type(plain) is StoreUnavailableError and advice in str(plain)


def test_an_io_error_on_a_file_cut_short_is_damage(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    _aniki_store(path, *[f"m{i}" * 200 for i in range(50)])
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    path.write_bytes(path.read_bytes()[:-1000])
    error = errors_module.store_error(_sqlite_error(10, "disk I/O error"), "sqlite:///x", 5.0, path)
    assert type(error) is CorruptStoreError
    assert ".recover" in str(error) and "not a whole number of pages" not in str(error)


@pytest.mark.parametrize(
    "text", ["database disk image is malformed", "file is not a database", "UNIQUE constraint"]
)
def test_damage_is_never_advised_as_permissions_or_disk_space(tmp_path: Path, text: str) -> None:
    error = errors_module.store_error(
        sqlite3.DatabaseError(text), "sqlite:///x", 5.0, tmp_path / "x"
    )
    assert type(error) is CorruptStoreError
    assert "permission" not in str(error) and "disk is full" not in str(error)
    assert "Restore it from a backup" in str(error) and "move it aside" in str(error)


def test_opening_an_intact_store_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    _aniki_store(path, "a", "b")
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = path.read_bytes()
    assert SQLiteSession("s", path).get_messages() == (_user("a"), _user("b"))
    SQLiteStore(path).close()
    assert path.read_bytes() == before


def test_a_damaged_store_is_not_switched_to_wal(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    _aniki_store(path, *[f"m{i}" * 300 for i in range(60)])
    conn = sqlite3.connect(path, isolation_level=None)
    assert conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0] == "delete"
    conn.close()
    data = bytearray(path.read_bytes())
    data[3 * 4096 : 3 * 4096 + 200] = b"\xa5" * 200  # a damaged b-tree page
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptStoreError, match=r"quick_check|malformed"):
        SQLiteSession("s", path).add_message(_user("new"))
    SQLiteStore(path).close()
    assert path.read_bytes() == bytes(data)  # header untouched: still in rollback-journal mode
    assert not Path(f"{path}-wal").exists()


def _open_and_append_at(path: str, start: float, number: int) -> None:
    while time.time() < start:
        pass
    SQLiteSession(f"s{number}", path).add_message(Message("user", f"from {number}"))


def test_processes_opening_a_new_file_at_once_all_get_in(tmp_path: Path) -> None:
    """Switching a new file to WAL needs it alone; SQLite answers "locked" at once to the
    others then, without its busy wait: every opener waits its turn instead."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    for attempt in range(4):
        path = str(tmp_path / f"new-{attempt}.db")
        start = time.time() + 1.5
        workers = [
            context.Process(target=_open_and_append_at, args=(path, start, number))
            for number in range(6)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
        assert [worker.exitcode for worker in workers] == [0] * 6, attempt
        infos = SQLiteStore(path).list_sessions()
        assert sorted(info.id for info in infos) == [f"s{number}" for number in range(6)]
