"""Tool-heavy turns on the real server: what ``clear_tool_results`` promises a prompt cache.

Every turn is a question, an assistant message calling ``read_record`` three times, the three
results (450 to 650 characters, all long enough to be cleared) and the server's reply. The
calls are scripted by a middleware that answers each turn's first model call without
reaching the server (SmolLM2-135M cannot be relied on to call tools), so the server sees one
request per turn, rendered by the model's own chat template, tool results included.

The budget is large enough that the window never cuts here: the only changes to the start
of a request are the clearing steps, where old results become placeholders. Between them,
each request is the previous one plus the new turn, and the server's KV cache holds all of
the previous request; at a step the reuse drops, but only down to where the newly cleared
results start.
"""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from aniki import Agent, ModelResponse, SQLiteSession, ToolCall, tool
from aniki.providers import OpenAIProvider
from aniki.sessions import ClearToolResults, TokenBudgetSession

from .helpers import (
    INSTRUCTIONS,
    SETTINGS,
    Recorder,
    Turn,
    converse,
    describe,
    kept_prefix,
    live_server,
    question,
)

pytestmark = pytest.mark.live

TURNS = range(1, 7)
RULES = ClearToolResults()  # what clear_tool_results=True means: keep 1 turn, clear 2 at a time
BUDGET = 4000
"""Estimated tokens: six turns hold about 1,700 once cleared, so the window never cuts."""

_rng = random.Random(11)
_WORDS = ("order", "invoice", "shipped", "pending", "region", "account", "balance", "stock")
RECORDS = {
    f"{turn}.{call}": " ".join(_rng.choice(_WORDS) for _ in range(120))[: _rng.randint(450, 650)]
    for turn in TURNS
    for call in (1, 2, 3)
}


@tool
def read_record(ref: str) -> str:
    """Read one record.

    Args:
        ref: the record's reference, "<turn>.<number>".
    """
    return RECORDS[ref]


async def three_calls_first(
    ctx: Any, request: Any, call_next: Callable[[Any], Awaitable[ModelResponse]]
) -> ModelResponse:
    """A request ending with the question is answered here, with the turn's three calls; the
    request after their results goes on to the server."""
    last = request.messages[-1]
    if last.role != "user":
        return await call_next(request)
    turn = next(n for n in TURNS if question(n) == last.content)
    calls = tuple(
        ToolCall(f"call-{turn}.{n}", "read_record", json.dumps({"ref": f"{turn}.{n}"}))
        for n in (1, 2, 3)
    )
    return ModelResponse(tool_calls=calls, finish_reason="tool_calls")


@pytest.fixture
async def tools_provider(llama: Any) -> AsyncIterator[OpenAIProvider]:
    # "llama.cpp": an assistant message with tool calls goes with "" as its text (the server
    # answers null with an HTTP 500).
    made = OpenAIProvider(
        base_url=llama.base_url, api_key="none", max_retries=0, timeout=120, compat="llama.cpp"
    )
    yield made
    await made.aclose()


def _cleared(turn: Turn) -> int:
    """How many results ``turn``'s request sent in place of what the tool returned."""
    return sum(1 for m in turn.history if m.role == "tool" and m.content not in RECORDS.values())


async def test_the_prefix_holds_between_clearing_steps(
    llama: Any, tools_provider: OpenAIProvider, tmp_path: Path
) -> None:
    session = TokenBudgetSession(
        SQLiteSession("tools", tmp_path / "chat.db"), BUDGET, clear_tool_results=RULES
    )
    recorder = Recorder()  # inside the scripted middleware: it sees what reaches the server
    agent = Agent(
        "Live",
        INSTRUCTIONS,
        model=live_server.MODEL_NAME,
        provider=tools_provider,
        session=session,
        tools=[read_record],
        settings=SETTINGS,  # type: ignore[arg-type]
        middleware=[three_calls_first, recorder],
    )
    turns = await converse(llama, agent, TURNS, recorder)
    table = describe(turns)

    steps = {n for n in TURNS[1:] if RULES.line(n) != RULES.line(n - 1)}
    assert steps == {3, 5}
    for turn in turns:
        assert [m.role for m in turn.history[-5:]] == ["user", "assistant", *["tool"] * 3]
        assert _cleared(turn) == 3 * RULES.line(turn.number), table
    for previous, turn in pairwise(turns):
        step = turn.number in steps
        # What aniki sent, and what it said about it, change only at the steps...
        assert kept_prefix(previous, turn) is not step, table
        assert all(r.prefix_kept for r in turn.result.context_reports) is not step, table
        # ...and the server reused the whole previous request everywhere else.
        assert (turn.reused_tokens >= previous.prompt_tokens) is not step, table
    for turn in turns[3:]:
        if turn.number not in steps:
            assert turn.served.evaluated_tokens < turn.prompt_tokens / 2, table
    # A step re-sends only from the newly cleared results on: the placeholders of the
    # earlier steps stay in the cached prefix, so each step reuses more than the one before.
    at_steps = [t.reused_tokens for t in turns if t.number in steps]
    assert at_steps == sorted(at_steps) and at_steps[0] < at_steps[-1], table
