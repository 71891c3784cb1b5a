"""Benchmark conversations that carry images: append and read cost, and memory, per store.

A conversation of ``turns`` turns (a user message and a reply each) where every fifth user
message carries a 200 KB PNG-sized attachment, against the same conversation in text only.
Per store: appends per second (one message at a time), reading the whole history and the
last 20 messages from a new session object (what a new process or a web handler does), and
the growth of resident memory while the whole history is held. Target: reading the last 20
messages stays within 2x of the text-only history's.

Needs the servers of the test suite for the Redis and PostgreSQL rows (Redis 127.0.0.1:6379,
PostgreSQL 127.0.0.1:5432 database ``test``); everything it writes is removed afterwards.
Run: ``python bench/bench_attachments.py`` (``--quick``: 200 turns; ``--smoke``: 20).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _stores import store_urls

from aniki import Attachment, Message
from aniki.sessions import open_session

IMAGE_BYTES = 200 * 1024
READS = 5


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def conversation(turns: int, *, images: bool) -> list[Message]:
    """The messages of ``turns`` turns; with ``images``, every fifth user message has one."""
    image = Attachment("image/png", data=os.urandom(IMAGE_BYTES), name="photo.png")
    messages = []
    for turn in range(turns):
        attachments = (image,) if images and turn % 5 == 0 else ()
        messages.append(Message("user", f"turn {turn}: what about this?", attachments=attachments))
        messages.append(Message("assistant", f"turn {turn}: here is what I see. " + "x" * 120))
    return messages


def _measure(url: str, messages: list[Message]) -> dict[str, float]:
    session_id = f"bench-attach-{uuid.uuid4().hex[:8]}"
    writer = open_session(url, session_id)
    start = time.perf_counter()
    for message in messages:
        writer.add_message(message)
    appends = len(messages) / (time.perf_counter() - start)

    def timed(read: Callable[[Any], Any]) -> float:
        times = []
        for _ in range(READS):
            reader = open_session(url, session_id)  # nothing cached: it reads the store
            start = time.perf_counter()
            read(reader)
            times.append(time.perf_counter() - start)
            _close(reader)
        return statistics.median(times) * 1000

    last_20 = timed(lambda s: s.get_messages(limit=20))
    whole = timed(lambda s: s.get_messages())
    gc.collect()
    before = _rss_mb()
    reader = open_session(url, session_id)
    held = reader.get_messages()
    grown = _rss_mb() - before
    assert len(held) == len(messages) and held[-1] == messages[-1]
    _close(reader)
    del held
    writer.clear()
    _close(writer)
    return {"appends/s": appends, "last 20 ms": last_20, "all ms": whole, "RSS MB": grown}


def _close(session: Any) -> None:
    close = getattr(session, "close", None)
    if callable(close):
        close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 turns")
    parser.add_argument("--smoke", action="store_true", help="20 turns")
    args = parser.parse_args()
    turns = 20 if args.smoke else 200 if args.quick else 1000
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        stores = store_urls(directory)
        rows = []
        for name, url in stores.items():
            for images in (False, True):
                figures = _measure(url, conversation(turns, images=images))
                rows.append((name, "every 5th with 200 KB" if images else "text only", figures))
    print(f"{turns} turns ({2 * turns} messages), one run")
    print("| store | conversation | appends/s | last 20, ms | all, ms | RSS of all, MB |")
    print("|---|---|---|---|---|---|")
    text_only: dict[str, float] = {}
    for name, kind, figures in rows:
        ratio = ""
        if kind == "text only":
            text_only[name] = figures["last 20 ms"]
        else:
            ratio = f" ({figures['last 20 ms'] / text_only[name]:.1f}x)"
        print(
            f"| {name} | {kind} | {figures['appends/s']:,.0f} | "
            f"{figures['last 20 ms']:.2f}{ratio} | {figures['all ms']:.1f} | "
            f"{figures['RSS MB']:.1f} |"
        )


if __name__ == "__main__":
    main()
