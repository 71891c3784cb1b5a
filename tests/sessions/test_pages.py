"""``read_page``: a page of a stored session, read in one snapshot, equals the same slice of
``get_messages()``, on every store (Redis and PostgreSQL skip when their servers are down,
and fail under ``CI=true``)."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aniki import CorruptStoreError, Message, SchemaVersionError
from aniki.sessions import FileSession, InMemorySession, SQLiteSession
from aniki.sessions._pages import REACH, Page, read_page, window
from aniki.sessions.file import _pages as file_pages
from aniki.sessions.sqlite import _pages as sqlite_pages

from ..servers import (
    delete_redis_prefix,
    drop_postgres_tables,
    postgres_dsn,
    redis_url,
    unique_name,
)
from .stores import counting
from .test_schema_upgrade import (  # noqa: F401 - fixtures: the stores the last release wrote
    WRITTEN,
    file_store,
    postgres_store,
    redis_store,
    sqlite_store,
)

HUGE = 2**70


def expected(
    history: tuple[Message, ...], start: int, limit: int
) -> tuple[int, tuple[Message, ...]]:
    """What a page holds, worked out from the list itself: ``(start, messages)``."""
    total = len(history)
    raw = start if start >= 0 else total + start
    kept = tuple(history[i] for i in range(max(raw, 0), min(raw + limit, total)))
    return min(max(raw, 0), total), kept


def stamps(messages: tuple[Message, ...]) -> list[tuple[Any, ...]]:
    """What equality of messages leaves out (it compares only what was said)."""
    return [(m.role, m.content, m.id, m.created_at, m.model, m.usage) for m in messages]


def texts(count: int, first: int = 0) -> list[Message]:
    return [Message("user", f"m{i}") for i in range(first, first + count)]


class Store:
    """Opens sessions of one store, and appends raw records to them as another program would."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self.tmp_path = tmp_path
        self.prefix = self.table = ""
        self._memory: dict[str, InMemorySession] = {}
        self._opened: list[Any] = []
        if kind == "redis":
            self.url, self.prefix = redis_url(), unique_name("aniki-pages") + ":"
        if kind == "postgres":
            self.dsn, self.table = postgres_dsn(), unique_name("aniki_pages")

    def open(self, session_id: str, *, other: bool = False) -> Any:
        """A new instance of session ``session_id`` (``other``: one with its own connection)."""
        session: Any
        if self.kind == "memory":  # the instance is the session: every open is the same one
            return self._memory.setdefault(session_id, InMemorySession(session_id))
        if self.kind == "sqlite":
            # Another timeout, another Database: its own connection, as another process has.
            timeout = 6.0 if other else 5.0
            session = SQLiteSession(session_id, self.tmp_path / "store.db", timeout=timeout)
        elif self.kind == "file":
            session = FileSession(session_id, self.tmp_path / "files")
        elif self.kind == "redis":
            from aniki.sessions import RedisSession

            session = RedisSession(session_id, self.url, prefix=self.prefix)
        else:
            from aniki.sessions import PostgresSession

            session = PostgresSession(session_id, self.dsn, table=self.table)
        self._opened.append(session)
        return session

    def append_raw(self, session_id: str, record: str) -> None:
        """Append ``record`` as it is, past aniki's checks."""
        if self.kind == "sqlite":
            from aniki.sessions.sqlite._db import BLOCK

            with sqlite3.connect(self.tmp_path / "store.db") as conn:
                (number,) = conn.execute(
                    "SELECT number FROM aniki_sessions WHERE id = ?", (session_id,)
                ).fetchone()
                low = number * BLOCK
                (last,) = conn.execute(
                    "SELECT max(key) FROM aniki_messages WHERE key > ? AND key < ?",
                    (low, low + BLOCK),
                ).fetchone()
                conn.execute(
                    "INSERT INTO aniki_messages VALUES (?, ?, ?)", (last + 1, record, time.time())
                )
        elif self.kind == "file":
            with FileSession(session_id, self.tmp_path / "files").path.open("ab") as file:
                file.write(record.encode() + b"\n")
        elif self.kind == "redis":
            import redis

            client = redis.Redis.from_url(self.url)
            client.rpush(f"{self.prefix}{{{session_id}}}:msgs", record)
            client.close()
        else:
            import psycopg

            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(
                    f'INSERT INTO "{self.table}" (session_id, message) VALUES (%s, %s)',
                    (session_id, record),
                )
                conn.execute(
                    f'UPDATE "{self.table}_sessions" SET message_count = message_count + 1'
                    " WHERE session_id = %s",
                    (session_id,),
                )

    def close(self) -> None:
        for session in self._opened:
            session.close()
        if self.kind == "redis":
            delete_redis_prefix(self.prefix)
        if self.kind == "postgres":
            drop_postgres_tables(self.table)


