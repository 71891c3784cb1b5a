"""PostgresSession and AsyncPostgresSession against the real server (skipped when it is down)."""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from aniki import Message, SchemaVersionError, StoreError, StoreUnavailableError, UserError
from aniki.sessions import _codec, open_store
from aniki.sessions.postgres import AsyncPostgresSession, PostgresSession
from aniki.sessions.postgres import _core as _postgres_core
from aniki.sessions.postgres import _sql as _postgres_sql
from aniki.sessions.postgres._schema import LAYOUT_VERSION
from aniki.testing.conformance import SessionConformance, SessionFactory

from ..servers import drop_postgres_tables, postgres_dsn, unique_name
from .stores import Opener, counting

pytestmark = pytest.mark.postgres

# One table family for the conformance classes: every check uses ids unique to it.
SUITE_TABLE = unique_name("aniki_suite")


@pytest.fixture(scope="module")
def suite_table() -> Iterator[str]:
    postgres_dsn()
    yield SUITE_TABLE
    drop_tables(SUITE_TABLE)


@pytest.mark.usefixtures("suite_table")
class TestPostgresConformance(SessionConformance):
    assigns_ids = supports_fork_and_undo = supports_info = True
    session_class: type = PostgresSession
    asynchronous = False

    def session_factory(self) -> SessionFactory:
        return functools.partial(self.session_class, dsn=postgres_dsn(), table=SUITE_TABLE)

    def store_factory(self) -> Any:
        return open_store(postgres_dsn(), asynchronous=self.asynchronous, table=SUITE_TABLE)


class TestAsyncPostgresConformance(TestPostgresConformance):
    session_class = AsyncPostgresSession
    asynchronous = True


def drop_tables(table: str) -> None:
    """Drop every table a PostgreSQL store named ``table`` creates, its attachments' too."""
    drop_postgres_tables(table)
    *schema, base = table.split(".")
    with psycopg.connect(postgres_dsn(), autocommit=True) as conn:
        for suffix in ("_blobs", "_blob_refs"):
            name = sql.Identifier(*schema, base + suffix)
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(name))


@pytest.fixture
def table() -> Iterator[str]:
    postgres_dsn()
    name = unique_name("aniki_test")
    yield name
    drop_tables(name)


@pytest.fixture(params=[PostgresSession, AsyncPostgresSession], ids=["sync", "async"])
def store(request: pytest.FixtureRequest, table: str) -> Iterator[Opener]:
    opener = Opener(request.param, dsn=postgres_dsn(), table=table)
    yield opener
    opener.close()


def admin(statement: str, *args: object) -> list[tuple[object, ...]]:
    with psycopg.connect(postgres_dsn(), autocommit=True) as conn:
        cursor = conn.execute(statement, args or None)
        return cursor.fetchall() if cursor.description else []


# --- incremental reads ----------------------------------------------------------------


