"""Workload 5: many conversations at once on one event loop.

``conversations`` conversations each run ``conversation_turns`` turns, all started together;
the scripted model sleeps ``model_delay`` seconds per call (``asyncio.sleep``), so a framework
with no overhead would finish in ``turns x delay`` (the ideal). Figures are wall time over
that ideal. Stores: in memory, SQLite (the stores' default durability, normal; openai-agents'
SQLiteSession has only FULL), Redis and PostgreSQL (aniki's async stores, over one shared
client or pool; openai-agents' RedisSession). Session objects and agents are made before the
clock starts, after one warm-up turn (a running server has its tables and connections).
The CPU time the process used in the meantime (all its threads) is shown too: wall time well
above it means the process was waiting, for a server or for a core shared with other work.
"""

from __future__ import annotations

import asyncio
import gc
import resource
import time
from typing import Any

from peers import USER_MESSAGE, Unsupported
from peers.base import StoreKind

from workloads._common import Context, Section, aniki_at_most, check_history, median

NUMBER = 5
TITLE = "concurrency"
KINDS: tuple[StoreKind, ...] = ("memory", "sqlite", "redis", "postgres")


async def _conversation(name: str, chat: Any, turns: int) -> None:
    for turn in range(turns):
        seen = await chat.turn(USER_MESSAGE)
        check_history(name, turn + 1, seen, 2 * turn + 1)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this process
    return usage.ru_utime + usage.ru_stime


async def _wall(ctx: Context, peer: Any, kind: StoreKind, repeat: int) -> tuple[float, float]:
    """Wall time and this process's CPU time for the whole batch of conversations."""
    scale = ctx.scale
    store = ctx.store(
        kind,
        f"concurrency-{peer.name}-{repeat}",
        durability="normal",
        namespace_suffix=f"c{repeat}",
    )
    async with peer.open(store) as backend:
        # Tables, caches, pools; the warm-up conversation stays open until the end, as a
        # running server's store does (a local store's connection lives while a session does).
        warm = backend.chat("warm-up")
        await _conversation(peer.name, warm, 1)
        chats = [
            backend.chat(f"conversation-{i}", delay=scale.model_delay)
            for i in range(scale.conversations)
        ]
        gc.collect()  # garbage of earlier runs (other frameworks' too) is not this one's cost
        start, cpu = time.perf_counter(), _cpu()
        await asyncio.gather(
            *(_conversation(peer.name, chat, scale.conversation_turns) for chat in chats)
        )
        wall, used = time.perf_counter() - start, _cpu() - cpu
        del warm
        return wall, used


async def run(ctx: Context) -> Section:
    scale = ctx.scale
    ideal = scale.conversation_turns * scale.model_delay
    section = Section(
        NUMBER,
        f"{TITLE}: {scale.conversations} conversations x {scale.conversation_turns} turns at "
        f"once, model sleeping {scale.model_delay * 1e3:.0f} ms; wall time / ideal "
        f"{ideal * 1e3:.0f} ms",
    )
    target = aniki_at_most(1.5, "aniki <= 1.5")
    for kind in KINDS:
        walls: dict[str, list[tuple[float, float]]] = {}
        failed: set[str] = set()
        for repeat in range(scale.repeats):
            for peer in ctx.peers:
                if peer.name in failed:
                    continue
                try:
                    walls.setdefault(peer.name, []).append(await _wall(ctx, peer, kind, repeat))
                except Unsupported as exc:
                    failed.add(peer.name)
                    walls.pop(peer.name, None)
                    section.skip(peer.name, exc, kind)
        if "aniki" not in walls:
            continue
        row = section.row(f"{kind}: wall time", "x ideal", target)
        cpu = section.row(f"{kind}: CPU time of the process", "x ideal")
        for name, values in walls.items():
            row.values[name] = median([wall for wall, _ in values]) / ideal
            cpu.values[name] = median([used for _, used in values]) / ideal
        ctx.log(f"  5: {kind}: " + ", ".join(f"{k} {v:.2f}" for k, v in row.values.items()))
    return section
