"""Many readers of one summarized session: one summarizer call per budget crossing, in all.

Readers are several ``SummarizingSession`` objects in one process, or several processes on
one SQLite file, Redis server or PostgreSQL table. Whatever their number, each span of the
history is folded once, the stored summary never goes back to covering fewer messages, and
the summarizer is called no more often than a single reader would call it.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from aniki import Agent, InMemorySession, Message
from aniki.providers.base import ModelRequest, ModelResponse
from aniki.sessions import PostgresSession, RedisSession, SQLiteSession, SummarizingSession
from aniki.sessions.policies._summary import CLAIM_KEY as CLAIM
from aniki.sessions.policies._summary import Summary
from tests.servers import (
    delete_redis_prefix,
    drop_postgres_tables,
    postgres_dsn,
    redis_url,
    unique_name,
)

from .transcripts import texts_of

TAG = re.compile(r"<(t[\d-]+)>")
MAX_TOKENS = 400
ROOT = Path(__file__).resolve().parents[2]


class SlowSummarizer:
    """A provider that takes ``delay`` seconds per summary and logs what each one folded."""

    def __init__(self, delay: float = 0.05, log: Path | None = None) -> None:
        self.delay = delay
        self.log = log
        self.folded: list[list[str]] = []
        self.fail = False

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(self.delay)
        if self.fail:
            raise RuntimeError("the summarizer is down")
        tags = list(dict.fromkeys(TAG.findall(texts_of(request.messages[-1].content))))
        self.folded.append(tags)
        if self.log is not None:
            with self.log.open("a") as out:
                out.write(json.dumps(tags) + "\n")
        return ModelResponse(content=f"summary {len(self.folded)} up to {tags[-1]}")

    def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        raise NotImplementedError


def message(tag: str, role: str = "user") -> Message:
    return Message(role=role, content=f"<{tag}> " + "words of the conversation " * 8)


def covered(store: Any) -> int:
    record = store.get_meta("aniki.summary")
    return int(record["covered"]) if record else 0


async def drive_in_process(readers: int, turns: int) -> tuple[SlowSummarizer, list[int]]:
    """``readers`` policy objects over one store; after every append they all read at once."""
    summarizer = SlowSummarizer()
    agent = Agent("Summarizer", model="m", provider=summarizer)
    store = InMemorySession("shared")
    policies = [SummarizingSession(store, agent, MAX_TOKENS) for _ in range(readers)]
    seen: list[int] = []
    for turn in range(turns):
        store.add_message(message(f"t{turn}-0"))
        store.add_message(message(f"t{turn}-1", "assistant"))
        views = await asyncio.gather(*(policy.get_messages() for policy in policies))
        assert len(set(views)) == 1  # every reader sees the same view
        seen.append(covered(store))
    return summarizer, seen


def assert_folded_once(folded: list[list[str]]) -> None:
    tags = [tag for batch in folded for tag in batch]
    assert len(tags) == len(set(tags)), f"messages folded more than once: {folded}"


async def test_readers_in_one_process_share_each_summary() -> None:
    single, _ = await drive_in_process(1, 30)
    many, seen = await drive_in_process(4, 30)
    assert len(single.folded) >= 2
    assert len(many.folded) == len(single.folded)  # at most one call per budget crossing
    assert_folded_once(many.folded)
    assert seen == sorted(seen)  # the stored summary never covers fewer messages


def _open(kind: str, place: str) -> Any:
    """The session ``shared``; ``place`` is a SQLite file, a Redis prefix or a table."""
    if kind == "redis":
        return RedisSession("shared", redis_url(), prefix=place)
    if kind == "postgres":
        return PostgresSession("shared", postgres_dsn(), table=place)
    return SQLiteSession("shared", path=place)


def _worker(kind: str, place: str, log: str, proc: int, turns: int) -> None:
    """One process of the test below: append a turn, read through its policy, repeat."""

    async def main() -> None:
        agent = Agent("Summarizer", model="m", provider=SlowSummarizer(0.05, Path(log)))
        store = _open(kind, place)
        policy = SummarizingSession(store, agent, MAX_TOKENS)
        previous = 0
        for turn in range(turns):
            store.add_messages(
                [message(f"t{proc}{turn:03d}-0"), message(f"t{proc}{turn:03d}-1", "assistant")]
            )
            await policy.get_messages()
            now = covered(store)
            assert now >= previous, f"the stored summary went back from {previous} to {now}"
            previous = now

    asyncio.run(main())


@pytest.fixture(params=["sqlite", "redis", "postgres"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A store kind and where its processes meet."""
    kind = request.param
    if kind == "redis":
        redis_url()  # skips (fails under CI) when the server is down
        prefix = unique_name("summaries") + ":"
        yield kind, prefix
        delete_redis_prefix(prefix)
    elif kind == "postgres":
        postgres_dsn()
        table = unique_name("summaries")
        yield kind, table
        drop_postgres_tables(table)
    else:
        yield kind, str(tmp_path / "shared.db")


