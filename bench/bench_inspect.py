"""Benchmark the inspector's pages on a long session, in every persistent store.

Each store gets one session of ``--messages`` messages (100,000 by default): turns of a user
message, an assistant message asking for a tool, the tool's result and the final reply; both
assistant messages carry usage and a context report, as the Runner stores them. The
inspector then serves the store on 127.0.0.1 and each page is fetched over HTTP (urllib,
a new connection per request): the first fetch is the cold figure, then the median of five.

Pages: the sessions list, the conversation's last page (what opening a session shows), a
page in the middle (``at=``), one model call's page, the tokens-and-cache page (cold: the
whole history is read once; warm: only what was appended since), a search that finds
nothing (the whole history is read), and the JSON-lines export of the whole session.

Run: ``python bench/bench_inspect.py`` (``--smoke``: 2,000 messages; ``--stores sqlite``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

REDIS_URL = os.environ.get("ANIKI_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get(
    "ANIKI_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
)
STORES = ("sqlite", "file", "redis", "postgres")


def conversation(count: int) -> list[object]:
    """``count`` messages of four-message turns, stamped as a store would stamp them."""
    from aniki import ContextReport, ContextTokens, Message, ToolCall, Usage

    messages: list[object] = []
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    cut = 0
    for index in range(count):
        kind = index % 4
        stamp = {"id": uuid.uuid4().hex[:16], "created_at": start + timedelta(seconds=index)}
        if kind == 0:
            messages.append(Message("user", f"Question {index}: what about item {index}?", **stamp))
            continue
        if kind == 2:
            messages.append(
                Message(
                    "tool",
                    f'{{"item": {index}, "stock": 7}}',
                    tool_call_id=f"c{index - 1}",
                    **stamp,
                )
            )
            continue
        if index - cut > 400:  # a window that moves in steps, as the policies keep it
            cut = index - 200
        sent = index - cut
        usage = Usage(
            input_tokens=300 + 25 * sent,
            output_tokens=20,
            requests=1,
            cache_read_tokens=25 * (sent - 2) if sent > 2 else 0,
        )
        report = ContextReport(
            stored_messages=index,
            sent_messages=sent,
            summarized_messages=0,
            tokens=ContextTokens(instructions=40, tools=60, history=25 * sent),
            prefix_kept=sent > 2,
            usage=usage,
        )
        if kind == 1:
            call = ToolCall(f"c{index}", "stock", f'{{"item": {index}}}')
            messages.append(
                Message(
                    "assistant",
                    "",
                    tool_calls=(call,),
                    model="bench",
                    usage=usage,
                    context=report,
                    **stamp,
                )
            )
        else:
            messages.append(
                Message(
                    "assistant",
                    f"Item {index - 3} has 7 in stock.",
                    model="bench",
                    usage=usage,
                    context=report,
                    **stamp,
                )
            )
    return messages


def store_url(kind: str, folder: Path) -> str:
    if kind == "sqlite":
        return f"sqlite:///{folder / 'bench.db'}?durability=off"
    if kind == "file":
        return f"file://{folder / 'sessions'}?durability=off"
    return REDIS_URL if kind == "redis" else POSTGRES_DSN


def fetch(address: str, path: str) -> float:
    """Seconds to fetch ``path`` whole."""
    began = time.perf_counter()
    with urllib.request.urlopen(address.rstrip("/") + path, timeout=600) as response:
        assert response.status == 200
        response.read()
    return time.perf_counter() - began


def measure(kind: str, count: int, folder: Path) -> list[tuple[str, str, float, float]]:
    from aniki.inspector._serve import running
    from aniki.sessions import open_store

    url = store_url(kind, folder)
    session_id = f"bench-inspect-{uuid.uuid4().hex[:8]}"
    messages = conversation(count)
    with open_store(url) as store:
        session = store.session(session_id)
        # A turn at a time, as a Runner appends them (a file store writes a line each).
        for first in range(0, count, 4):
            session.add_messages(messages[first : first + 4])
    last_reply = count - 1 if count % 4 == 0 else count - 1 - (count % 4)
    pages = [
        ("sessions list", "/"),
        ("conversation, last page", f"/session?id={session_id}"),
        ("conversation, middle page", f"/session?id={session_id}&at={count // 2}"),
        ("one model call", f"/call?id={session_id}&index={last_reply}"),
        ("tokens and cache", f"/usage?id={session_id}"),
        ("find (no match)", f"/search?id={session_id}&q=nowhere-to-be-found"),
        ("export (JSON lines)", f"/export?id={session_id}&format=jsonl"),
    ]
    rows = []
    try:
        with running(url) as address:
            for name, path in pages:
                cold = fetch(address, path)
                warm = statistics.median(fetch(address, path) for _ in range(5))
                rows.append((kind, name, cold * 1000, warm * 1000))
    finally:
        with open_store(url) as store:
            store.session(session_id).clear()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--smoke", action="store_true", help="2,000 messages")
    parser.add_argument("--stores", default=",".join(STORES))
    args = parser.parse_args()
    count = 2_000 if args.smoke else args.messages
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for kind in args.stores.split(","):
            rows.extend(measure(kind, count, Path(folder)))
    print(f"inspector pages on a {count:,}-message session (ms over HTTP on 127.0.0.1)\n")
    print("| store | page | first fetch ms | median of 5 ms |")
    print("|---|---|---|---|")
    for kind, name, cold, warm in rows:
        print(f"| {kind} | {name} | {cold:.1f} | {warm:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
