"""Workload 1: a long conversation persisted in SQLite.

Each framework runs ``turns`` turns (a 200-character user message, a 200-character scripted
reply) over one conversation in a SQLite file at ``synchronous=FULL``, the only setting
openai-agents' ``SQLiteSession`` has (aniki runs ``durability="full"``, pydantic-ai's pattern
sets the pragma). Measured: the median time of a turn over the first and the last 50 turns,
their ratio (flat is 1), and the total. Every turn checks that the model was sent the whole
history, so no framework can look fast by forgetting.

The ``raw`` column is the floor any framework pays for the same persistence: plain ``sqlite3``
committing the turn's two messages (the user's at once, then the reply), reading nothing. A
last row compares the frameworks at their default settings (aniki ``durability="normal"``).
"""

from __future__ import annotations

import json
import sqlite3
import time

from peers import REPLY, USER_MESSAGE, Peer, Unsupported
from peers.base import Durability

from workloads._common import (
    Context,
    Section,
    aniki_at_most,
    check_history,
    median,
    ratio_at_most,
)

NUMBER = 1
TITLE = "long conversation in SQLite"
WINDOW = 50
"""Turns at each end whose median is reported."""
_SYNCHRONOUS = {"normal": "NORMAL", "full": "FULL"}


async def _framework_run(ctx: Context, peer: Peer, durability: Durability, tag: str) -> list[float]:
    store = ctx.store("sqlite", f"long-{tag}", durability=durability)
    async with peer.open(store) as backend:
        chat = backend.chat("long-conversation")
        times: list[float] = []
        for turn in range(ctx.scale.turns):
            start = time.perf_counter()
            seen = await chat.turn(USER_MESSAGE)
            times.append(time.perf_counter() - start)
            check_history(peer.name, turn + 1, seen, 2 * turn + 1)
    return times


def _raw_run(ctx: Context, durability: str, tag: str) -> list[float]:
    conn = sqlite3.connect(ctx.tmp / f"long-raw-{tag}.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={_SYNCHRONOUS[durability]}")
    conn.execute("CREATE TABLE raw (id INTEGER PRIMARY KEY, conversation TEXT, body TEXT)")
    insert = "INSERT INTO raw (conversation, body) VALUES (?, ?)"
    times: list[float] = []
    for _ in range(ctx.scale.turns):
        start = time.perf_counter()
        conn.execute(insert, ("long", json.dumps({"role": "user", "content": USER_MESSAGE})))
        conn.execute(insert, ("long", json.dumps({"role": "assistant", "content": REPLY})))
        times.append(time.perf_counter() - start)
    conn.close()
    return times


async def run(ctx: Context) -> Section:
    turns = ctx.scale.turns
    window = min(WINDOW, max(1, turns // 2))
    section = Section(NUMBER, f"{TITLE} ({turns} turns, synchronous=FULL unless said)")
    runs: dict[str, list[list[float]]] = {}
    for repeat in range(ctx.scale.repeats):
        for peer in ctx.peers:  # interleaved, so drift on the machine hits every framework
            try:
                times = await _framework_run(ctx, peer, "full", f"{peer.name}-{repeat}")
            except Unsupported as exc:
                section.skip(peer.name, exc)
                continue
            runs.setdefault(peer.name, []).append(times)
            ctx.log(f"  1: {peer.name} run {repeat + 1}: {sum(times):.2f} s")
        runs.setdefault("raw", []).append(_raw_run(ctx, "full", f"full-{repeat}"))
        aniki = ctx.peers[0]
        default = await _framework_run(ctx, aniki, "normal", f"aniki-normal-{repeat}")
        runs.setdefault("aniki normal", []).append(default)
        runs.setdefault("raw normal", []).append(_raw_run(ctx, "normal", f"normal-{repeat}"))
    _rows(section, runs, turns, window)
    return section


def _rows(section: Section, runs: dict[str, list[list[float]]], turns: int, window: int) -> None:
    first = section.row(f"per turn, first {window} turns", "ms")
    last = section.row(f"per turn, last {window} turns", "ms")
    flat = section.row("last / first", "x", aniki_at_most(2.0, "aniki <= 2"))
    target = ratio_at_most("openai-agents", 0.05, "aniki/openai-agents <= 0.05 (20x less)")
    total = section.row(f"total, {turns} turns", "s", target)
    defaults = section.row(
        f"total, {turns} turns, default durability (aniki and raw: normal)", "s", target
    )
    for name, samples in runs.items():
        firsts = [median(times[:window]) for times in samples]
        lasts = [median(times[-window:]) for times in samples]
        totals = median([sum(times) for times in samples])
        if name.endswith(" normal"):
            defaults.values[name.split()[0]] = totals
            continue
        first.values[name] = median(firsts) * 1e3
        last.values[name] = median(lasts) * 1e3
        flat.values[name] = median([b / a for a, b in zip(firsts, lasts, strict=True)])
        total.values[name] = totals
        if name == "openai-agents":  # it has no other setting: its default is FULL
            defaults.values[name] = totals
