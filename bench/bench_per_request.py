"""Benchmark a web handler's turn on a long conversation: a session per request.

A web server handles each turn of a conversation in a new request. This measures one turn
(append the user's message, then read the whole history, as the Runner does) on a
10,000-message conversation, per store, when the handler

- keeps one session object for the conversation (the cost to match),
- asks an ``open_store`` store for the session (what a server is meant to do),
- builds a new session object (``open_session``) per request,

and, where it has the store, openai-agents' session built per request (its ``SQLiteSession``
and its ``RedisSession``; both read the whole history every time, kept or not).

Target: a session handed out by ``open_store`` costs at most 2x a kept object's turn.

Needs the servers of the test suite (Redis 127.0.0.1:6379, PostgreSQL 127.0.0.1:5432
database ``test``); everything it writes is removed afterwards.
Run: ``python bench/bench_per_request.py`` (``--quick`` for a short run, ``--smoke`` for the
test suite's run that keeps the script working).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _stores import REDIS_URL, store_urls

from aniki import Message
from aniki.sessions import open_session, open_store


def _median_ms(turn: Callable[[int], None], turns: int) -> float:
    times = []
    for number in range(turns):
        start = time.perf_counter()
        turn(number)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def _aniki_rows(name: str, url: str, size: int, turns: int) -> list[tuple[str, str, float]]:
    session_id = f"bench-per-request-{uuid.uuid4().hex[:8]}"
    history = [Message("user", f"message {n} " + "x" * 80) for n in range(size)]
    with open_store(url) as store:
        store.session(session_id).add_messages(history)
        kept = open_session(url, session_id)
        kept.get_messages()

        def turn_on(get: Callable[[], Any]) -> Callable[[int], None]:
            def turn(number: int) -> None:
                session = get()
                session.add_message(Message("user", f"turn {number}"))
                session.get_messages()
                if session is not kept and get is fresh:
                    session.close()

            return turn

        def fresh() -> Any:
            return open_session(url, session_id)

        def handed_out() -> Any:
            return store.session(session_id)

        rows = [
            (name, "aniki, kept object", _median_ms(turn_on(lambda: kept), turns)),
            (name, "aniki, open_store", _median_ms(turn_on(handed_out), turns)),
            (name, "aniki, new object", _median_ms(turn_on(fresh), turns)),
        ]
        store.session(session_id).clear()
        close = getattr(kept, "close", None)
        if callable(close):
            close()
    return rows


def _peer_rows(directory: Path, size: int, turns: int) -> list[tuple[str, str, float]]:
    try:
        from agents.memory import SQLiteSession
    except ImportError:
        return []
    rows: list[tuple[str, str, float]] = []
    items: list[Any] = [
        {"role": "user", "content": f"message {n} " + "x" * 80} for n in range(size)
    ]
    makers: dict[str, Callable[[str], Any]] = {
        "sqlite": lambda sid: SQLiteSession(sid, directory / "peer.db"),
    }
    try:
        from agents.extensions.memory.redis_session import RedisSession

        makers["redis"] = lambda sid: RedisSession.from_url(sid, url=REDIS_URL)
    except ImportError:
        pass

    async def measure(store: str, make: Callable[[str], Any]) -> float:
        session_id = f"bench-per-request-{uuid.uuid4().hex[:8]}"
        await make(session_id).add_items(items)
        times = []
        for number in range(turns):
            start = time.perf_counter()
            session = make(session_id)
            await session.add_items([{"role": "user", "content": f"turn {number}"}])
            await session.get_items()
            times.append(time.perf_counter() - start)
        await make(session_id).clear_session()
        return statistics.median(times) * 1000

    for store, make in makers.items():
        rows.append((store, "openai-agents, new object", asyncio.run(measure(store, make))))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 messages, 5 turns")
    parser.add_argument("--smoke", action="store_true", help="50 messages, 2 turns")
    args = parser.parse_args()
    size, turns = (50, 2) if args.smoke else (1_000, 5) if args.quick else (10_000, 20)
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        stores = store_urls(directory)
        rows: list[tuple[str, str, float]] = []
        for name, url in stores.items():
            rows += _aniki_rows(name, url, size, turns)
        rows += _peer_rows(directory, size, turns)
    kept = {store: ms for store, how, ms in rows if how == "aniki, kept object"}
    print(f"One turn (append, then read all) on a {size:,}-message conversation, median ms")
    print("| store | handler | ms per turn | / kept object |\n|---|---|---|---|")
    for store, how, ms in sorted(rows):
        print(f"| {store} | {how} | {ms:.2f} | {ms / kept[store]:.1f}x |")


if __name__ == "__main__":
    main()
