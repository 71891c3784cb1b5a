"""Workload 8: what each history policy costs a real model server (llama.cpp, SmolLM2-135M).

The figures come from :mod:`workloads.live_server`: one conversation per policy on
llama-cpp-python's OpenAI-compatible server, the server's own log telling how many prompt
tokens it evaluated per request (the rest it reused from its KV cache), and the wall time of
each turn. A full run covers 40 turns and reports turns 1-10 against 31-40; ``--quick`` runs
20 turns (1-5 against 16-20); the smoke run, 4 turns (1-2 against 3-4), only proves the
harness works.
Only aniki is measured: the peers run the same server through the same HTTP API, and what
the server evaluates depends only on the history each sends, which workload 7 compares.

Targets, on the last range: the default ``TokenBudgetSession(600)`` evaluates at most half
the prompt tokens of its one-step slide, and at most twice what no policy evaluates per turn.
"""

from __future__ import annotations

from peers.servers import ServerMissing

from workloads import live_server
from workloads._common import Context, Section, aniki_at_most

NUMBER = 8
TITLE = "a real model server"

_BUDGET = "TokenBudgetSession(600)"
_SLIDE = "TokenBudgetSession(600, trim_to=600)"


async def run(ctx: Context) -> Section:
    section = Section(NUMBER, f"{TITLE}: llama.cpp with SmolLM2-135M-Instruct")
    turns, ranges = {
        "full": (40, ((1, 10), (31, 40))),
        "quick": (20, ((1, 5), (16, 20))),
        "smoke": (4, ((1, 2), (3, 4))),
    }[ctx.scale.name]
    missing = live_server._launcher().LiveUnavailable  # raised when no server can run here
    try:
        rows = await live_server.run(turns=turns, ranges=ranges, progress=ctx.log)
    except missing as exc:
        section.skip("aniki", ServerMissing(f"the llama.cpp server: {exc}"), "every policy")
        return section
    by_key = {(row.policy, row.turns): row for row in rows}
    for row in rows:
        first, last = row.turns
        label = f"{row.policy}, turns {first}-{last}"
        section.row(f"{label}: prompt tokens per turn", "tokens").values["aniki"] = (
            row.prompt_tokens
        )
        section.row(f"{label}: evaluated per turn", "tokens").values["aniki"] = row.evaluated_tokens
        section.row(f"{label}: served from the KV cache", "%").values["aniki"] = (
            100 * row.reused_share
        )
        section.row(f"{label}: wall time per turn", "s").values["aniki"] = row.seconds
    late = ranges[-1]
    budget, slide, bare = (by_key.get((name, late)) for name in (_BUDGET, _SLIDE, "no policy"))
    span = f"turns {late[0]}-{late[1]}"
    if budget is not None and slide is not None and slide.evaluated_tokens:
        section.row(
            f"{_BUDGET}: evaluated / one-step slide's, {span}",
            "x",
            aniki_at_most(0.5, "≤ 1/2"),
        ).values["aniki"] = budget.evaluated_tokens / slide.evaluated_tokens
    if budget is not None and bare is not None and bare.evaluated_tokens:
        section.row(
            f"{_BUDGET}: evaluated / no policy's, {span}", "x", aniki_at_most(2.0, "≤ 2")
        ).values["aniki"] = budget.evaluated_tokens / bare.evaluated_tokens
    return section
