"""Workload 3: reading a stored history of 10,000 and 100,000 messages.

The parent process fills each store; each *cold* figure comes from a new process (interpreter
and framework already imported, nothing else: it opens the store and reads once), which then
also measures the *warm* reads: a new session object in the warmed process (what a stateless
server does per request), and the same object read again (what a run does every turn). The
resident memory a loaded history adds is measured in the same child. Every framework reads its
own SQLite file; aniki's other stores are measured at the largest size only.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent.parent
if __name__ == "__main__" and str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from peers import Peer, StoreSpec, Unsupported  # noqa: E402
from peers.base import StoreKind  # noqa: E402

from workloads._common import Context, Section, median  # noqa: E402

NUMBER = 3
TITLE = "reading history"
LAST = 20
"""The short read: the most recent messages, as a windowed history asks."""
OTHER_STORES: tuple[StoreKind, ...] = ("file", "redis", "postgres")
"""aniki-only stores, read at the largest size."""


def _rss() -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def _child(job: dict[str, Any]) -> dict[str, float]:
    """In the new process: one cold read, then the warm ones."""
    import importlib

    from peers import ALL_PEERS

    peer = next(p for p in ALL_PEERS if p.name == job["peer"])
    importlib.import_module(peer.module)  # importing is workload 4's business, not a read's
    if peer.name == "aniki":
        from peers.aniki_peer import store_class

        store_class(job["kind"])
    store = StoreSpec(job["kind"], job["location"], job["durability"], job["namespace"], False)
    conversation, first, samples = job["conversation"], job["limit"], job["samples"]
    before = _rss()
    start = time.perf_counter()
    async with peer.open(store) as backend:
        reader = backend.reader(conversation)
        loaded = await reader.read(first)
        cold = time.perf_counter() - start
        grown = _rss() - before
        figures = {"cold": cold, "rss": grown / 2**20, "count": float(len(loaded))}
        if first is not None:
            return figures
        figures["again"] = median([await _timed(reader, None) for _ in range(samples)])
        figures["warm"] = median(
            [await _timed(backend.reader(conversation), None) for _ in range(samples)]
        )
        figures["warm_last"] = median(
            [await _timed(backend.reader(conversation), LAST) for _ in range(samples)]
        )
        del loaded
    return figures


async def _timed(reader: Any, limit: int | None) -> float:
    start = time.perf_counter()
    await reader.read(limit)
    return time.perf_counter() - start


async def _cold(ctx: Context, job: dict[str, Any]) -> dict[str, float]:
    """The figures of one child process (or of this process, when the scale says so)."""
    if job["peer"] != "aniki" and not ctx.scale.spawn_peers:
        return await _child(job)
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        json.dumps(job),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(child.communicate(), timeout=600)
    if child.returncode != 0:
        raise RuntimeError(f"the read-history child failed for {job}:\n{err.decode()[-3000:]}")
    result: dict[str, float] = json.loads(out.decode().strip().splitlines()[-1])
    return result


def _cases(ctx: Context) -> list[tuple[Peer, StoreSpec, tuple[int, ...]]]:
    sizes = ctx.scale.history_sizes
    cases = [
        (
            peer,
            ctx.store("sqlite", f"history-{peer.name}", durability="normal", cleanup=False),
            sizes,
        )
        for peer in ctx.peers
    ]
    aniki = ctx.peers[0]
    for kind in OTHER_STORES:
        cases.append((aniki, ctx.store(kind, "history-files", cleanup=False), sizes[-1:]))
    return cases


async def _fill(section: Section, peer: Peer, store: StoreSpec, sizes: tuple[int, ...]) -> bool:
    try:
        async with peer.open(store) as backend:
            for size in sizes:
                await backend.fill(f"history-{size}", size)
    except Unsupported as exc:
        section.skip(peer.name, exc, store.label)
        return False
    return True


async def _drop(peer: Peer, store: StoreSpec) -> None:
    from dataclasses import replace

    if store.kind in ("redis", "postgres"):
        async with peer.open(replace(store, cleanup=True)):
            pass


async def run(ctx: Context) -> Section:
    section = Section(NUMBER, f"{TITLE}, get_messages() of a stored conversation (ms; RSS in MB)")
    for peer, store, sizes in _cases(ctx):
        if not await _fill(section, peer, store, sizes):
            continue
        try:
            for size in sizes:
                job = {
                    "peer": peer.name,
                    "kind": store.kind,
                    "location": store.location,
                    "durability": store.durability,
                    "namespace": store.namespace,
                    "conversation": f"history-{size}",
                    # warm reads per child; the median is then taken over the children
                    "samples": 3 if size <= 10_000 else 1,
                }
                full = [await _cold(ctx, {**job, "limit": None}) for _ in range(ctx.scale.repeats)]
                for figures in full:
                    if figures["count"] != size:
                        raise AssertionError(f"{peer.name} read {figures['count']} of {size}")
                _record(section, peer.name, store, size, full, "full")
                if store.kind == "sqlite":
                    last = [
                        await _cold(ctx, {**job, "limit": LAST}) for _ in range(ctx.scale.repeats)
                    ]
                    _record(section, peer.name, store, size, last, "last")
                ctx.log(f"  3: {peer.name} {store.label} {size:,}: done")
        finally:
            await _drop(peer, store)
    return section


def _record(
    section: Section,
    name: str,
    store: StoreSpec,
    size: int,
    runs: list[dict[str, float]],
    which: str,
) -> None:
    where = f"{store.kind}, {size:,} msgs"
    if which == "last":
        section.row(f"{where}: last {LAST}, cold", "ms").values[name] = _ms(runs, "cold")
        return
    section.row(f"{where}: all, cold", "ms").values[name] = _ms(runs, "cold")
    section.row(f"{where}: all, warm (new object)", "ms").values[name] = _ms(runs, "warm")
    section.row(f"{where}: all, again (same object)", "ms").values[name] = _ms(runs, "again")
    if store.kind == "sqlite":
        section.row(f"{where}: last {LAST}, cold", "ms")  # filled by the next call
    section.row(f"{where}: last {LAST}, warm", "ms").values[name] = _ms(runs, "warm_last")
    rss = median([r["rss"] for r in runs])
    section.row(f"{where}: RSS of the loaded history", "MB").values[name] = rss


def _ms(runs: list[dict[str, float]], key: str) -> float:
    return median([r[key] for r in runs]) * 1e3


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_child(json.loads(sys.argv[1])))))
