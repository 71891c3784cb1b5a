"""Live workload, tool-heavy: what each history policy costs a real model server when every
turn carries three tool results.

    rows = await run()                      # 24 turns per policy
    print(table(rows))

``async def run(*, turns=24, ranges=((1, 8), (17, 24)), budget=2000, chars=(200, 800),
max_tokens=16, n_ctx=8192, log_dir=None, progress=None) -> list[ToolRow]``

Each turn is a question, an assistant message calling ``read_record`` three times, the three
results (200 to 800 characters each, drawn from a fixed seed, so every policy gets the same
conversation), then the server's reply through ``Runner`` and ``OpenAIProvider``. The calls
are scripted: a middleware answers the first model call of each turn (its request ends with
the question) without reaching the server, and the Runner runs the tool and stores the
exchange as it would a real one. SmolLM2-135M cannot be relied on to call tools, and
llama-cpp-python's ``chatml-function-calling`` format, which makes it call them, leaves tool
results out of the prompt and runs two completions per request. So the server runs the
model's own chat template (as workload 8's chat does): it renders each result as a message
of role ``tool`` and ignores the tool definitions.

**Sizes.** A turn adds about 290 of the server's tokens, and no policy's history must still
fit the server's context at the last turn: ``n_ctx`` is 8,192, SmolLM2's trained context,
which holds about 27 such turns, so a full run is 24 (about 7,100 tokens at the last). 40
turns, as the chat runs, would need results under the 400 characters below which
``clear_tool_results=True`` keeps a result whole.

**The budget.** ``budget`` is 2,000 of aniki's estimated tokens: a whole turn is about 450 of
them, a turn whose results are cleared about 240. It is small enough that both policies move
within any range of eight turns: ``TokenBudgetSession(2000)`` holds four whole turns, and its
cut moved every 2 to 4 turns in the full run (2026-12-07: turns 5, 8, 11, 13, 16, 19, 22);
with ``clear_tool_results=True`` results are cleared every other turn from turn 3 on, and the
cut moved every 3 to 6 turns (6, 12, 17, 20). It still holds several turns, while no
policy's request at turn 24 (about 7,100 tokens) is about eight times the budget's mean
request over turns 17-24.

Each row gives, per turn over its range, what :mod:`workloads.live_server` gives, plus how
many turns' requests moved the cut and how many cleared results the turn before sent whole,
read from the requests aniki sent.
"""

from __future__ import annotations

import json
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from workloads import live_server
from workloads.live_server import INSTRUCTIONS, LiveRow, TurnCost

BUDGET = 2000
"""The token budget of both policies (see the module docstring for why)."""
N_CTX = 8192
"""The server's context: SmolLM2-135M's trained context."""
RESULT_CHARS = (200, 800)
SEED = 8

_WORDS = (
    "order", "invoice", "customer", "warehouse", "shipped", "pending", "total", "status",
    "north", "south", "east", "west", "account", "balance", "region", "product", "item",
    "queue", "report", "value", "returned", "delayed", "refund", "carrier", "parcel",
    "address", "priority", "express", "standard", "weight", "label", "supplier", "stock",
)  # fmt: skip


@dataclass(frozen=True)
class Script:
    """One tool-heavy conversation, the same for every policy."""

    questions: tuple[str, ...]
    """The user's message of each turn (turn ``n`` at index ``n - 1``)."""
    records: Mapping[str, str]
    """What ``read_record`` returns, by its ``ref`` (``"<turn>.<call>"``)."""

    @classmethod
    def make(cls, turns: int, *, chars: tuple[int, int] = RESULT_CHARS, seed: int = SEED) -> Script:
        rng = random.Random(seed)
        records: dict[str, str] = {}
        for turn in range(1, turns + 1):
            for call in (1, 2, 3):
                ref = f"{turn}.{call}"
                size = rng.randint(*chars)
                text = f"Record {ref}:"
                while len(text) < size:
                    text += " " + rng.choice(_WORDS)
                records[ref] = text[:size]
        questions = tuple(
            f"Turn {turn}: read records {turn}.1, {turn}.2 and {turn}.3; what do they share?"
            for turn in range(1, turns + 1)
        )
        return cls(questions, records)

    def calls(self, turn: int) -> tuple[Any, ...]:
        """The assistant's three calls of ``turn``."""
        from aniki import ToolCall

        return tuple(
            ToolCall(id=f"call-{turn}.{call}", name="read_record",
                     arguments=json.dumps({"ref": f"{turn}.{call}"}))
            for call in (1, 2, 3)
        )  # fmt: skip

    def result_of(self, call_id: str) -> str:
        return self.records[call_id.removeprefix("call-")]

    def tool(self) -> Any:
        """The ``read_record`` tool the agent runs."""
        from aniki import tool

        records = self.records

        @tool
        def read_record(ref: str) -> str:
            """Read one record.

            Args:
                ref: the record's reference, "<turn>.<number>".
            """
            return records[ref]

        return read_record


