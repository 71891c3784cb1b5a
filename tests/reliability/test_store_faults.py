"""Store servers that go away and come back: clear errors while down, normal work after,
nothing acknowledged lost.

Two ways to take a server away without disturbing the shared ones other tests use:

* a :class:`~tests.reliability.tcp_proxy.TcpProxy` in front of the real Redis or PostgreSQL
  server, cut (every connection closed, the port refusing) and restored on the same port;
* a private ``redis-server`` started by the test, killed with SIGKILL and started again, both
  without persistence (the data is gone: a session must not serve it from its cache) and with
  ``appendfsync always`` (every acknowledged append must survive).

Each check runs the sync and the async class, with the same session object before and after.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from aniki import Message, StoreUnavailableError
from aniki.sessions import (
    AsyncPostgresSession,
    AsyncRedisSession,
    PostgresSession,
    RedisSession,
)

from ..servers import (
    delete_redis_prefix,
    drop_postgres_tables,
    postgres_dsn,
    redis_url,
    unique_name,
)
from ..sessions.stores import Opener
from .tcp_proxy import TcpProxy, free_port

REDIS_CLASSES = [RedisSession, AsyncRedisSession]
POSTGRES_CLASSES = [PostgresSession, AsyncPostgresSession]


def class_id(cls: type) -> str:
    return "async" if cls.__name__.startswith("Async") else "sync"


@pytest.fixture
def prefix() -> Iterator[str]:
    redis_url()
    name = unique_name("aniki-faults") + ":"
    yield name
    delete_redis_prefix(name)


@pytest.fixture
def table() -> Iterator[str]:
    postgres_dsn()
    name = unique_name("faults")
    yield name
    drop_postgres_tables(name)


def redis_through(proxy: TcpProxy) -> str:
    parts = urlsplit(redis_url())
    return f"redis://127.0.0.1:{proxy.port}{parts.path or '/0'}"


def postgres_through(proxy: TcpProxy) -> str:
    parts = urlsplit(postgres_dsn())
    user = parts.username or "postgres"
    return f"postgresql://{user}@127.0.0.1:{proxy.port}{parts.path}?connect_timeout=5"


def target(url: str, default_port: int) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or default_port


def assert_down(opener: Opener, session: Any, words: str) -> None:
    """Every kind of call fails with StoreUnavailableError naming the problem."""
    for call in (
        lambda: opener.add(session, "while down"),
        lambda: opener.read(session),
        lambda: opener.call(session, "set_meta", "k", 1),
        lambda: opener.call(session, "clear"),
    ):
        with pytest.raises(StoreUnavailableError, match=words) as info:
            call()
        assert info.value.__cause__ is not None


def cut_and_restore(opener: Opener, proxy: TcpProxy, words: str) -> None:
    """Write, cut, fail clearly, restore, and carry on with the same session objects."""
    session = opener.open("s")
    untouched = opener.open("never used before the cut")
    opener.add(session, "one", "two")
    opener.call(session, "set_meta", "summary", "so far")
    assert opener.read(session) == ["one", "two"]

    proxy.cut()
    assert_down(opener, session, words)
    assert_down(opener, untouched, words)
    proxy.restore()

    assert opener.read(session) == ["one", "two"]  # nothing acknowledged was lost
    opener.add(session, "three")
    assert opener.read(session) == ["one", "two", "three"]
    assert opener.call(session, "get_meta", "summary") == "so far"
    opener.add(untouched, "first")
    assert opener.read(untouched) == ["first"]
    assert proxy.connections >= 2  # the sessions really reconnected through the proxy


@pytest.mark.redis
@pytest.mark.parametrize("cls", REDIS_CLASSES, ids=class_id)
def test_redis_going_away_and_coming_back(cls: type, prefix: str) -> None:
    with TcpProxy(*target(redis_url(), 6379)) as proxy:
        opener = Opener(cls, url=redis_through(proxy), prefix=prefix)
        try:
            cut_and_restore(opener, proxy, "cannot reach Redis")
        finally:
            opener.close()
    direct = Opener(cls, url=redis_url(), prefix=prefix)
    try:
        assert direct.read(direct.open("s")) == ["one", "two", "three"]
    finally:
        direct.close()


@pytest.mark.postgres
@pytest.mark.parametrize("cls", POSTGRES_CLASSES, ids=class_id)
def test_postgres_going_away_and_coming_back(cls: type, table: str) -> None:
    with TcpProxy(*target(postgres_dsn(), 5432)) as proxy:
        opener = Opener(cls, dsn=postgres_through(proxy), table=table)
        try:
            cut_and_restore(opener, proxy, "cannot use PostgreSQL")
        finally:
            opener.close()
    direct = Opener(cls, dsn=postgres_dsn(), table=table)
    try:
        assert direct.read(direct.open("s")) == ["one", "two", "three"]
    finally:
        direct.close()


@pytest.mark.postgres
@pytest.mark.parametrize("cls", POSTGRES_CLASSES, ids=class_id)
def test_postgres_reads_outlive_a_connection_that_died_while_idle(cls: type, table: str) -> None:
    with TcpProxy(*target(postgres_dsn(), 5432)) as proxy:
        opener = Opener(cls, dsn=postgres_through(proxy), table=table)
        try:
            session = opener.open("idle")
            opener.add(session, "one")
            opener.call(session, "set_meta", "summary", "so far")
            reads: list[Callable[[], Any]] = [
                lambda: opener.read(session),
                lambda: opener.call(session, "get_meta", "summary"),
                lambda: [info.id for info in opener.call(session, "list_sessions")],
            ]
            for read, expected in zip(reads, [["one"], "so far", ["idle"]], strict=True):
                opener.read(session)  # the session's connection is open
                proxy.cut()  # the server goes away and comes back while it is idle
                proxy.restore()
                assert read() == expected  # a read is simply made again
            opener.read(session)
            proxy.cut()
            proxy.restore()
            with pytest.raises(StoreUnavailableError):
                opener.add(session, "two")  # a write is not: it might have committed
            opener.add(session, "two")
            assert opener.read(session) == ["one", "two"]
        finally:
            opener.close()


@pytest.mark.parametrize(
    ("cls", "location"),
    [
        (RedisSession, "redis://:pw-closed-7@127.0.0.1:{port}/0"),
        (AsyncRedisSession, "redis://:pw-closed-7@127.0.0.1:{port}/0"),
        (PostgresSession, "postgresql://postgres:pw-closed-7@127.0.0.1:{port}/test"),
        (AsyncPostgresSession, "postgresql://postgres:pw-closed-7@127.0.0.1:{port}/test"),
    ],
    ids=["redis-sync", "redis-async", "postgres-sync", "postgres-async"],
)
def test_a_closed_port_is_a_clear_error_that_hides_the_password(cls: type, location: str) -> None:
    port = free_port()
    option = "url" if "redis" in location else "dsn"
    opener = Opener(cls, **{option: location.format(port=port)})
    try:
        session = opener.open("s")
        for call in (lambda: opener.add(session, "hi"), lambda: opener.read(session)):
            with pytest.raises(StoreUnavailableError) as info:
                call()
            text = str(info.value)
            assert f"127.0.0.1:{port}" in text and "***" in text
            assert "pw-closed-7" not in text and "pw-closed-7" not in repr(session)
    finally:
        opener.close()


# --- writers that keep writing while the server flaps -------------------------------------------


class Writer(threading.Thread):
    """Appends ``m0``, ``m1``, ... to a session until stopped, recording what was acknowledged."""

    def __init__(self, session: Any) -> None:
        super().__init__(daemon=True)
        self.session = session
        self.acked: list[int] = []
        self.failed: list[int] = []
        self.stop = threading.Event()
        self.unexpected: list[BaseException] = []

    def run(self) -> None:
        index = 0
        while not self.stop.is_set():
            try:
                self.session.add_message({"role": "user", "content": f"m{index}"})
            except StoreUnavailableError:
                self.failed.append(index)
                time.sleep(0.005)
            except BaseException as exc:
                self.unexpected.append(exc)
                return
            else:
                self.acked.append(index)
            index += 1


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.005)


def assert_nothing_acknowledged_lost(contents: list[str], writer: Writer) -> None:
    """Every acknowledged append is there once and in order; anything else failed visibly."""
    assert not writer.unexpected, writer.unexpected
    numbers = [int(content[1:]) for content in contents]
    assert numbers == sorted(set(numbers)), "duplicated or reordered"
    assert set(writer.acked) <= set(numbers), "an acknowledged append was lost"
    # An append whose reply was cut off may have been stored: it raised, so it is not lost.
    assert set(numbers) - set(writer.acked) <= set(writer.failed)


def flap(proxy: TcpProxy, writer: Writer, cycles: int = 3) -> None:
    writer.start()
    try:
        for _ in range(cycles):
            acked, failed = len(writer.acked), len(writer.failed)
            wait_for(lambda acked=acked: len(writer.acked) >= acked + 20, "appends")
            proxy.cut()
            wait_for(lambda failed=failed: len(writer.failed) >= failed + 3, "failures")
            proxy.restore()
        acked = len(writer.acked)
        wait_for(lambda: len(writer.acked) >= acked + 20, "appends after the last restore")
    finally:
        writer.stop.set()
        writer.join(30)


@pytest.mark.redis
def test_redis_appends_through_a_flapping_connection_lose_nothing(prefix: str) -> None:
    with TcpProxy(*target(redis_url(), 6379)) as proxy:
        session = RedisSession("flap", redis_through(proxy), prefix=prefix)
        writer = Writer(session)
        flap(proxy, writer)
        session.close()
    reader = RedisSession("flap", redis_url(), prefix=prefix)
    assert_nothing_acknowledged_lost([m.content for m in reader.get_messages()], writer)
    reader.close()


@pytest.mark.postgres
def test_postgres_appends_through_a_flapping_connection_lose_nothing(table: str) -> None:
    with TcpProxy(*target(postgres_dsn(), 5432)) as proxy:
        session = PostgresSession("flap", postgres_through(proxy), table=table)
        writer = Writer(session)
        flap(proxy, writer)
        session.close()
    reader = PostgresSession("flap", postgres_dsn(), table=table)
    assert_nothing_acknowledged_lost([m.content for m in reader.get_messages()], writer)
    reader.close()


# --- a private Redis server, killed with SIGKILL and started again --------------------------------


class RedisServer:
    """A ``redis-server`` process of the test's own, on a free port, data in ``directory``."""

    def __init__(self, directory: Path, *, persistent: bool) -> None:
        self.directory = directory
        self.persistent = persistent
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        persistence = ["--appendonly", "yes", "--appendfsync", "always"]
        args = [
            "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            *(persistence if self.persistent else ["--appendonly", "no"]),
            "--dir",
            str(self.directory),
            "--logfile",
            str(self.directory / "redis.log"),
        ]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self._answers, f"redis-server on port {self.port}")
        return self

    def _answers(self) -> bool:
        import redis

        assert self.process is not None and self.process.poll() is None, self._log()
        client = redis.Redis(port=self.port, socket_connect_timeout=0.5)
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()

    def _log(self) -> str:
        log = self.directory / "redis.log"
        return log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"

    def kill(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(30)


@pytest.fixture
def redis_server_binary() -> None:
    if shutil.which("redis-server") is None:
        message = "redis-server is not installed"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message} (CI=true: every test must run)")
        pytest.skip(message)