STORES = [
    "memory",
    "sqlite",
    "file",
    pytest.param("redis", marks=pytest.mark.redis),
    pytest.param("postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened = Store(request.param, tmp_path)
    yield opened
    opened.close()


def assert_slices(session: Any, pairs: list[tuple[int, int]]) -> None:
    """Every page of ``pairs`` equals that slice of the history, metadata and all."""
    history = session.get_messages()
    for start, limit in pairs:
        page = read_page(session, start, limit)
        first, messages = expected(history, start, limit)
        assert (page.total, page.start, page.messages) == (len(history), first, messages), (
            start,
            limit,
        )
        assert stamps(page.messages) == stamps(messages), (start, limit)


def grid(total: int) -> list[tuple[int, int]]:
    starts = [*range(-total - 3, total + 4), -HUGE, HUGE, -REACH, REACH, -(2**62), 2**62]
    limits = [0, 1, 2, 3, 7, total - 1, total, total + 1, 2**62, REACH, HUGE]
    return [(start, limit) for start in starts for limit in limits if limit >= 0]


# --- pages are slices -------------------------------------------------------------------


def test_every_page_is_the_same_slice_of_get_messages(store: Store) -> None:
    writer = store.open("s")
    writer.add_messages(texts(5))  # a batch (one line in a file store)
    writer.add_message(Message("assistant", "alone", model="m-1"))
    writer.add_messages(texts(17, first=6))
    reader = store.open("s")
    first = read_page(reader, 0, 10)  # a fresh instance: nothing read before
    assert [m.content for m in first.messages] == [*(f"m{i}" for i in range(5)), "alone"] + [
        f"m{i}" for i in range(6, 10)
    ]
    assert (first.total, first.start) == (23, 0)
    last = read_page(reader, -5, 5)
    assert (last.start, [m.content for m in last.messages]) == (
        18,
        [f"m{i}" for i in range(18, 23)],
    )
    middle = read_page(reader, 4, 3)
    assert [m.content for m in middle.messages] == ["m4", "alone", "m6"]
    assert middle.messages[1].model == "m-1"
    assert_slices(reader, grid(23))


def test_ids_and_times_read_back_as_get_messages_gives_them(store: Store) -> None:
    session = store.open("s")
    session.add_messages(texts(6))
    stored = store.open("s").get_messages()
    assert all(m.id and m.created_at for m in stored)
    page = read_page(store.open("s"), 1, 4)
    assert stamps(page.messages) == stamps(stored[1:5])


def test_clipping_past_either_end(store: Store) -> None:
    session = store.open("s")
    session.add_messages(texts(10))
    assert read_page(session, 10, 5) == Page(10, 10, ())
    assert read_page(session, 1000, 5) == Page(10, 10, ())
    assert [m.content for m in read_page(session, 8, 5).messages] == ["m8", "m9"]
    assert [m.content for m in read_page(session, -50, 50).messages] == texts_of(range(10))
    assert [m.content for m in read_page(session, -12, 5).messages] == ["m0", "m1", "m2"]
    assert read_page(session, -50, 5) == Page(10, 0, ())
    assert read_page(session, 3, 0) == Page(10, 3, ())
    assert read_page(session, -3, 0) == Page(10, 7, ())


def texts_of(indexes: range) -> list[str]:
    return [f"m{i}" for i in indexes]


def test_an_empty_session_has_empty_pages(store: Store) -> None:
    assert read_page(store.open("never"), 0, 50) == Page(0, 0, ())
    assert read_page(store.open("never"), -50, 50) == Page(0, 0, ())
    session = store.open("s")
    session.add_messages(texts(3))
    session.clear()
    assert read_page(store.open("s"), -50, 50) == Page(0, 0, ())


def test_pages_follow_edits_made_by_another_instance(store: Store) -> None:
    reader, writer = store.open("s"), store.open("s", other=True)
    writer.add_messages(texts(4))
    writer.add_message(Message("user", "question"))
    writer.add_messages([Message("assistant", "answer"), Message("user", "again")])
    assert read_page(reader, -3, 3).total == 7  # the file store's index is built here
    writer.undo()
    assert_slices(reader, grid(6))
    writer.add_messages(texts(3, first=10))
    assert_slices(reader, grid(9))
    writer.clear()
    assert read_page(reader, 0, 5) == Page(0, 0, ())
    writer.add_messages(texts(2, first=20))
    assert_slices(reader, grid(2))
    if store.kind != "memory":  # it has no import (_replace) and no other instance to fork to
        writer._replace(texts(6, first=30))
        assert_slices(reader, grid(6))
        fork = writer.fork(f"fork-{store.kind}")
        assert_slices(store.open(f"fork-{store.kind}"), grid(6))
        fork.close()


# --- arguments ----------------------------------------------------------------------------


def test_a_bad_limit_or_start_is_refused(store: Store) -> None:
    session = store.open("s")
    with pytest.raises(ValueError, match="limit must be 0 or more"):
        read_page(session, 0, -1)
    for start, limit in [(0, 1.5), (0, "5"), (0, True), (None, 5), ("0", 5)]:
        with pytest.raises(TypeError, match="must be an int"):
            read_page(session, start, limit)  # type: ignore[arg-type]


@given(
    total=st.integers(0, 60),
    start=st.integers(-80, 80) | st.integers(-HUGE, HUGE),
    limit=st.integers(0, 80) | st.integers(0, HUGE),
)
def test_the_window_is_the_slice_clipped_to_the_history(total: int, start: int, limit: int) -> None:
    history = tuple(Message("user", f"m{i}") for i in range(total))
    first, stop = window(start, limit, total)
    assert (first, history[first:stop]) == expected(history, start, limit)


def test_a_session_without_pages_is_read_whole_and_sliced() -> None:
    class Plain:
        def get_messages(self) -> tuple[Message, ...]:
            return tuple(texts(8))

    page = read_page(Plain(), -3, 2)
    assert (page.total, page.start, [m.content for m in page.messages]) == (8, 5, ["m5", "m6"])


# --- one snapshot -------------------------------------------------------------------------


def test_an_append_between_reads_never_tears_a_page(store: Store) -> None:
    """Batches of 10 land while pages are read: each page's total and rows agree."""
    store.open("s").add_messages(texts(10))
    reader, writer = store.open("s"), store.open("s", other=True)
    done = threading.Event()
    failures: list[BaseException] = []

    def write() -> None:
        try:
            for batch in range(1, 40):
                writer.add_messages(texts(10, first=batch * 10))
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=write)
    thread.start()
    reads = 0
    while not done.is_set() or reads < 5:
        for start, limit in [(-25, 25), (reads % 50, 30), (-7, 3)]:
            page = read_page(reader, start, limit)
            assert page.total % 10 == 0  # batches land whole
            first, stop = window(start, limit, page.total)
            assert page.start == first and len(page.messages) == stop - first
            assert [m.content for m in page.messages] == texts_of(range(first, stop))
        reads += 1
    thread.join()
    assert not failures
    assert read_page(reader, -1, 1).messages[0].content == "m399"


# --- records the store cannot read ----------------------------------------------------------


def test_a_damaged_record_fails_a_page_holding_it_as_it_fails_get_messages(store: Store) -> None:
    if store.kind == "memory":
        pytest.skip("an in-memory session holds no records")
    session = store.open("s")
    session.add_messages(texts(10))
    store.append_raw("s", "not JSON")
    for index in range(11, 16):  # a file store writes nothing past a damaged line: raw too
        store.append_raw("s", f'{{"role":"user","content":"m{index}"}}')
    with pytest.raises(CorruptStoreError) as whole:
        store.open("s").get_messages()
    reader = store.open("s")
    before = read_page(reader, 0, 10)
    assert [m.content for m in before.messages] == texts_of(range(10))
    assert before.total == 16
    assert [m.content for m in read_page(reader, 11, 10).messages] == texts_of(range(11, 16))
    with pytest.raises(CorruptStoreError) as paged:
        read_page(reader, 5, 10)
    assert str(paged.value) == str(whole.value)


def test_an_uncountable_batch_line_fails_every_page_of_a_file(tmp_path: Path) -> None:
    """A file store cannot tell where the records after a batch line that is not JSON stand."""
    session = FileSession("s", tmp_path)
    session.add_messages(texts(3))
    with session.path.open("ab") as file:
        file.write(b'[{"role":"user","content":"cut short"\n')
    with pytest.raises(CorruptStoreError) as whole:
        FileSession("s", tmp_path).get_messages()
    with pytest.raises(CorruptStoreError) as paged:
        read_page(FileSession("s", tmp_path), 0, 1)
    assert str(paged.value) == str(whole.value)


@pytest.fixture(
    params=[
        "sqlite",
        "file",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
def old_store(request: pytest.FixtureRequest) -> tuple[str, Any, Any]:
    open_session, version = request.getfixturevalue(f"{request.param}_store")
    return request.param, open_session, version


def test_records_of_the_last_release_read_as_get_messages_reads_them(
    old_store: tuple[str, Any, Any],
) -> None:
    kind, open_session, version = old_store
    for session_id, written in WRITTEN.items():
        session = open_session(session_id)
        page = read_page(session, 0, 50)
        assert page == Page(len(written), 0, written)
        assert all(m.id is None and m.created_at is None for m in page.messages)
        assert read_page(session, -1, 1).messages == written[-1:]
        assert_slices(session, grid(len(written)))
        session.close()
    if kind in ("file", "redis"):
        # Reading writes nothing. (Opening a SQLite file or a PostgreSQL table, whatever
        # the call, brings its schema up to date: that is not the read's doing.)
        assert version() == 1


@pytest.mark.redis
def test_a_redis_session_of_a_newer_schema_is_refused(tmp_path: Path) -> None:
    import redis

    opened = Store("redis", tmp_path)
    try:
        opened.open("s").add_messages(texts(3))
        client = redis.Redis.from_url(opened.url)
        client.hset(f"{opened.prefix}{{s}}:info", "v", "99")
        client.close()
        with pytest.raises(SchemaVersionError):
            read_page(opened.open("s"), 0, 2)
    finally:
        opened.close()


# --- reading writes nothing -----------------------------------------------------------------


def _tree(directory: Path) -> dict[str, str]:
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def test_a_file_store_page_writes_nothing(tmp_path: Path) -> None:
    assert read_page(FileSession("s", tmp_path / "none"), 0, 5) == Page(0, 0, ())
    assert not (tmp_path / "none").exists()
    FileSession("s", tmp_path / "files").add_messages(texts(5))
    before = _tree(tmp_path / "files")
    read_page(FileSession("s", tmp_path / "files"), 1, 3)
    assert _tree(tmp_path / "files") == before


def test_a_sqlite_page_changes_no_row(tmp_path: Path) -> None:
    session = SQLiteSession("s", tmp_path / "store.db")
    session.add_messages(texts(5))
    conn = session._database.conn
    changes = conn.total_changes
    read_page(SQLiteSession("s", tmp_path / "store.db"), 1, 3)
    read_page(SQLiteSession("other", tmp_path / "store.db"), 0, 3)
    assert conn.total_changes == changes


@pytest.mark.redis
def test_a_redis_page_writes_no_key(tmp_path: Path) -> None:
    import redis

    opened = Store("redis", tmp_path)
    client = redis.Redis.from_url(opened.url)
    try:
        opened.open("s").add_messages(texts(5))
        keys = sorted(client.scan_iter(match=opened.prefix + "*"))
        dumps = [client.dump(key) for key in keys]
        read_page(opened.open("s"), 1, 3)
        read_page(opened.open("never"), 0, 3)
        assert sorted(client.scan_iter(match=opened.prefix + "*")) == keys
        assert [client.dump(key) for key in keys] == dumps
    finally:
        client.close()
        opened.close()


# --- a page reads few records ---------------------------------------------------------------


@pytest.mark.parametrize("kind", STORES[3:])
def test_a_server_page_decodes_only_its_records(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = "redis" if kind == "redis" else "postgres"
    pages = __import__(f"aniki.sessions.{module}._pages", fromlist=["page"])
    opened = Store(kind, tmp_path)
    try:
        opened.open("s").add_messages(texts(2000))
        decoded = counting(monkeypatch, pages, "decode_message")
        page = read_page(opened.open("s"), 1000, 30)
        assert page.start == 1000 and page.messages[0].content == "m1000"
        assert len(decoded) == 30
    finally:
        opened.close()


BIG = 100_000


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file and a file store each holding one session of 100,000 messages."""
    directory = tmp_path_factory.mktemp("big")
    sqlite_session = SQLiteSession("big", directory / "store.db")
    file_session = FileSession("big", directory / "files")
    for first in range(0, BIG, 1000):
        batch = texts(1000, first=first)
        sqlite_session.add_messages(batch)
        file_session.add_messages(batch)  # one line of 1,000
    sqlite_session.close()
    file_session.close()
    return directory


def test_a_sqlite_page_of_a_long_session_seeks_its_rows(
    big: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = SQLiteSession("big", big / "store.db")
    statements: list[str] = []
    session._database.conn.set_trace_callback(statements.append)
    decoded = counting(monkeypatch, sqlite_pages, "decode_message")
    try:
        for start, first in [(-50, BIG - 50), (50_000, 50_000), (0, 0)]:
            page = read_page(session, start, 50)
            assert (page.total, page.start) == (BIG, first)
            assert [m.content for m in page.messages] == texts_of(range(first, first + 50))
    finally:
        session._database.conn.set_trace_callback(None)
    assert len(decoded) == 150
    assert statements and not any("OFFSET" in s for s in statements)  # seeks, no walks


def test_a_sqlite_page_over_a_gap_in_the_keys_is_still_the_slice(tmp_path: Path) -> None:
    """Keys with a gap (never left by aniki): the page is read by position instead."""
    session = SQLiteSession("s", tmp_path / "store.db")
    session.add_messages(texts(30))
    with sqlite3.connect(tmp_path / "store.db") as conn:
        conn.execute(
            "DELETE FROM aniki_messages WHERE key = (SELECT min(key) + 10 FROM aniki_messages)"
        )
    reader = SQLiteSession("s", tmp_path / "store.db")
    assert read_page(reader, 10, 2).messages == (Message("user", "m11"), Message("user", "m12"))
    assert_slices(reader, grid(29))


def test_a_file_page_of_a_long_session_decodes_only_its_lines(
    big: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = FileSession("big", big / "files")
    read_page(session, -50, 50)  # builds the index: counts every line, decodes one
    index = session._lines
    decoded = counting(monkeypatch, file_pages, "decode_messages")
    page = read_page(session, 50_000, 50)
    assert (page.total, page.start) == (BIG, 50_000)
    assert [m.content for m in page.messages] == texts_of(range(50_000, 50_050))
    assert len(decoded) == 1  # the one line of 1,000 holding the page
    FileSession("big", big / "files").add_message(Message("user", "one more"))
    page = read_page(session, -2, 2)
    assert session._lines is index  # extended by the new line, not built again
    assert (page.total, [m.content for m in page.messages]) == (
        BIG + 1,
        [f"m{BIG - 1}", "one more"],
    )
    assert len(decoded) == 3  # the last line of 1,000 and the new one
    FileSession("big", big / "files").undo()  # cuts the file in place: another generation
    assert read_page(session, -1, 1).total == BIG
    assert session._lines is not index