def test_a_cached_reader_decodes_only_new_messages(
    store: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader, writer = store.open("s"), store.open("s")
    store.add(writer, *[f"m{i}" for i in range(50)])
    assert len(store.read(reader)) == 50
    decoded = counting(monkeypatch, _codec, "decode_message")  # through decode_records
    store.add(writer, "new 1", "new 2")
    assert store.read(reader)[-3:] == ["m49", "new 1", "new 2"]
    assert len(decoded) == 2
    assert store.read(reader, limit=1) == ["new 2"]
    assert len(decoded) == 2
    assert len(store.read(writer)) == 52  # the writer holds what it wrote
    assert len(decoded) == 2


def test_a_reader_polling_while_writers_append_misses_nothing(table: str) -> None:
    # Appends to one session commit in seq order, so a reader that has seen seq <= n and asks
    # for seq > n never skips a message committed after its read.
    dsn, writers, batches = postgres_dsn(), 4, 60
    errors: list[BaseException] = []

    def write(writer: int) -> None:
        with PostgresSession("busy", dsn, table=table) as session:
            try:
                for i in range(batches):
                    session.add_messages(
                        [
                            {"role": "user", "content": f"w{writer}:{i}:a"},
                            {"role": "user", "content": f"w{writer}:{i}:b"},
                        ]
                    )
            except BaseException as exc:
                errors.append(exc)

    with PostgresSession("busy", dsn, table=table) as reader:
        reader.add_message({"role": "user", "content": "start"})
        threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
        for thread in threads:
            thread.start()
        polls = 0
        while any(thread.is_alive() for thread in threads):
            reader.get_messages()
            polls += 1
        for thread in threads:
            thread.join()
        seen = [m.content for m in reader.get_messages()]
    with PostgresSession("busy", dsn, table=table) as fresh:
        stored = [m.content for m in fresh.get_messages()]
    assert errors == []
    assert polls > 1
    assert len(stored) == 1 + writers * batches * 2
    assert seen == stored


def test_an_append_that_waited_on_another_reads_again_and_misses_nothing(
    table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fused append-and-read statement reads the snapshot taken when it started. When it
    # waits for another append's row lock, that snapshot lacks the other append: the session
    # must notice and read again rather than return a history with a hole in it.
    dsn = postgres_dsn()
    session = PostgresSession("waits", dsn, table=table)
    session.add_message({"role": "user", "content": "first"})
    assert len(session.get_messages()) == 1
    statements = _postgres_sql.statements(table)
    other = psycopg.connect(dsn)  # a writer in an open transaction, holding the row lock
    other.execute(
        statements.append,
        {"sid": "waits", "n": 1, "records": ['{"role":"user","content":"theirs"}']},
    )
    steps = counting(monkeypatch, _postgres_core, "Query")
    done: list[tuple[Message, ...]] = []
    mine = Message(role="user", content="mine")
    waiter = threading.Thread(target=lambda: done.append(session._add_then_get([mine])))
    waiter.start()
    deadline = time.monotonic() + 10
    while not admin(
        "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
        f"%{table}%",
    ):
        assert time.monotonic() < deadline, "the fused append never waited for the lock"
        time.sleep(0.01)
    other.commit()
    waiter.join(10)
    other.close()
    assert [m.content for m in done[0]] == ["first", "theirs", "mine"]
    assert len(steps) == 2  # the fused statement, then a read afresh
    fresh = PostgresSession("waits", dsn, table=table)
    assert fresh.get_messages() == done[0]
    fresh.close()
    session.close()


@pytest.mark.parametrize("autocommit", [False, True], ids=["transaction-pool", "autocommit-pool"])
def test_each_pooled_operation_is_one_round_trip_and_the_pool_keeps_its_mode(
    table: str, tmp_path: Path, autocommit: bool
) -> None:
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(
        postgres_dsn(), min_size=1, max_size=1, kwargs={"autocommit": autocommit}, open=True
    )
    try:
        session = PostgresSession("pooled", pool=pool, table=table)
        session.add_message({"role": "user", "content": "creates the tables"})
        trace = tmp_path / "libpq.trace"
        with trace.open("w") as handle:
            with pool.connection() as conn:  # the pool's only connection: the session's too
                conn.pgconn.trace(handle.fileno())
            session.add_message({"role": "user", "content": "one"})
            session.add_messages([{"role": "user", "content": "two"}])
            assert [m.content for m in session.get_messages()][-2:] == ["one", "two"]
            with pool.connection() as conn:
                conn.pgconn.untrace()
                assert conn.autocommit is autocommit
        # Lines read "[time] F|B length type args...": a request the client sends ends with
        # Sync (or is one simple Query), and waits for the server's answer.
        sent = [line.split("\t") for line in trace.read_text().splitlines()]
        kinds = [fields[fields.index("F") + 2] for fields in sent if "F" in fields]
        assert kinds.count("Sync") + kinds.count("Query") == 3, kinds
        with PostgresSession("pooled", postgres_dsn(), table=table) as other:
            assert len(other.get_messages()) == 3  # committed
    finally:
        pool.close()


def test_a_limited_read_on_a_fresh_instance_decodes_only_the_tail(
    store: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.add(store.open("s"), *[f"m{i}" for i in range(200)])
    decoded = counting(monkeypatch, _codec, "decode_message")  # through decode_records
    reader = store.open("s")
    assert store.read(reader, limit=3) == ["m197", "m198", "m199"]
    assert len(decoded) == 3
    assert store.read(reader, limit=0) == []
    assert len(store.read(reader)) == 200  # a full read still sees everything
    assert store.read(reader, limit=2) == ["m198", "m199"]


def test_a_clear_and_refill_by_another_instance_replaces_the_cache(store: Opener) -> None:
    reader, writer = store.open("s"), store.open("s")
    store.add(writer, "a", "b", "c")
    assert store.read(reader) == ["a", "b", "c"]
    store.call(writer, "clear")
    store.add(writer, "x", "y", "z", "w")
    assert store.read(reader) == ["x", "y", "z", "w"]


# --- tables -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "",
        "1abc",
        "a-b",
        'x"; DROP TABLE y; --',
        "a b",
        "a.b.c",
        ".a",
        "a.",
        "x" * 49,
        "\u00e9t\u00e9",
        "t\x00",
        None,
        5,
    ],
)
def test_invalid_table_names_are_refused(name: object) -> None:
    with pytest.raises(UserError, match="invalid table name"):
        PostgresSession("x", "postgresql://u@h/d", table=name)  # type: ignore[arg-type]


def test_tables_are_created_once_even_by_many_first_users_at_once(table: str) -> None:
    barrier, errors = threading.Barrier(6), []

    def first_use(n: int) -> None:
        session = PostgresSession(f"s{n}", postgres_dsn(), table=table)
        try:
            barrier.wait()
            session.add_message({"role": "user", "content": f"{n}"})
        except Exception as exc:
            errors.append(exc)
        finally:
            session.close()

    threads = [threading.Thread(target=first_use, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    counted = admin(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table)).as_string())
    assert counted == [(6,)]
    assert admin(f'SELECT version FROM "{table}_schema"') == [(LAYOUT_VERSION,)]


def test_a_schema_qualified_table_and_a_mixed_case_name_work(store: Opener) -> None:
    schema = unique_name("aniki_schema")
    admin(f'CREATE SCHEMA "{schema}"')
    try:
        for name in (f"{schema}.msgs", f"{schema}.MixedCase"):
            session = store.open("q", table=name)
            store.add(session, "hi")
            assert store.read(store.open("q", table=name)) == ["hi"]
        tables = admin(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", schema
        )
        assert {"msgs", "MixedCase", "msgs_sessions", "MixedCase_meta"} <= {t for (t,) in tables}
    finally:
        admin(f'DROP SCHEMA "{schema}" CASCADE')


def test_dropped_tables_are_created_again(store: Opener, table: str) -> None:
    session = store.open("s")
    store.add(session, "before")
    drop_postgres_tables(table)
    store.add(session, "after")
    assert store.read(store.open("s")) == ["after"]


def test_a_newer_schema_is_refused_and_left_untouched(
    store: Opener, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.add(store.open("s"), "kept")
    before = admin(f'SELECT message FROM "{table}"')
    assert len(before) == 1 and '"content":"kept"' in before[0][0]
    admin(f'UPDATE "{table}_schema" SET version = 99')
    monkeypatch.setattr(_postgres_core, "_READY", set())  # as in a process started afterwards
    fresh = store.open("s")
    for method, args in [
        ("get_messages", ()),
        ("add_message", ({"role": "user", "content": "x"},)),
        ("clear", ()),
        ("list_sessions", ()),
    ]:
        with pytest.raises(SchemaVersionError, match="upgrade aniki"):
            store.call(fresh, method, *args)
    assert admin(f'SELECT message FROM "{table}"') == before
    assert admin(f'SELECT version FROM "{table}_schema"') == [(99,)]


def test_an_older_schema_is_upgraded_in_place(
    store: Opener, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.add(store.open("s"), "kept")
    admin(f'UPDATE "{table}_schema" SET version = 0')
    monkeypatch.setattr(_postgres_core, "_READY", set())
    assert store.read(store.open("s")) == ["kept"]
    assert admin(f'SELECT version FROM "{table}_schema"') == [(LAYOUT_VERSION,)]


# --- ids and values -------------------------------------------------------------------

HOSTILE = ["*", "?", "[", "%", "_", "../../x", "'; DROP TABLE x; --", "$1", "%(sid)s", "\\"]


def test_hostile_ids_are_stored_verbatim_and_stay_apart(store: Opener, table: str) -> None:
    for session_id in HOSTILE:
        store.add(store.open(session_id), f"for {session_id}")
    store.call(store.open("%"), "clear")
    for session_id in HOSTILE:
        expected = [] if session_id == "%" else [f"for {session_id}"]
        assert store.read(store.open(session_id)) == expected, session_id
    stored = {sid for (sid,) in admin(f'SELECT DISTINCT session_id FROM "{table}"')}
    assert stored == set(HOSTILE) - {"%"}


def test_nul_in_ids_and_meta_keys_and_very_long_ids_are_refused_clearly(store: Opener) -> None:
    for bad in ["nul\x00id", "x" * 10_000, ""]:
        with pytest.raises(UserError, match="session id"):
            store.open(bad)
    session = store.open("ok")
    with pytest.raises(UserError, match="NUL"):
        store.call(session, "set_meta", "a\x00b", 1)
    store.call(session, "set_meta", "nul in the value", "a\x00b")
    assert store.call(session, "get_meta", "nul in the value") == "a\x00b"


def test_list_sessions_reports_counts_and_last_update(store: Opener) -> None:
    before = datetime.now(timezone.utc) - timedelta(seconds=5)
    store.add(store.open("older"), "1", "2")
    store.add(store.open("newer"), "1")
    store.call(store.open("meta only"), "set_meta", "k", "v")
    listed = store.call(store.open("any"), "list_sessions")
    assert [(info.id, info.message_count) for info in listed] == [("newer", 1), ("older", 2)]
    for info in listed:
        assert info.updated_at is not None and info.updated_at >= before
        assert info.updated_at.tzinfo == timezone.utc


# --- connections and faults -----------------------------------------------------------


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://postgres:s3cret-pw@127.0.0.1:1/test",
        "host=127.0.0.1 port=1 user=postgres password=s3cret-pw dbname=test",
    ],
)
def test_a_closed_port_raises_store_unavailable_with_the_password_hidden(
    store: Opener, dsn: str
) -> None:
    session = store.open("x", dsn=dsn)
    with pytest.raises(StoreUnavailableError) as caught:
        store.add(session, "hi")
    text = str(caught.value)
    assert "server is running" in text
    assert "s3cret-pw" not in text and "***" in text
    assert isinstance(caught.value.__cause__, psycopg.OperationalError)


def test_an_unknown_database_raises_a_clear_store_error(store: Opener) -> None:
    missing = unique_name("no_such_db")
    session = store.open("x", dsn=postgres_dsn().rsplit("/", 1)[0] + "/" + missing)
    with pytest.raises(StoreUnavailableError, match="CREATE DATABASE") as caught:
        store.read(session)
    assert missing in str(caught.value)


def test_an_unknown_user_raises_a_clear_store_error(store: Opener) -> None:
    host_db = postgres_dsn().split("@", 1)[1]
    session = store.open("x", dsn=f"postgresql://no_such_user:pw@{host_db}")
    with pytest.raises(StoreUnavailableError, match="user name and password") as caught:
        store.read(session)
    assert ":pw@" not in str(caught.value)


def test_a_server_restart_is_survived_by_the_next_call(store: Opener) -> None:
    session = store.open("s")
    store.add(session, "one")
    pid = store.run(_backend_pid(session))
    admin("SELECT pg_terminate_backend(%s)", pid)
    with pytest.raises(StoreUnavailableError):
        store.add(session, "lost with the connection")
    store.add(session, "two")
    assert store.read(store.open("s")) == ["one", "two"]


async def _async_pid(session: AsyncPostgresSession) -> int:
    assert session._conn is not None
    return session._conn.info.backend_pid


def _backend_pid(session: PostgresSession | AsyncPostgresSession) -> object:
    if isinstance(session, AsyncPostgresSession):
        return _async_pid(session)
    assert session._conn is not None
    return session._conn.info.backend_pid


def test_an_invalid_dsn_is_refused_with_the_password_hidden() -> None:
    with pytest.raises(UserError, match="invalid PostgreSQL DSN") as caught:
        PostgresSession("x", "host=h password=s3cret-pw 'broken")
    assert "s3cret-pw" not in str(caught.value)
    assert caught.value.__context__ is None  # raised outside the driver's error: no chain at all


def test_a_dsn_or_a_pool_is_needed_but_not_both() -> None:
    with pytest.raises(UserError, match="dsn"):
        PostgresSession("x")


def test_a_missing_psycopg_package_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    for cls in (PostgresSession, AsyncPostgresSession):
        with pytest.raises(UserError, match=r"pip install 'aniki-sdk\[postgres\]'"):
            cls("x", "postgresql://u@h/d")


def test_sessions_share_a_sync_pool(table: str) -> None:
    from psycopg_pool import ConnectionPool

    with ConnectionPool(postgres_dsn(), min_size=1, max_size=2, open=True) as pool:
        sessions = [PostgresSession(f"p{n}", table=table, pool=pool) for n in range(5)]
        for n, session in enumerate(sessions):
            session.add_messages([{"role": "user", "content": f"{n}.{i}"} for i in range(3)])
        again = PostgresSession("p3", table=table, pool=pool)
        assert [m.content for m in again.get_messages()] == ["3.0", "3.1", "3.2"]
        assert len(again.list_sessions()) == 5
        again.close()  # leaves the pool open
        assert not pool.closed


async def test_sessions_share_an_async_pool(table: str) -> None:
    from psycopg_pool import AsyncConnectionPool

    async with AsyncConnectionPool(postgres_dsn(), min_size=1, max_size=2, open=False) as pool:
        sessions = [AsyncPostgresSession(f"p{n}", table=table, pool=pool) for n in range(4)]
        for n, session in enumerate(sessions):
            await session.add_message({"role": "user", "content": f"{n}"})
        reader = AsyncPostgresSession("p2", table=table, pool=pool)
        assert [m.content for m in await reader.get_messages()] == ["2"]
        await sessions[2].clear()
        assert await reader.get_messages() == ()


async def test_async_sessions_context_manager_closes_the_connection(table: str) -> None:
    async with AsyncPostgresSession("c", postgres_dsn(), table=table) as session:
        await session.add_message({"role": "user", "content": "hi"})
        assert session._conn is not None
    assert session._conn is None
    assert "***" not in repr(session) and "table" in repr(session)


def test_store_errors_never_leak_a_raw_driver_exception(store: Opener, table: str) -> None:
    session = store.open("s")
    store.add(session, "kept")
    admin(f'ALTER TABLE "{table}" ADD CONSTRAINT no_more CHECK (seq < 0) NOT VALID')
    with pytest.raises(StoreError, match="PostgreSQL failed") as caught:
        store.add(session, "refused")
    assert isinstance(caught.value.__cause__, psycopg.Error)
    assert store.read(store.open("s")) == ["kept"]


def test_a_user_with_only_data_rights_works_and_a_missing_right_is_named(
    table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner = PostgresSession("s", postgres_dsn(), table=table)
    owner.add_message({"role": "user", "content": "by the owner"})
    owner.close()
    role = unique_name("aniki_role")
    admin(f'CREATE ROLE "{role}" LOGIN')
    try:
        for suffix in ("", "_sessions", "_meta", "_schema"):
            admin(f'GRANT SELECT, INSERT, UPDATE, DELETE ON "{table}{suffix}" TO "{role}"')
        admin(f'REVOKE DELETE ON "{table}_meta" FROM "{role}"')
        monkeypatch.setattr(_postgres_core, "_READY", set())  # as in a fresh process
        host_db = postgres_dsn().split("@", 1)[1]
        with PostgresSession("s", f"postgresql://{role}@{host_db}", table=table) as session:
            session.add_message({"role": "user", "content": "by the app"})
            session.set_meta("k", 1)
            assert [m.content for m in session.get_messages()] == ["by the owner", "by the app"]
            with pytest.raises(StoreError, match="lacks a privilege"):
                session.clear()
            assert len(session.get_messages()) == 2  # the refused clear changed nothing
    finally:
        admin(f'DROP OWNED BY "{role}"')
        admin(f'DROP ROLE "{role}"')


def test_a_pool_without_a_free_connection_raises_store_unavailable(table: str) -> None:
    from psycopg_pool import ConnectionPool

    with ConnectionPool(postgres_dsn(), min_size=1, max_size=1, timeout=0.3) as pool:
        session = PostgresSession("s", table=table, pool=pool)
        session.add_message({"role": "user", "content": "hi"})
        taken = pytest.raises(StoreUnavailableError, match="no pooled connection")
        with pool.connection(), taken:  # the only connection is in use
            session.get_messages()
        assert [m.content for m in session.get_messages()] == ["hi"]


# --- bad input to the constructors --------------------------------------------------------


@pytest.mark.parametrize("cls", [PostgresSession, AsyncPostgresSession], ids=["sync", "async"])
@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"pool": "x"}, "pool must be a psycopg_pool"),
        ({"pool": 3}, "pool must be a psycopg_pool"),
        ({"dsn": 123}, "dsn must be a string"),
        ({"dsn": b"postgresql://localhost/test"}, "dsn must be a string"),
        ({"dsn": "postgresql://u:pw-9@h/db", "timeout": -1}, "timeout must be"),
        ({"dsn": "postgresql://u:pw-9@h/db", "timeout": 0}, "timeout must be"),
        ({"dsn": "postgresql://u:pw-9@h/db", "timeout": float("nan")}, "timeout must be"),
        ({"dsn": "postgresql://u:pw-9@h/db", "timeout": float("inf")}, "timeout must be"),
        ({"dsn": "postgresql://u:pw-9@h/db", "timeout": "5"}, "timeout must be"),
        ({"dsn": "postgresql://u:pw-9@h/db", "timeout": True}, "timeout must be"),
        ({"dsn": "postgresql://u:pw-9@h/db", "table": 5}, "invalid table name"),
        ({}, "needs a dsn"),
    ],
)
def test_bad_constructor_arguments_are_user_errors(
    cls: type, options: dict[str, object], words: str
) -> None:
    with pytest.raises(UserError, match=words) as info:
        cls("x", **options)
    assert "pw-9" not in str(info.value)


