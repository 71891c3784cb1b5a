"""Benchmark a store of many conversations: listing one owner's, pruning them all, deleting a
user's, and how long a writer waits meanwhile.

Per store (SQLite, files, Redis, PostgreSQL), ``--sessions`` conversations (100,000 in a full
run) are written through ``open_store``, each with an owner (100 sessions per owner), a
title, a tag and one message. Then:

1. ``list_sessions(owner=..., limit=20)`` and ``list_sessions(limit=20)``: the median of 20;
2. ``delete_sessions(owner=...)`` of one owner's sessions;
3. ``prune(older_than=...)`` of every session, while a writer appends to another session in
   a loop: the prune's time, and the writer's longest and 99th-percentile append against
   its median before the prune (the longest a prune held the writer up: its longest lock).

Needs the servers of the test suite for the Redis and PostgreSQL rows; everything it writes
is removed afterwards. Run: ``python bench/bench_retention.py`` (``--quick``: 5,000 sessions;
``--smoke``: 300; ``--stores sqlite,file``: some stores only).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

from _stores import store_urls

from aniki import Message
from aniki.sessions import open_store

PER_OWNER = 100
FILL_THREADS = {"sqlite": 1, "file": 2, "redis": 4, "postgres": 4}


def _options(name: str, tag: str) -> dict[str, str]:
    if name == "redis":
        return {"prefix": f"bench-retention-{tag}:"}
    if name == "postgres":
        return {"table": f"bench_retention_{tag}"}
    return {}


def _fill(store: Any, name: str, count: int, tag: str) -> float:
    def write(index: int) -> None:
        session = store.session(f"{tag}-{index}")
        owner = f"user-{index // PER_OWNER}"
        session.set_info(owner=owner, title=f"chat {index}", tags=["bench"])
        session.add_message(Message("user", f"question {index}: " + "lorem ipsum " * 8))

    start = time.perf_counter()
    with ThreadPoolExecutor(FILL_THREADS[name]) as pool:
        list(pool.map(write, range(count), chunksize=64))
    return time.perf_counter() - start


def _median_ms(call: Any, repeats: int = 20) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


class _Writer(threading.Thread):
    """Appends to one session in a loop and records how long each append took."""

    def __init__(self, store: Any, session_id: str) -> None:
        super().__init__(daemon=True)
        self.session = store.session(session_id)
        self.times: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            start = time.perf_counter()
            self.session.add_message(Message("user", "still writing"))
            self.times.append(time.perf_counter() - start)
            time.sleep(0.001)


def _measure(name: str, url: str, count: int) -> dict[str, float]:
    tag = uuid.uuid4().hex[:8]
    with open_store(url, **_options(name, tag)) as store:
        fill = _fill(store, name, count, tag)
        by_owner = _median_ms(lambda: store.list_sessions(owner="user-1", limit=20))
        newest = _median_ms(lambda: store.list_sessions(limit=20))
        start = time.perf_counter()
        deleted = store.delete_sessions(owner="user-1")
        delete_ms = (time.perf_counter() - start) * 1000
        writer = _Writer(store, f"{tag}-writer")
        writer.start()
        time.sleep(0.5)
        baseline = statistics.median(writer.times)
        before = len(writer.times)
        time.sleep(0.05)
        start = time.perf_counter()
        pruned = store.prune(older_than=timedelta(microseconds=1))
        prune_s = time.perf_counter() - start
        writer.stop.set()
        writer.join()
        during = writer.times[before:] or [baseline]
        store.session(f"{tag}-writer").clear()
    _drop(name, url, tag)
    return {
        "fill_s": fill,
        "list_owner_ms": by_owner,
        "list_newest_ms": newest,
        "deleted": deleted,
        "delete_ms": delete_ms,
        "pruned": pruned,
        "prune_s": prune_s,
        "writer_median_ms": baseline * 1000,
        "writer_p99_ms": sorted(during)[int(len(during) * 0.99) - 1] * 1000,
        "writer_max_ms": max(during) * 1000,
    }


def _drop(name: str, url: str, tag: str) -> None:
    """Remove what the run's own table or prefix left (indexes, blob tables, markers)."""
    if name == "redis":
        import redis

        client = redis.Redis.from_url(url)
        for key in client.scan_iter(match=f"bench-retention-{tag}:*", count=1000):
            client.delete(key)
        client.close()
    elif name == "postgres":
        import psycopg

        with psycopg.connect(url, autocommit=True) as connection:
            tables = connection.execute(
                "SELECT tablename FROM pg_tables WHERE tablename LIKE %s",
                (f"bench_retention_{tag}%",),
            ).fetchall()
            for (table,) in tables:
                connection.execute(f'DROP TABLE IF EXISTS "{table}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="5,000 sessions per store")
    size.add_argument("--smoke", action="store_true", help="300 sessions per store")
    parser.add_argument("--sessions", type=int, default=None, help="sessions per store")
    parser.add_argument("--stores", default="sqlite,file,redis,postgres")
    args = parser.parse_args()
    count = args.sessions or (300 if args.smoke else 5000 if args.quick else 100_000)
    wanted = args.stores.split(",")
    print(f"{count:,} sessions per store, {PER_OWNER} per owner")
    print(
        "| store | fill (s) | list one owner's, 20 (ms) | list newest 20 (ms) | "
        "delete one owner's (ms) | prune all (s) | writer's append: median / p99 / longest "
        "during the prune (ms) |"
    )
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for name, url in store_urls(Path(scratch)).items():
            if name not in wanted:
                continue
            try:
                found = _measure(name, url, count)
            except Exception as exc:  # a missing server: say so, measure the rest
                print(f"| {name} | skipped: {type(exc).__name__}: {exc} |")
                continue
            assert found["pruned"] >= count - found["deleted"]
            print(
                f"| {name} | {found['fill_s']:.1f} | {found['list_owner_ms']:.2f} | "
                f"{found['list_newest_ms']:.2f} | {found['delete_ms']:.1f} "
                f"({found['deleted']:.0f}) | {found['prune_s']:.2f} ({found['pruned']:,.0f}) | "
                f"{found['writer_median_ms']:.2f} / {found['writer_p99_ms']:.2f} / "
                f"{found['writer_max_ms']:.1f} |"
            )


if __name__ == "__main__":
    main()