@pytest.fixture
def servers(tmp_path: Path, redis_server_binary: None) -> Iterator[list[RedisServer]]:
    started: list[RedisServer] = []
    yield started
    for server in started:
        if server.process is not None and server.process.poll() is None:
            server.kill()


@pytest.mark.parametrize("cls", REDIS_CLASSES, ids=class_id)
def test_a_killed_redis_without_persistence_comes_back_empty_and_is_read_as_such(
    cls: type, tmp_path: Path, servers: list[RedisServer]
) -> None:
    server = RedisServer(tmp_path, persistent=False).start()
    servers.append(server)
    opener = Opener(cls, url=server.url)
    try:
        session = opener.open("s")
        opener.add(session, "one", "two")
        assert opener.read(session) == ["one", "two"]
        server.kill()
        assert_down(opener, session, "cannot reach Redis")
        server.start()
        # The restarted server holds nothing; the session must not serve its cached copy.
        assert opener.read(session) == []
        opener.add(session, "three")
        assert opener.read(session) == ["three"]
        assert opener.read(opener.open("s")) == ["three"]
    finally:
        opener.close()


@pytest.mark.parametrize("cls", REDIS_CLASSES, ids=class_id)
def test_a_killed_redis_with_appendfsync_always_keeps_every_acknowledged_append(
    cls: type, tmp_path: Path, servers: list[RedisServer]
) -> None:
    server = RedisServer(tmp_path, persistent=True).start()
    servers.append(server)
    opener = Opener(cls, url=server.url)
    try:
        session = opener.open("s")
        opener.add(session, *[f"m{i}" for i in range(20)])
        opener.call(session, "set_meta", "summary", {"upto": 19})
        server.kill()
        assert_down(opener, session, "cannot reach Redis")
        server.start()
        expected = [f"m{i}" for i in range(20)]
        assert opener.read(session) == expected
        assert opener.read(opener.open("s")) == expected
        assert opener.call(session, "get_meta", "summary") == {"upto": 19}
        opener.add(session, "after")
        assert opener.read(opener.open("s")) == [*expected, "after"]
    finally:
        opener.close()


