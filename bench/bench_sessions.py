"""Benchmark the local session stores (a script, not a test).

1. Append throughput: ``SQLiteSession.add_message`` (one transaction each) against raw
   ``sqlite3`` commits of the same JSON text into a plain table, at the same durability
   (WAL plus ``synchronous`` OFF / NORMAL / FULL), and ``FileSession.add_message``.
2. Per-turn cost of a long conversation: each turn appends 2 messages and reads the whole
   history with ``get_messages()``, as the Runner does; the cost near turn 1, 1,000 and
   5,000 shows whether a turn gets slower as the history grows.

Run: ``python bench/bench_sessions.py`` (``--quick`` for a short run).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from aniki import Message
from aniki.sessions import FileSession, SQLiteSession
from aniki.sessions._codec import encode_message

SYNCHRONOUS = {"off": "OFF", "normal": "NORMAL", "full": "FULL"}


def _message(index: int) -> Message:
    return Message(role="user", content=f"message {index}: " + "lorem ipsum " * 8)


CHUNK = 100


def _rate(append: Callable[[Message], None], count: int) -> float:
    """Appends per second: the median over chunks of CHUNK appends.

    Chunks make the figure robust to bursts of load from other processes on the machine.
    """
    messages = [_message(i) for i in range(count)]
    append(Message(role="system", content="warm-up"))  # opens the file: not the steady state
    times = []
    for first in range(0, count, CHUNK):
        start = time.perf_counter()
        for message in messages[first : first + CHUNK]:
            append(message)
        times.append(time.perf_counter() - start)
    return CHUNK / statistics.median(times)


def raw_sqlite(path: Path, durability: str, count: int, *, explicit: bool = False) -> float:
    """Commits per second of one INSERT per transaction with plain sqlite3.

    By default each INSERT runs in autocommit mode (one statement, its own transaction: the
    least work there is); with ``explicit`` it is wrapped in ``BEGIN`` / ``COMMIT``. Each
    message is encoded as aniki encodes it, with aniki's own (fast) encoder.
    """
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={SYNCHRONOUS[durability]}")
    conn.execute("CREATE TABLE raw (id INTEGER PRIMARY KEY, session_id TEXT, body TEXT)")
    insert = "INSERT INTO raw (session_id, body) VALUES (?, ?)"

    def append(message: Message) -> None:
        if explicit:
            conn.execute("BEGIN")
            conn.execute(insert, ("bench", encode_message(message)))
            conn.execute("COMMIT")
        else:
            conn.execute(insert, ("bench", encode_message(message)))

    try:
        return _rate(append, count)
    finally:
        conn.close()


def session_appends(make: Callable[[], object], count: int) -> float:
    """Messages per second of ``add_message`` on a fresh session."""
    return _rate(make().add_message, count)  # type: ignore[attr-defined]


def best_of(runs: int, measures: dict[str, Callable[[int], float]]) -> dict[str, float]:
    """The best rate of each measure over ``runs`` rounds, interleaved so load hits all alike."""
    best = dict.fromkeys(measures, 0.0)
    for run in range(runs):
        for name, measure in measures.items():
            best[name] = max(best[name], measure(run))
    return best


def per_turn(
    make: Callable[[], object], turns: int, marks: list[int]
) -> dict[int, tuple[float, float]]:
    """Median microseconds of a turn, and of its read alone, over ~100 turns around each mark."""
    session = make()
    totals: list[float] = []
    reads: list[float] = []
    for turn in range(1, turns + 1):
        start = time.perf_counter()
        session.add_message(Message(role="user", content=f"question {turn}"))  # type: ignore[attr-defined]
        session.add_message(Message(role="assistant", content=f"answer {turn}"))  # type: ignore[attr-defined]
        middle = time.perf_counter()
        history = session.get_messages()  # type: ignore[attr-defined]
        end = time.perf_counter()
        totals.append(end - start)
        reads.append(end - middle)
        assert len(history) == 2 * turn
    result = {}
    for mark in marks:
        if mark <= turns:
            window = slice(max(0, mark - 51), max(mark + 50, 101))
            result[mark] = (
                statistics.median(totals[window]) * 1e6,
                statistics.median(reads[window]) * 1e6,
            )
    return result


def cold_read(make: Callable[[], object]) -> float:
    """Microseconds for a new instance to read the whole stored history once."""
    start = time.perf_counter()
    make().get_messages()  # type: ignore[attr-defined]
    return (time.perf_counter() - start) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer messages and turns")
    args = parser.parse_args()
    count = {"off": 5000, "normal": 5000, "full": 300}
    turns, runs = 5000, 5
    if args.quick:
        count, turns, runs = {"off": 1000, "normal": 1000, "full": 100}, 1000, 1

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print(
            f"== append throughput: messages/s, one commit each (median of {CHUNK}-append "
            f"chunks, best of {runs} rounds) =="
        )
        for durability, n in count.items():

            def raw(run: int, d: str = durability, n: int = n) -> float:
                return raw_sqlite(root / f"raw-{d}-{run}.db", d, n)

            def raw_tx(run: int, d: str = durability, n: int = n) -> float:
                return raw_sqlite(root / f"rawtx-{d}-{run}.db", d, n, explicit=True)

            def ours(run: int, d: str = durability, n: int = n) -> float:
                path = root / f"ours-{d}-{run}.db"
                return session_appends(lambda: SQLiteSession("bench", path, durability=d), n)  # type: ignore[arg-type]

            def files(run: int, d: str = durability, n: int = n) -> float:
                directory = root / f"files-{d}-{run}"
                return session_appends(lambda: FileSession("bench", directory, durability=d), n)  # type: ignore[arg-type]

            best = best_of(runs, {"raw": raw, "raw_tx": raw_tx, "sqlite": ours, "file": files})
            print(
                f"{durability:<6}  raw sqlite3 {best['raw']:>8,.0f} (with BEGIN/COMMIT "
                f"{best['raw_tx']:>8,.0f})   SQLiteSession {best['sqlite']:>8,.0f} = "
                f"{best['sqlite'] / best['raw']:.0%} of raw ({best['sqlite'] / best['raw_tx']:.0%})"
                f"   FileSession {best['file']:>8,.0f}"
            )

        marks = [1, 1000, 5000]
        print(f"\n== per-turn cost: 2 appends + get_messages(), median us, {turns} turns ==")
        stores: dict[str, Callable[[], object]] = {
            "SQLiteSession": lambda: SQLiteSession("turns", root / "turns.db"),
            "FileSession": lambda: FileSession("turns", root / "turns"),
        }
        for name, make in stores.items():
            costs = per_turn(make, turns, marks)
            shown = "   ".join(
                f"turn {mark:>5}: {total:6.1f} (read {read:5.1f})"
                for mark, (total, read) in costs.items()
            )
            print(f"{name:<14} {shown}")
            cold = cold_read(make)
            print(f"{'':<14} a new instance reading all {2 * turns} messages: {cold:,.0f} us")


if __name__ == "__main__":
    main()