class ScriptedCalls:
    """Model middleware: answers each turn's first call (its request ends with the question)
    with the turn's three tool calls, without reaching the server; passes the call after the
    results on, keeping the history it sends."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self._turns = {question: n for n, question in enumerate(script.questions, 1)}
        self.sent: list[tuple[Any, ...]] = []
        """The history (after the instructions) of each request that reached the server."""

    async def __call__(
        self, ctx: Any, request: Any, call_next: Callable[[Any], Awaitable[Any]]
    ) -> Any:
        from aniki import ModelResponse

        last = request.messages[-1]
        if last.role == "user":
            calls = self.script.calls(self._turns[last.content])
            return ModelResponse(tool_calls=calls, finish_reason="tool_calls")
        self.sent.append(tuple(request.messages[1:]))
        return await call_next(request)


def cleared(script: Script, history: Sequence[Any]) -> set[str]:
    """The call ids of the results ``history`` sends in place of what the tool returned."""
    return {
        m.tool_call_id
        for m in history
        if m.role == "tool" and m.content != script.result_of(m.tool_call_id)
    }


def moves(script: Script, before: Sequence[Any], after: Sequence[Any]) -> tuple[bool, bool]:
    """Whether ``after`` (a request's history) starts later than ``before`` (the cut moved),
    and whether it clears a result ``before`` sent whole (a clearing step)."""
    cut = after[0].id != before[0].id
    whole = {m.tool_call_id for m in before if m.role == "tool"} - cleared(script, before)
    return cut, bool(whole & cleared(script, after))


@dataclass(frozen=True)
class ToolRow(LiveRow):
    """A :class:`LiveRow` of the tool-heavy conversation."""

    cuts: int = 0
    """Turns in the range whose request started later in the history than the one before."""
    clearings: int = 0
    """Turns in the range whose request cleared results the one before sent whole."""


@dataclass(frozen=True)
class _Turn:
    cost: TurnCost
    cut: bool
    clearing: bool


def policies(budget: int = BUDGET) -> dict[str, Callable[[Any], Any]]:
    """The policies compared, by the name the table shows: store -> session."""
    from aniki.sessions import TokenBudgetSession

    return {
        "no policy": lambda store: store,
        f"TokenBudgetSession({budget})": lambda store: TokenBudgetSession(store, budget),
        f"TokenBudgetSession({budget}, clear_tool_results=True)": lambda store: TokenBudgetSession(
            store, budget, clear_tool_results=True
        ),
    }


async def _conversation(
    server: Any, provider: live_server.Counting, session: Any, script: Script, max_tokens: int
) -> list[_Turn]:
    from aniki import Agent, Runner

    scripted = ScriptedCalls(script)
    agent = Agent(
        "Live",
        INSTRUCTIONS,
        model=live_server.launcher().MODEL_NAME,
        provider=provider,
        session=session,
        tools=[script.tool()],
        middleware=[scripted],
        settings={"max_tokens": max_tokens, "temperature": 0},
    )
    runner = Runner()
    made: list[_Turn] = []
    for question in script.questions:
        cost, _ = await live_server.timed_turn(server, provider, runner, agent, question)
        if cost.requests != 1:
            raise AssertionError(f"a turn reached the server {cost.requests} times, not once")
        cut, clearing = moves(script, *scripted.sent[-2:]) if made else (False, False)
        made.append(_Turn(cost, cut, clearing))
    return made


def _rows(policy: str, turns: Sequence[_Turn], ranges: Sequence[tuple[int, int]]) -> list[ToolRow]:
    rows = []
    for row in live_server.summarize(policy, [t.cost for t in turns], ranges):
        part = turns[row.turns[0] - 1 : row.turns[1]]
        counts = {"cuts": sum(t.cut for t in part), "clearings": sum(t.clearing for t in part)}
        rows.append(ToolRow(**asdict(row), **counts))
    return rows


async def run(
    *,
    turns: int = 24,
    ranges: Sequence[tuple[int, int]] = ((1, 8), (17, 24)),
    budget: int = BUDGET,
    chars: tuple[int, int] = RESULT_CHARS,
    max_tokens: int = 16,
    n_ctx: int = N_CTX,
    log_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[ToolRow]:
    """Run every policy's tool-heavy conversation against one server; see the module
    docstring. Raises the launcher's ``LiveUnavailable`` when the server is not installed."""
    from aniki import SQLiteSession

    script = Script.make(turns, chars=chars)
    rows: list[ToolRow] = []
    # "llama.cpp": an assistant message with tool calls is sent with "" as its text (the
    # server answers null with an HTTP 500).
    serving = live_server.serving(n_ctx=n_ctx, log_dir=log_dir, compat="llama.cpp")
    async with serving as (server, provider, scratch):
        for name, wrap in policies(budget).items():
            # Every conversation starts alike: without this, the second policy's first turn
            # would be served from the first policy's conversation left in the KV cache.
            await live_server.warm_up(provider.inner)
            session = wrap(SQLiteSession(name, scratch / "tools.db"))
            made = await _conversation(server, provider, session, script, max_tokens)
            rows.extend(_rows(name, made, ranges))
            if progress:
                progress(f"tools, {name}: {sum(t.cost.seconds for t in made):.1f} s")
    return rows


def table(rows: Sequence[ToolRow]) -> str:
    """The rows as a Markdown table."""
    lines = [
        "| policy | turns | prompt tokens / turn | evaluated / turn | from cache | wall s / turn "
        "| cuts | clearings |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row.policy} | {row.turns[0]}-{row.turns[1]} | {row.prompt_tokens:,.0f} "
            f"| {row.evaluated_tokens:,.0f} | {row.reused_share:.1%} | {row.seconds:.2f} "
            f"| {row.cuts} | {row.clearings} |"
        )
    return "\n".join(lines)