def test_a_pool_of_the_other_kind_is_refused() -> None:
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

    sync_pool = ConnectionPool("postgresql://localhost/test", open=False)
    async_pool = AsyncConnectionPool("postgresql://localhost/test", open=False)
    with pytest.raises(UserError, match=r"psycopg_pool\.AsyncConnectionPool"):
        AsyncPostgresSession("x", pool=sync_pool)  # type: ignore[arg-type]
    with pytest.raises(UserError, match=r"psycopg_pool\.ConnectionPool"):
        PostgresSession("x", pool=async_pool)  # type: ignore[arg-type]


@pytest.mark.parametrize("autocommit", [False, True], ids=["transaction-pool", "autocommit-pool"])
async def test_an_async_pools_one_connection_comes_back_in_its_mode_even_from_a_cancelled_call(
    table: str, autocommit: bool
) -> None:
    import asyncio

    from psycopg_pool import AsyncConnectionPool

    kwargs = {"autocommit": autocommit}
    async with AsyncConnectionPool(
        postgres_dsn(), min_size=1, max_size=1, kwargs=kwargs, open=False, timeout=5
    ) as pool:
        session = AsyncPostgresSession("one", pool=pool, table=table)
        await session.add_message({"role": "user", "content": "first"})
        # Another client holds the table: the next append waits on the server, and is
        # cancelled there.
        with psycopg.connect(postgres_dsn()) as holder:
            holder.execute(f'LOCK TABLE "{table}" IN ACCESS EXCLUSIVE MODE')
            waiting = asyncio.ensure_future(
                session.add_message({"role": "user", "content": "cancelled"})
            )
            await asyncio.sleep(0.3)
            assert not waiting.done()
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
        async with pool.connection(timeout=2) as conn:  # the only one: it came back
            assert conn.autocommit is autocommit
        await session.add_message({"role": "user", "content": "after"})
        contents = [m.content for m in await session.get_messages()]
        assert contents == ["first", "after"]
        assert pool.get_stats().get("requests_errors", 0) == 0
