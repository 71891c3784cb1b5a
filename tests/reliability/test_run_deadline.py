"""A run's ``timeout=`` holds when the PostgreSQL server behind its session hangs.

The server is frozen by a :class:`~tests.reliability.tcp_proxy.TcpProxy` (connections stay
open, nothing is forwarded), so a store call waits as long as its client lets it. The run
must still end at its deadline, with ``RunTimeoutError``, whatever the store's own limits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from aniki import Agent, Runner, RunTimeoutError
from aniki.sessions import AsyncPostgresSession, PostgresSession
from aniki.testing import MockProvider

from ..core.helpers import drive
from ..servers import drop_postgres_tables, postgres_dsn, unique_name
from .tcp_proxy import TcpProxy

TIMEOUT = 3.0
SLACK = 0.75


@pytest.fixture
def table() -> Iterator[str]:
    postgres_dsn()
    name = unique_name("deadline")
    yield name
    drop_postgres_tables(name)


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    parts = urlsplit(postgres_dsn())
    with TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5432) as made:
        yield made


def through(proxy: TcpProxy) -> str:
    parts = urlsplit(postgres_dsn())
    return f"postgresql://{parts.username or 'postgres'}@127.0.0.1:{proxy.port}{parts.path}"


def agent_on(session: Any) -> Agent:
    return Agent("A", model="m", provider=MockProvider(handler=lambda r: "reply"), session=session)


async def close(session: Any) -> None:
    result = session.aclose() if hasattr(session, "aclose") else session.close()
    if asyncio.iscoroutine(result):
        await result


@pytest.mark.parametrize(
    ("kind", "mode"),
    [
        ("sync", "run"),
        ("sync", "run_sync"),
        ("sync", "stream"),
        ("async", "run"),
        ("async", "stream"),
    ],
)
async def test_a_frozen_postgres_cannot_hold_a_run_past_its_timeout(
    kind: str, mode: str, table: str, proxy: TcpProxy
) -> None:
    cls = PostgresSession if kind == "sync" else AsyncPostgresSession
    session: Any = cls("frozen", through(proxy), table=table)
    try:
        agent = agent_on(session)
        if mode != "run_sync":  # an async connection belongs to the loop that opened it
            await Runner().run(agent, message="before")  # connected, tables made
        proxy.freeze()
        started = time.monotonic()
        with pytest.raises(RunTimeoutError):
            await drive(mode, Runner(), agent, message="go", timeout=TIMEOUT)
        assert time.monotonic() - started < TIMEOUT + SLACK
    finally:
        proxy.thaw()
        await asyncio.sleep(0.5)  # a write under way when the deadline passed may complete
    reader = PostgresSession("frozen", postgres_dsn(), table=table)
    try:
        contents = [m.content for m in reader.get_messages()]
    finally:
        reader.close()
    before = [] if mode == "run_sync" else ["before", "reply"]
    # Never a reply without its question; a stream stores no reply after its deadline.
    allowed = [before, [*before, "go"]]
    if mode != "stream":
        allowed.append([*before, "go", "reply"])
    assert contents in allowed
    proxy.cut()
    await close(session)
