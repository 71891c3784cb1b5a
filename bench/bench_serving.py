"""Benchmark serving many conversations from one event loop, as a web server does.

50 conversations of 20 turns run at once on one event loop; each turn goes through the
Runner with a model that takes 50 ms, so the ideal wall time is 20 x 50 ms = 1.0 s. A probe
task sleeping 5 ms at a time records how late the loop wakes it (the loop lag every other
request of the server would feel). Per store:

- aniki's synchronous stores under the async Runner, their async twins, and the async twins
  handed out by one ``open_store`` store;
- the SQLite stores again while another process holds the file's write lock for 1 s;
- openai-agents' sessions on the same stores where it has them (``SQLiteSession``,
  ``AsyncSQLiteSession``, ``RedisSession``, ``SQLAlchemySession`` on PostgreSQL), driven with
  the same pattern through their session API (read the history, 50 ms for the model, append
  the user message and the reply), which is what its Runner does with a session.

Targets: loop lag p99 at most 20 ms, wall at most 1.5x ideal, on every store.

Needs the servers of the test suite (Redis 127.0.0.1:6379, PostgreSQL 127.0.0.1:5432
database ``test``) and, for the peer rows, ``bench/requirements.txt``; everything it writes is
removed afterwards. Run: ``python bench/bench_serving.py`` (``--quick``: 10 x 5; ``--smoke``,
the test suite's run that keeps the script working: 3 x 2).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _stores import POSTGRES_DSN, REDIS_URL, store_urls

from aniki import Agent, Runner
from aniki.sessions import open_session, open_store
from aniki.testing import MockProvider

MODEL_SECONDS = 0.05
PROBE_SECONDS = 0.005

Turn = Callable[[int], Awaitable[None]]


async def _reply(_: Any) -> str:
    await asyncio.sleep(MODEL_SECONDS)
    return "Noted."


def _hold_sqlite_lock(path: Path, seconds: float) -> subprocess.Popen[bytes]:
    code = (
        "import sqlite3, sys, time\n"
        "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "conn.execute('BEGIN IMMEDIATE')\n"
        "time.sleep(float(sys.argv[2]))\n"
        "conn.execute('ROLLBACK')\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, str(path), str(seconds)], stdout=subprocess.DEVNULL
    )


async def _measure(
    conversations: list[Turn], turns: int, *, lock: Path | None = None, hold: float = 1.0
) -> dict[str, float]:
    """Run every conversation's turns at once, with the probe; the figures. With ``lock``,
    another process holds that SQLite file's write lock for ``hold`` seconds mid-run."""
    loop = asyncio.get_running_loop()
    lags: list[float] = []
    stop = asyncio.Event()

    async def probe() -> None:
        while not stop.is_set():
            start = loop.time()
            await asyncio.sleep(PROBE_SECONDS)
            lags.append(loop.time() - start - PROBE_SECONDS)

    async def converse(turn: Turn) -> None:
        for number in range(turns):
            await turn(number)

    holder: subprocess.Popen[bytes] | None = None
    probing = asyncio.create_task(probe())
    start = time.perf_counter()
    if lock is not None:
        await asyncio.sleep(turns * MODEL_SECONDS / 3)
        holder = await asyncio.to_thread(_hold_sqlite_lock, lock, hold)
    await asyncio.gather(*(converse(turn) for turn in conversations))
    wall = time.perf_counter() - start
    stop.set()
    await probing
    if holder is not None:
        await asyncio.to_thread(holder.wait)
    lags.sort()
    ideal = turns * MODEL_SECONDS + (hold if lock is not None else 0.0)
    return {
        "wall": wall,
        "ideal": ideal,
        "p50": lags[len(lags) // 2] * 1000,
        "p99": lags[min(len(lags) - 1, int(len(lags) * 0.99))] * 1000,
        "turns/s": len(conversations) * turns / wall,
    }


def _aniki_turns(sessions: list[Any]) -> list[Turn]:
    runner = Runner()
    agent = Agent(
        "Server", "Answer briefly.", model="scripted", provider=MockProvider(handler=_reply)
    )

    def turn_of(session: Any) -> Turn:
        async def turn(number: int) -> None:
            await runner.run(agent, message=f"turn {number}", session=session)

        return turn

    return [turn_of(session) for session in sessions]


def _peer_turns(sessions: list[Any]) -> list[Turn]:
    def turn_of(session: Any) -> Turn:
        async def turn(number: int) -> None:
            await session.get_items()
            await asyncio.sleep(MODEL_SECONDS)
            await session.add_items(
                [
                    {"role": "user", "content": f"turn {number}"},
                    {"role": "assistant", "content": "Noted."},
                ]
            )

        return turn

    return [turn_of(session) for session in sessions]


async def _clear(sessions: list[Any]) -> None:
    for session in sessions:
        clear = getattr(session, "clear", None) or session.clear_session
        result = clear()
        if asyncio.iscoroutine(result):
            await result
        for name in ("aclose", "close"):
            closer = getattr(session, name, None)
            if callable(closer):
                done = closer()
                if asyncio.iscoroutine(done):
                    await done
                break


async def _aniki_rows(
    directory: Path, count: int, turns: int, hold: float
) -> list[tuple[str, ...]]:
    urls = store_urls(directory)
    rows: list[tuple[str, ...]] = []
    for store, url in urls.items():
        for how in ("sync store", "async twin", "open_store (async)"):
            ids = [f"bench-serving-{uuid.uuid4().hex[:8]}-{n}" for n in range(count)]
            if how == "open_store (async)":
                async with open_store(url, asynchronous=True) as opened:
                    sessions = [opened.session(session_id) for session_id in ids]
                    figures = await _measure(_aniki_turns(sessions), turns)
                    for session in sessions:
                        await session.clear()
            else:
                asynchronous = how == "async twin"
                sessions = [open_session(url, sid, asynchronous=asynchronous) for sid in ids]
                figures = await _measure(_aniki_turns(sessions), turns)
                await _clear(sessions)
            rows.append(_row("aniki", store, how, figures))
        if store == "sqlite":
            for how in ("sync store", "async twin"):
                ids = [f"bench-serving-{uuid.uuid4().hex[:8]}-{n}" for n in range(count)]
                asynchronous = how == "async twin"
                sessions = [open_session(url, sid, asynchronous=asynchronous) for sid in ids]
                lock = directory / "chats.db"
                figures = await _measure(_aniki_turns(sessions), turns, lock=lock, hold=hold)
                await _clear(sessions)
                rows.append(_row("aniki", f"sqlite, lock held {hold:g} s", how, figures))
    return rows


async def _peer_rows(directory: Path, count: int, turns: int, hold: float) -> list[tuple[str, ...]]:
    makers: dict[tuple[str, str], Callable[[str], Any]] = {}
    try:
        from agents.memory import SQLiteSession

        makers["sqlite", "SQLiteSession"] = lambda sid: SQLiteSession(sid, directory / "oa.db")
    except ImportError:
        return []
    try:
        from agents.extensions.memory.async_sqlite_session import AsyncSQLiteSession

        makers["sqlite", "AsyncSQLiteSession"] = lambda sid: AsyncSQLiteSession(
            sid, directory / "oa-async.db"
        )
    except ImportError:
        pass
    try:
        from agents.extensions.memory.redis_session import RedisSession

        makers["redis", "RedisSession"] = lambda sid: RedisSession.from_url(sid, url=REDIS_URL)
    except ImportError:
        pass
    try:
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
        from sqlalchemy.ext.asyncio import create_async_engine

        engine = create_async_engine(
            POSTGRES_DSN.replace("postgresql://", "postgresql+asyncpg://"), pool_size=10
        )
        makers["postgres", "SQLAlchemySession"] = lambda sid: SQLAlchemySession(
            sid, engine=engine, create_tables=True
        )
    except ImportError:
        pass
    rows: list[tuple[str, ...]] = []
    for (store, how), make in makers.items():
        sessions = [make(f"bench-serving-{uuid.uuid4().hex[:8]}-{n}") for n in range(count)]
        if how == "SQLAlchemySession":  # its tables, created once before the run
            await sessions[0].get_items()
        figures = await _measure(_peer_turns(sessions), turns)
        for session in sessions:
            await session.clear_session()
        rows.append(_row("openai-agents", store, how, figures))
        if how.endswith("SQLiteSession"):
            locked = [make(f"bench-serving-{uuid.uuid4().hex[:8]}-{n}") for n in range(count)]
            await locked[0].get_items()
            path = directory / ("oa.db" if how == "SQLiteSession" else "oa-async.db")
            figures = await _measure(_peer_turns(locked), turns, lock=path, hold=hold)
            for session in locked:
                await session.clear_session()
            rows.append(_row("openai-agents", f"sqlite, lock held {hold:g} s", how, figures))
    return rows


def _row(who: str, store: str, how: str, figures: dict[str, float]) -> tuple[str, ...]:
    wall, ideal = figures["wall"], figures["ideal"]
    return (
        store,
        who,
        how,
        f"{wall:.2f} s / {ideal:.2f} = {wall / ideal:.2f}x",
        f"{figures['p50']:.1f} / {figures['p99']:.1f}",
        f"{figures['turns/s']:.0f}",
    )


async def _main(count: int, turns: int, hold: float) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        rows = await _aniki_rows(directory, count, turns, hold)
        rows += await _peer_rows(directory, count, turns, hold)
    print(f"{count} conversations x {turns} turns at once, model 50 ms (median of one run)")
    print("| store | framework | session | wall / ideal | loop lag p50 / p99 ms | turns/s |")
    print("|---|---|---|---|---|---|")
    for row in sorted(rows):
        print("| " + " | ".join(row) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 conversations x 5 turns")
    parser.add_argument(
        "--smoke", action="store_true", help="3 conversations x 2 turns, lock held 0.2 s"
    )
    args = parser.parse_args()
    if args.smoke:
        count, turns, hold = 3, 2, 0.2
    else:
        count, turns, hold = (10, 5, 1.0) if args.quick else (50, 20, 1.0)
    asyncio.run(_main(count, turns, hold))


if __name__ == "__main__":
    main()
