"""Workload 8: what each history policy costs a real model server (llama.cpp, SmolLM2-135M).

The figures come from :mod:`workloads.live_server`: one conversation per policy on
llama-cpp-python's OpenAI-compatible server, the server's own log telling how many prompt
tokens it evaluated per request (the rest it reused from its KV cache), and the wall time of
each turn. A full run covers 40 turns and reports turns 1-10 against 31-40; ``--quick`` runs
20 turns (1-5 against 16-20); the smoke run, 4 turns (1-2 against 3-4), only proves the
harness works.

The ``tools, ...`` rows come from :mod:`workloads.live_tools`: the same measure on a
tool-heavy conversation (each turn three tool results of 200-800 characters) with no policy,
``TokenBudgetSession(2000)`` and the same budget with ``clear_tool_results=True``, on a
server whose context (8,192 tokens) holds no policy's whole history. A full run covers 24
turns (1-8 against 17-24), ``--quick`` 12 (1-4 against 9-12), the smoke run 2 with results of
40-80 characters. Their rows add how many turns in the range moved the window's cut and how
many cleared results.
Only aniki is measured: the peers run the same server through the same HTTP API, and what
the server evaluates depends only on the history each sends, which workload 7 compares.

Targets, on the last range: the default ``TokenBudgetSession(600)`` evaluates at most half
the prompt tokens of its one-step slide, and at most twice what no policy evaluates per turn;
on tool-heavy turns, each budget evaluates at most 1.5 times what no policy does.
"""

from __future__ import annotations

from collections.abc import Sequence

from peers.servers import ServerMissing

from workloads import live_server, live_tools
from workloads._common import Context, Section, aniki_at_most

NUMBER = 8
TITLE = "a real model server"

_BUDGET = "TokenBudgetSession(600)"
_SLIDE = "TokenBudgetSession(600, trim_to=600)"
_TOOLS = "tools, "

_CHAT_SCALES = {
    "full": (40, ((1, 10), (31, 40))),
    "quick": (20, ((1, 5), (16, 20))),
    "smoke": (4, ((1, 2), (3, 4))),
}
_TOOL_SCALES = {
    "full": (24, ((1, 8), (17, 24)), live_tools.RESULT_CHARS),
    "quick": (12, ((1, 4), (9, 12)), live_tools.RESULT_CHARS),
    # Short results: two turns clear nothing anyway, and the test suite runs this.
    "smoke": (2, ((1, 1), (2, 2)), (40, 80)),
}


async def run(ctx: Context) -> Section:
    section = Section(NUMBER, f"{TITLE}: llama.cpp with SmolLM2-135M-Instruct")
    turns, ranges = _CHAT_SCALES[ctx.scale.name]
    tool_turns, tool_ranges, chars = _TOOL_SCALES[ctx.scale.name]
    missing = live_server.launcher().LiveUnavailable  # raised when no server can run here
    try:
        rows = await live_server.run(turns=turns, ranges=ranges, progress=ctx.log)
        tool_rows = await live_tools.run(
            turns=tool_turns, ranges=tool_ranges, chars=chars, progress=ctx.log
        )
    except missing as exc:
        section.skip("aniki", ServerMissing(f"the llama.cpp server: {exc}"), "every policy")
        return section
    _figures(section, "", rows)
    _figures(section, _TOOLS, tool_rows)
    _targets(section, rows, tool_rows, ranges[-1], tool_ranges[-1])
    return section


def _figures(section: Section, prefix: str, rows: Sequence[live_server.LiveRow]) -> None:
    for row in rows:
        first, last = row.turns
        label = f"{prefix}{row.policy}, turns {first}-{last}"
        section.row(f"{label}: prompt tokens per turn", "tokens").values["aniki"] = (
            row.prompt_tokens
        )
        section.row(f"{label}: evaluated per turn", "tokens").values["aniki"] = row.evaluated_tokens
        section.row(f"{label}: served from the KV cache", "%").values["aniki"] = (
            100 * row.reused_share
        )
        section.row(f"{label}: wall time per turn", "s").values["aniki"] = row.seconds
        if isinstance(row, live_tools.ToolRow) and row.policy != "no policy":
            section.row(f"{label}: turns that moved the cut", "turns").values["aniki"] = row.cuts
            cleared = section.row(f"{label}: turns that cleared results", "turns")
            cleared.values["aniki"] = row.clearings


def _targets(
    section: Section,
    rows: Sequence[live_server.LiveRow],
    tool_rows: Sequence[live_tools.ToolRow],
    late: tuple[int, int],
    tool_late: tuple[int, int],
) -> None:
    by_key = {(row.policy, row.turns): row for row in rows}
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
    late_tools = {row.policy: row for row in tool_rows if row.turns == tool_late}
    bare = late_tools.pop("no policy", None)
    if bare is None or not bare.evaluated_tokens:
        return
    span = f"turns {tool_late[0]}-{tool_late[1]}"
    for name, row in late_tools.items():
        section.row(
            f"{_TOOLS}{name}: evaluated / no policy's, {span}", "x", aniki_at_most(1.5, "≤ 1.5")
        ).values["aniki"] = row.evaluated_tokens / bare.evaluated_tokens