def test_readers_in_several_processes_share_each_summary(
    shared: tuple[str, str], tmp_path: Path
) -> None:
    kind, place = shared
    logs = [tmp_path / f"calls-{proc}.jsonl" for proc in range(4)]
    code = "import sys; from tests.policies.test_summary_concurrency import _worker as w; " + (
        "w(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))"
    )
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", code, kind, place, str(log), str(proc), "15"],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        for proc, log in enumerate(logs)
    ]
    for worker in workers:
        _, errors = worker.communicate(timeout=120)
        assert worker.returncode == 0, errors
    folded = [json.loads(line) for log in logs if log.exists() for line in log.open()]
    assert_folded_once(folded)
    store = _open(kind, place)
    history = store.get_messages()
    final = covered(store)
    # Every call's work is in the stored summary: nothing was folded and then thrown away.
    assert sum(len(batch) for batch in folded) == final
    assert {tag for batch in folded for tag in batch} == {
        TAG.findall(m.content)[0] for m in history[:final]
    }
    # And no more calls than one reader would make over the same history.
    summarizer = SlowSummarizer(0)
    single = SummarizingSession(
        InMemorySession(), Agent("S", model="m", provider=summarizer), MAX_TOKENS
    )
    for start in range(0, len(history), 8):
        single.inner.add_messages(history[start : start + 8])  # type: ignore[union-attr]
        asyncio.run(single.get_messages())
    assert len(folded) <= len(summarizer.folded) + 1


def summarizing(store: Any, summarizer: SlowSummarizer) -> SummarizingSession:
    return SummarizingSession(store, Agent("S", model="m", provider=summarizer), MAX_TOKENS)


async def calls_of_one_reader(store: Any) -> int:
    """How many summarizer calls one reader makes over ``store``'s history, from scratch."""
    fresh = InMemorySession()
    fresh.add_messages(store.get_messages())
    summarizer = SlowSummarizer(0)
    await summarizing(fresh, summarizer).get_messages()
    return len(summarizer.folded)


def long_history(store: Any, turns: int = 5) -> None:
    for turn in range(turns):
        store.add_messages([message(f"t{turn}-0"), message(f"t{turn}-1", "assistant")])


async def test_a_claim_left_by_a_crashed_reader_lapses() -> None:
    store = InMemorySession("shared")
    long_history(store)
    loop = asyncio.get_running_loop()
    lapses = time.time() + 0.4
    store.set_meta(CLAIM, {"owner": "gone", "covered": 0, "expires": lapses})
    summarizer = SlowSummarizer(0)
    started = loop.time()
    view = await summarizing(store, summarizer).get_messages()
    assert loop.time() - started >= 0.3  # it waited for the claim, then took over
    assert len(summarizer.folded) == await calls_of_one_reader(store)
    assert view[0].role == "system"
    assert store.get_meta(CLAIM) is None  # given back


async def test_a_failed_summary_gives_its_claim_back() -> None:
    store = InMemorySession("shared")
    long_history(store)
    summarizer = SlowSummarizer(0)
    summarizer.fail = True
    view = await summarizing(store, summarizer).get_messages()
    assert view[0].role == "user"  # the most recent messages that fit, no summary
    assert store.get_meta(CLAIM) is None
    assert store.get_meta("aniki.summary") is None


async def test_a_summary_never_replaces_one_covering_more() -> None:
    store = InMemorySession("shared")
    long_history(store, 8)
    policy = summarizing(store, SlowSummarizer(0))
    await policy.get_messages()
    newer = store.get_meta("aniki.summary")
    history = store.get_messages()
    older = Summary.covering("older", 2, history[1])
    # A reader that made ``older`` over no stored summary finds ``newer`` there: it keeps it.
    assert await policy._store.save(older, None) == Summary.from_record(newer)
    assert store.get_meta("aniki.summary") == newer


class NoSwapStore(InMemorySession):
    """A store with meta but no compare-and-swap: readers do not coordinate."""

    def __getattribute__(self, name: str) -> Any:
        if name == "_swap_meta":
            raise AttributeError(name)
        return super().__getattribute__(name)


async def test_a_store_without_compare_and_swap_still_summarizes() -> None:
    store = NoSwapStore("shared")
    long_history(store)
    summarizer = SlowSummarizer(0)
    views = await asyncio.gather(*(summarizing(store, summarizer).get_messages() for _ in "ab"))
    assert all(view[0].role == "system" for view in views)
    one = await calls_of_one_reader(store)
    assert one <= len(summarizer.folded) <= 2 * one  # as before: each reader may summarize
    assert store.get_meta(CLAIM) is None