def test_redis_killed_in_the_middle_of_appends_loses_nothing_acknowledged(
    tmp_path: Path, servers: list[RedisServer]
) -> None:
    server = RedisServer(tmp_path, persistent=True).start()
    servers.append(server)
    prefix = f"kill-{uuid.uuid4().hex[:6]}:"
    session = RedisSession("victim", server.url, prefix=prefix)
    writer = Writer(session)
    writer.start()
    try:
        wait_for(lambda: len(writer.acked) >= 50, "appends")
        server.kill()  # with appends in flight
        failed = len(writer.failed)
        wait_for(lambda: len(writer.failed) >= failed + 3, "failures while down")
        server.start()
        acked = len(writer.acked)
        wait_for(lambda: len(writer.acked) >= acked + 20, "appends after the restart")
    finally:
        writer.stop.set()
        writer.join(30)
    session.close()
    with RedisSession("victim", server.url, prefix=prefix) as reader:
        assert_nothing_acknowledged_lost([m.content for m in reader.get_messages()], writer)


@pytest.mark.postgres
def test_postgres_reads_through_a_pool_outlive_its_dead_connection(table: str) -> None:
    from psycopg_pool import ConnectionPool

    with TcpProxy(*target(postgres_dsn(), 5432)) as proxy:
        pool = ConnectionPool(postgres_through(proxy), min_size=1, max_size=1, open=True)
        try:
            session = PostgresSession("pooled", pool=pool, table=table)
            session.add_message({"role": "user", "content": "one"})
            assert [m.content for m in session.get_messages()] == ["one"]
            proxy.cut()
            proxy.restore()  # the pool's only connection is dead; the pool does not know yet
            assert [
                m.content for m in PostgresSession("pooled", pool=pool, table=table).get_messages()
            ] == ["one"]
        finally:
            pool.close()


@pytest.mark.redis
@pytest.mark.parametrize("cls", REDIS_CLASSES, ids=class_id)
@pytest.mark.parametrize("method", ["add_messages", "_add_then_get"])
def test_a_redis_reply_lost_after_the_append_is_resent_and_applied_once(
    cls: type, method: str, prefix: str
) -> None:
    # A session built from a URL: the server applies the append, the connection drops before
    # the reply arrives; the client resends the same batch (same token) on a new connection,
    # the script recognises it, and the caller sees one success and one stored copy.
    with TcpProxy(*target(redis_url(), 6379)) as proxy:
        opener = Opener(cls, url=redis_through(proxy), prefix=prefix)
        try:
            session = opener.open("lost-reply")
            opener.add(session, "before")  # the scripts are loaded, the connection is open
            for content in ("one", "two"):
                proxy.drop_next_reply()
                opener.call(session, method, [Message(role="user", content=content)])
            assert proxy.dropped == 2
            assert proxy.connections >= 3  # each resend went over a new connection
            assert opener.read(session) == ["before", "one", "two"]
            assert opener.read(opener.open("lost-reply")) == ["before", "one", "two"]
        finally:
            opener.close()
