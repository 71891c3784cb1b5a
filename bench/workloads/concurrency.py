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

The ``raw`` column keeps the same conversations with the store's bare driver and no framework
(``_bare_chat``): per turn, write the user's message, read the history, sleep, write the reply.
It is the floor on this host; a framework over that store cannot go below it.
"""

from __future__ import annotations

import asyncio
import gc
import resource
import time
from typing import Any

from peers import USER_MESSAGE, Unsupported
from peers.base import StoreKind

from workloads._bare_chat import bare_chats
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


async def _timed(ctx: Context, name: str, chats: list[Any]) -> tuple[float, float]:
    """Wall time and this process's CPU time for ``chats``' conversations, all at once."""
    gc.collect()  # garbage of earlier runs (other frameworks' too) is not this one's cost
    start, cpu = time.perf_counter(), _cpu()
    await asyncio.gather(
        *(_conversation(name, chat, ctx.scale.conversation_turns) for chat in chats)
    )
    return time.perf_counter() - start, _cpu() - cpu


def _store(ctx: Context, kind: StoreKind, name: str, repeat: int) -> Any:
    return ctx.store(
        kind, f"concurrency-{name}-{repeat}", durability="normal", namespace_suffix=f"c{repeat}"
    )


async def _wall(ctx: Context, peer: Any, kind: StoreKind, repeat: int) -> tuple[float, float]:
    """Wall time and this process's CPU time for the whole batch of conversations."""
    scale = ctx.scale
    async with peer.open(_store(ctx, kind, peer.name, repeat)) as backend:
        # Tables, caches, pools; the warm-up conversation stays open until the end, as a
        # running server's store does (a local store's connection lives while a session does).
        warm = backend.chat("warm-up")
        await _conversation(peer.name, warm, 1)
        chats = [
            backend.chat(f"conversation-{i}", delay=scale.model_delay)
            for i in range(scale.conversations)
        ]
        timed = await _timed(ctx, peer.name, chats)
        del warm
        return timed


async def _raw_wall(ctx: Context, kind: StoreKind, repeat: int) -> tuple[float, float]:
    """:func:`_wall` for the bare driver (the ``raw`` column)."""
    scale = ctx.scale
    async with bare_chats(_store(ctx, kind, "raw", repeat)) as chat:
        await _conversation("raw", chat("warm-up", 0.0), 1)
        chats = [chat(f"conversation-{i}", scale.model_delay) for i in range(scale.conversations)]
        return await _timed(ctx, "raw", chats)


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
            for name, peer in [*((peer.name, peer) for peer in ctx.peers), ("raw", None)]:
                if name in failed:
                    continue
                try:
                    timed = await (
                        _raw_wall(ctx, kind, repeat)
                        if peer is None
                        else _wall(ctx, peer, kind, repeat)
                    )
                except Unsupported as exc:
                    failed.add(name)
                    walls.pop(name, None)
                    section.skip(name, exc, kind)
                else:
                    walls.setdefault(name, []).append(timed)
        if "aniki" not in walls:
            continue
        row = section.row(f"{kind}: wall time", "x ideal", target)
        cpu = section.row(f"{kind}: CPU time of the process", "x ideal")
        for name, values in walls.items():
            row.values[name] = median([wall for wall, _ in values]) / ideal
            cpu.values[name] = median([used for _, used in values]) / ideal
        ctx.log(f"  5: {kind}: " + ", ".join(f"{k} {v:.2f}" for k, v in row.values.items()))
    return section
