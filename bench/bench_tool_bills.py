"""Benchmark what history policies are billed on tool-heavy conversations (a script, not a test).

Two scripted conversations run through the Runner (model: ``MockProvider``) once per side:
tool-heavy (a turn: a user message, an assistant message making 3 tool calls, 3 results of
2-8 KB of JSON records or log lines, a reply; 5-60 s apart) and pauses (plain chat, 5-60 s
apart, 6-30 minutes one time in five; the stores stamp messages with the simulated clock, so
``cache_ttl`` sees them). Each request is counted (tools, instructions, messages) and billed
with ``aniki.pricing`` for gpt-4o-mini and claude-sonnet-4-5 (which writes the uncached rest
to its cache): its prefix shared with the previous request (tools, then the equal leading
messages) is cached if that request is less than 300 s old. The floor pays each message once.

Run: ``python bench/bench_tool_bills.py`` (``--quick``: 60 turns instead of 300; ``--turns N``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib.util
import inspect
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, ClassVar, cast
from unittest import mock

from aniki import Agent, Context, Message, Runner, ToolCall, tool
from aniki.pricing import CacheRules, Prices, prices_for
from aniki.providers.base import ModelRequest, ModelResponse
from aniki.sessions import (
    InMemorySession,
    SummarizingSession,
    TokenBudgetSession,
    WindowedSession,
    policies,
)
from aniki.testing import MockProvider
from aniki.tokens import counter_for_model

MODEL, BUDGET, WINDOW, TTL, CALL_SECONDS, SEED = "gpt-4o-mini", 16_000, 40, 300.0, 2.0, 2026
FLAT = Prices(
    "flat",
    input=1.0,
    output=1.0,
    cache_read=0.1,
    cache_write=1.0,
    minimum=0,
    rules=CacheRules(read=0.1),
)
"""Workload 7's single rule: a cached token at a tenth, no minimum, steps or write premium."""
PRICES = {
    "OpenAI": prices_for(MODEL),
    "Anthropic": prices_for("claude-sonnet-4-5"),
    "0.1x rule": FLAT,
}
COUNTER: Any = counter_for_model(MODEL)  # TiktokenCounter (count_text) with the extra
START = datetime.fromisoformat("2026-01-05T09:00:00+00:00")
TOOL_HEAVY, PAUSES, HEAVY_PAUSES = "tool-heavy", "pauses", "tool-heavy with pauses"
BUDGET_SIDE = f"TokenBudgetSession({BUDGET:,})"
TTL_SIDE = f"TokenBudgetSession({BUDGET:,}, cache_ttl={TTL:g})"
TTL_WINDOW = f"WindowedSession({WINDOW}, cache_ttl={TTL:g})"
CLEAR_SIDE = f"TokenBudgetSession({BUDGET:,}, clear_tool_results=True)"
CLEAR_TTL_SIDE = f"TokenBudgetSession({BUDGET:,}, cache_ttl={TTL:g}, clear_tool_results=True)"
SUMMARY_AGENT = f"SummarizingSession(agent, {BUDGET:,})"
SUMMARY_SELF = f"SummarizingSession(None, {BUDGET:,})"
CLEARINGS = ("True", "ClearToolResults(every=1)")
"""The ``clear_tool_results=`` of the summarizing sides that clear old tool results."""


def cleared(side: str, clearing: str) -> str:
    """The label of the summarizing ``side`` with ``clear_tool_results=clearing``."""
    return f"{side[:-1]}, clear_tool_results={clearing})"


SUMMARY_ASK = "This message is from the application"
"""How a summary request asked of the run's own model ends (see aniki's _summarizer)."""
INSTRUCTIONS = (
    "You are the operations assistant of an online shop. Look orders up and read the "
    "services' logs with your tools, then answer briefly and say what you found."
)
VOCABULARY = """order refund invoice shipment carrier warehouse customer payment declined retry
    timeout latency queue worker deploy rollback release cache database replica index query slow
    spike error alert incident status address parcel stock supplier price discount cart checkout
    session token region north south monday tonight weekly report dashboard metric threshold
    because however likely still again only maybe should could check confirm compare explain the
    a of to in for on with from after before between about every other first last new many few"""
WORDS = tuple(VOCABULARY.split())
Key = tuple[str, str, tuple[ToolCall, ...], str | None]
"""What makes two messages the same to a prefix cache."""
_COUNTS: dict[Key, int] = {}
Wrap = Callable[[InMemorySession], Any]


def _prose(rng: random.Random, low: int, high: int) -> str:
    words, sentences = rng.choices(WORDS, k=rng.randint(low, high)), []
    while words:
        cut = rng.randint(6, 16)
        sentences.append(" ".join(words[:cut]).capitalize() + rng.choice(".?.."))
        words = words[cut:]
    return " ".join(sentences)


SUMMARY = "Summary: " + _prose(random.Random(SEED + 1), 200, 240)
"""What the scripted model replies when asked for a summary."""


def _entry(rng: random.Random, name: str) -> str:
    """One JSON order record, or one log line."""
    when = (START - timedelta(seconds=rng.randint(0, 9_000_000))).isoformat()[:19]
    if name == "read_logs":
        service = f"{rng.choice(('api', 'checkout', 'billing', 'search'))}-{rng.randint(1, 9)}"
        return (
            f"{when}.{rng.randint(0, 999):03d}Z {rng.choice(('INFO', 'WARN', 'ERROR')):5} "
            f"[{service}] {rng.choice(('GET', 'POST', 'PUT'))} /v{rng.randint(1, 3)}/"
            f"{rng.choice(WORDS)}/{rng.randint(1, 99999)} {rng.choice((200, 404, 409, 503))} "
            f"{rng.randint(2, 4000)}ms req={rng.getrandbits(48):012x} {_prose(rng, 2, 9)}"
        )
    first, last = rng.sample(WORDS, 2)
    record = {"order_id": rng.randint(10**6, 10**8), "customer": f"{first} {last}".title()}
    record |= {"email": f"{first}.{last}{rng.randint(1, 999)}@example.com", "created": when}
    record |= {"status": rng.choice(("pending", "shipped", "delivered", "refunded"))}
    record |= {"items": [[rng.choice(WORDS).upper(), rng.randint(1, 5)] for _ in range(3)]}
    return json.dumps(record | {"total": round(rng.uniform(4, 900), 2), "note": _prose(rng, 0, 14)})


TOOLS = {"query_orders": "Look orders up by customer or status.", "read_logs": "Read service logs."}


@dataclass(frozen=True)
class Turn:
    user: str
    reply: str
    pause: float  # seconds the user thinks before sending it
    calls: tuple[ToolCall, ...] = ()
    results: tuple[str, ...] = ()


def with_pauses(made: list[Turn]) -> list[Turn]:
    """The tool-heavy conversation ``made`` with the chat's think times: 5-60 s four times in
    five, 6-30 minutes otherwise (drawn apart, so the turns themselves are the same)."""
    rng = random.Random(SEED + 2)
    draw = [rng.uniform(5, 60) if rng.random() < 0.8 else rng.uniform(360, 1800) for _ in made]
    return [replace(turn, pause=pause) for turn, pause in zip(made, draw, strict=True)]


def trace(turns: int, tools: bool) -> list[Turn]:
    """The tool-heavy conversation, or (``tools=False``) the plain chat with pauses."""
    rng, made = random.Random(SEED + tools), []
    for t in range(turns):
        user = _prose(rng, 30, 80)
        if not tools:
            pause = rng.uniform(5, 60) if rng.random() < 0.8 else rng.uniform(360, 1800)
            made.append(Turn(user, _prose(rng, 100, 300), pause))
            continue
        names, results = rng.choices(sorted(TOOLS), k=3), []
        for name in names:
            lines, size = [_entry(rng, name)], rng.randint(2048, 8192)
            while sum(map(len, lines)) < size:
                lines.append(_entry(rng, name))
            results.append("\n".join(lines) if name == "read_logs" else f"[{','.join(lines)}]")
        calls = [
            ToolCall(f"call_{t}_{i}", n, json.dumps({"query": _prose(rng, 2, 5)}))
            for i, n in enumerate(names)
        ]
        reply = _prose(rng, 40, 120)
        made.append(Turn(user, reply, rng.uniform(5, 60), tuple(calls), tuple(results)))
    return made


@dataclass
class Meter:
    """One side's requests: tokens sent, tokens of the prefix shared with the one before, when."""

    tools: int = 0
    rows: list[tuple[int, int, float]] = field(default_factory=list)
    summaries: set[int] = field(default_factory=set)  # rows that asked for a summary
    side: Meter | None = None  # a summarizer agent's own requests
    kept: list[tuple[tuple[Message, ...], float]] | None = None
    seen: set[Key] = field(default_factory=set)
    previous: list[Key] = field(default_factory=list)

    def record(self, messages: Sequence[Message], at: float, summary: bool = False) -> None:
        if summary:
            self.summaries.add(len(self.rows))
        keys: list[Key] = [(m.role, m.content, m.tool_calls, m.tool_call_id) for m in messages]
        for key, message in zip(keys, messages, strict=True):
            if key not in _COUNTS:
                _COUNTS[key] = COUNTER.count_message(message)
        sizes, shared = [_COUNTS[key] for key in keys], 0
        while shared < min(len(keys), len(self.previous)) and keys[shared] == self.previous[shared]:
            shared += 1
        prefix = self.tools + sum(sizes[:shared]) if self.rows else 0
        self.rows.append((self.tools + sum(sizes), prefix, at))
        self.seen.update(keys)
        self.previous = keys
        if self.kept is not None:
            self.kept.append((tuple(messages), at))

    @property
    def sent(self) -> int:
        return sum(row[0] for row in self.rows) + (self.side.sent if self.side else 0)

    @property
    def requests(self) -> int:
        return len(self.rows) + (len(self.side.rows) if self.side else 0)

    @property
    def mean(self) -> float:
        return self.sent / len(self.rows)

    def floor(self) -> int:  # tools and every distinct message sent, once each
        return self.tools + sum(_COUNTS[key] for key in self.seen)

    def bill(self, summaries: bool = False) -> tuple[int, dict[str, float]]:
        """Tokens served from the cache (a prefix, if the last request is < ``TTL`` old) and
        the dollars each price list bills (``summaries``: the summaries' requests only)."""
        dollars, cached_total, last = dict.fromkeys(PRICES, 0.0), 0, -TTL
        for row, (sent, prefix, at) in enumerate(self.rows):
            cached = prefix if at - last < TTL else 0
            cached_total, last = cached_total + cached, at
            if summaries and row not in self.summaries:
                continue
            for name, prices in PRICES.items():
                written = sent - cached if prices.rules.breakpoints else 0  # Anthropic
                dollars[name] += prices.request(sent, cached, written=written)
        if self.side is not None:  # every request of a summarizer agent is a summary's
            side_cached, side = self.side.bill()
            cached_total += side_cached
            dollars = {name: dollars[name] + side[name] for name in dollars}
        return cached_total, dollars


class Simulated(datetime):
    """The clock ``aniki._stamps`` reads during a run (patched in for its ``datetime``; every
    time it hands out is one of these, so the stamps' ``isinstance`` checks still pass)."""

    current: ClassVar[Simulated]

    @classmethod
    def now(cls, tz: Any = None) -> Simulated:
        return cls.current

    @classmethod
    def advance(cls, seconds: float) -> float:
        cls.current += timedelta(seconds=seconds)
        return cls.current.timestamp() - START.timestamp()


async def converse(trace: list[Turn], wrap: Wrap, *, keep: bool = False) -> Meter:
    """The conversation through the Runner behind ``wrap``: every request it made, metered."""
    meter = Meter(kept=[] if keep else None)
    Simulated.current = Simulated.fromisoformat(START.isoformat())
    results = {c.id: r for turn in trace for c, r in zip(turn.calls, turn.results, strict=True)}
    current = trace[0]

    async def fetch(ctx: Context, query: str) -> str:
        return results[ctx.tool_call_id or ""]

    def answer(request: ModelRequest) -> ModelResponse:
        if not meter.rows and request.tools:
            listed = [(t.name, t.description, t.parameters) for t in request.tools]
            meter.tools = COUNTER.count_text(json.dumps(listed))
        last = request.messages[-1]
        asked = last.role == "user" and last.content.startswith(SUMMARY_ASK)
        meter.record(request.messages, Simulated.advance(0), summary=asked)
        Simulated.advance(CALL_SECONDS)
        if asked or "<new_messages>" in last.content:  # the run's own model summarizes
            return ModelResponse(content=SUMMARY, finish_reason="stop")
        if last.role == "user" and last.content != current.user:
            raise AssertionError("the request does not end with the scripted turn")
        if current.calls and last.role == "user":
            return ModelResponse(tool_calls=current.calls, finish_reason="tool_calls")
        return ModelResponse(content=current.reply, finish_reason="stop")

    tools = [tool(name=name, description=text)(fetch) for name, text in TOOLS.items()]
    provider, tools = MockProvider(handler=answer), tools if results else []
    agent = Agent("ops", INSTRUCTIONS, model=MODEL, provider=provider, tools=tools)
    session, runner = wrap(InMemorySession()), Runner()
    with mock.patch("aniki._stamps.datetime", Simulated):
        for current in trace:
            Simulated.advance(current.pause)
            result = await runner.run(agent, message=current.user, session=session)
            if result.content != current.reply:
                raise AssertionError("the run did not return the scripted reply")
    meter.side = getattr(wrap, "meter", None)
    return meter


class AgentSummarizer:
    """A ``SummarizingSession`` whose summaries an agent of its own writes (the transcript
    form), its requests metered apart; ``options``: the policy's own."""

    def __init__(self, **options: Any) -> None:
        self.options = options

    def __call__(self, store: InMemorySession) -> Any:
        self.meter = side = Meter()

        def write(request: ModelRequest) -> ModelResponse:
            side.record(request.messages, Simulated.advance(0), summary=True)
            Simulated.advance(CALL_SECONDS)
            return ModelResponse(content=SUMMARY, finish_reason="stop")

        summarizer = Agent("summarizer", model=MODEL, provider=MockProvider(handler=write))
        return SummarizingSession(store, summarizer, BUDGET, model=MODEL, **self.options)


def _budget(**options: Any) -> Wrap:
    return lambda store: TokenBudgetSession(store, BUDGET, model=MODEL, **options)


BOTH, CHAT, HEAVY = (TOOL_HEAVY, PAUSES), (PAUSES,), (TOOL_HEAVY,)
SIDES: list[tuple[str, Wrap, tuple[str, ...]]] = [
    ("no policy", lambda store: store, (*BOTH, HEAVY_PAUSES)),
    (BUDGET_SIDE, _budget(), (*BOTH, HEAVY_PAUSES)),
    (f"TokenBudgetSession({BUDGET:,}, trim_to={BUDGET:,})", _budget(trim_to=BUDGET), BOTH),
    (f"WindowedSession({WINDOW})", lambda store: WindowedSession(store, WINDOW), BOTH),
    (TTL_SIDE, _budget(cache_ttl=TTL), (PAUSES, HEAVY_PAUSES)),
    (TTL_WINDOW, lambda store: WindowedSession(store, WINDOW, cache_ttl=TTL), CHAT),
    (SUMMARY_AGENT, AgentSummarizer(), BOTH),
    (SUMMARY_SELF, lambda store: SummarizingSession(store, None, BUDGET, model=MODEL), BOTH),
]
"""aniki's sides: label, the policy over a fresh store, the conversations it holds."""
_CLEAR = getattr(policies, "ClearToolResults", None)
if _CLEAR is not None and "clear_tool_results" in inspect.signature(TokenBudgetSession).parameters:
    for size, clearing, label in (
        (BUDGET, True, "True"),
        (BUDGET, _CLEAR(keep_turns=2), "ClearToolResults(keep_turns=2)"),
        (BUDGET // 2, True, "True"),
    ):
        wrap = functools.partial(TokenBudgetSession, max_tokens=size, model=MODEL)
        side = f"TokenBudgetSession({size:,}, clear_tool_results={label})"
        held = (TOOL_HEAVY, HEAVY_PAUSES) if side == CLEAR_SIDE else (TOOL_HEAVY,)
        SIDES.append((side, functools.partial(wrap, clear_tool_results=clearing), held))
    SIDES.append((CLEAR_TTL_SIDE, _budget(cache_ttl=TTL, clear_tool_results=True), (HEAVY_PAUSES,)))
if _CLEAR is not None and "clear_tool_results" in inspect.signature(SummarizingSession).parameters:
    for label, clearing in zip(CLEARINGS, (True, _CLEAR(every=1)), strict=True):
        own = functools.partial(SummarizingSession, summarizer=None, max_tokens=BUDGET, model=MODEL)
        SIDES += [
            (cleared(SUMMARY_AGENT, label), AgentSummarizer(clear_tool_results=clearing), HEAVY),
            (
                cleared(SUMMARY_SELF, label),
                functools.partial(own, clear_tool_results=clearing),
                HEAVY,
            ),
        ]


def agents_window(body: Sequence[Message], limit: int) -> list[Message] | None:
    """openai-agents: the last ``limit`` stored items (``SessionSettings(limit=...)``; a tool
    call is one, a result another), read once per run, then the run's own; ``None`` when the
    items cut through one message's tool calls (some results would lose their call)."""
    start = next(i for i in range(len(body) - 1, -1, -1) if body[i].role == "user")
    first, held = start, 0
    while first > 0 and held < limit:
        first -= 1
        held += len(body[first].tool_calls) or 1
    return None if held > limit or body[first].role == "tool" else list(body[first:])


def trimmed_window(body: Sequence[Message], limit: int) -> list[Message] | None:
    """``agents_window``, then ``ToolOutputTrimmer()`` (openai-agents' own code, as its
    ``call_model_input_filter``) on the items of each request."""
    from agents.extensions import ToolOutputTrimmer
    from agents.run_config import CallModelData, ModelInputData

    window = agents_window(body, limit)
    if window is None:
        return None
    items: list[Any] = []
    for m in window:
        if m.role == "tool":
            items.append(
                {"type": "function_call_output", "call_id": m.tool_call_id} | {"output": m.content}
            )
            continue
        items.append({"role": m.role, "content": m.content})
        items += [{"type": "function_call", "call_id": c.id, "name": c.name} for c in m.tool_calls]
    filtered: list[Any] = ToolOutputTrimmer()(
        CallModelData(ModelInputData(items, INSTRUCTIONS), agent=cast(Any, None), context=None)
    ).input
    outputs = iter(str(item["output"]) for item in filtered if "output" in item)
    return [replace(m, content=next(outputs)) if m.role == "tool" else m for m in window]


def pydantic_window(body: Sequence[Message], count: int) -> list[Message] | None:
    """pydantic-ai: a history processor keeping the last ``count`` messages of each request
    (``ModelRequest`` or ``ModelResponse``: a turn's tool results are one message)."""
    start = len(body)
    for _ in range(count):
        if start == 0:
            break
        start -= 1
        while start > 0 and body[start].role == "tool" and body[start - 1].role == "tool":
            start -= 1
    return None if body[start].role == "tool" else list(body[start:])


Window = Callable[[Sequence[Message], int], "list[Message] | None"]
PEERS: list[tuple[str, str, Window, tuple[str, ...]]] = [
    ("openai-agents, SessionSettings(limit={n})", "agents", agents_window, BOTH),
    ("openai-agents, limit={n} + ToolOutputTrimmer()", "agents", trimmed_window, (TOOL_HEAVY,)),
    ("pydantic-ai, keep the last {n} messages", "pydantic_ai", pydantic_window, BOTH),
]
"""The peers: label (``{n}``: the window's size), module, window, the conversations."""


def match(window: Window, bare: Meter, target: float) -> tuple[int, Meter] | None:
    """The window size whose mean request comes closest to ``target``, among those that never
    send a tool result without its call, over the no-policy side's requests."""
    best: tuple[float, int, Meter] | None = None
    kept = bare.kept or []
    for n in range(1, 3 * len(kept[-1][0]) + 2):
        meter = Meter(bare.tools)
        for messages, at in kept:
            sent = window(messages[1:], n)
            if sent is None:
                break
            meter.record([messages[0], *sent], at)
        else:
            if best is None or abs(meter.mean - target) < best[0]:
                best = (abs(meter.mean - target), n, meter)
            if meter.mean > target:
                break  # larger windows only send more
    return None if best is None else best[1:]


async def measure(name: str, trace: list[Turn]) -> tuple[dict[str, Meter], int]:
    """Every side over one conversation, then the peers: each side's requests, and the floor."""
    meters: dict[str, Meter] = {}
    for label, wrap, traces in SIDES:
        if name in traces:
            began = time.perf_counter()
            meters[label] = await converse(trace, wrap, keep=label == "no policy")
            print(f"{name}: {label}: {time.perf_counter() - began:.1f} s", file=sys.stderr)
    bare = meters["no policy"]
    for label, module, window, traces in PEERS:
        if name in traces and importlib.util.find_spec(module) is not None:
            began = time.perf_counter()
            found = match(window, bare, meters[BUDGET_SIDE].mean)
            if found is not None:
                meters[label.format(n=found[0])] = found[1]
            took = time.perf_counter() - began
            print(f"{name}: {label.format(n='N')}: {took:.1f} s", file=sys.stderr)
    return meters, bare.floor()


def table(name: str, turns: int, meters: dict[str, Meter], floor: int) -> None:
    print(f"\n### {name}: {turns} turns\n")
    columns = ["side", "requests", "mean request", "tokens sent", "from cache"]
    columns += [f"{p} {c}" for p in PRICES for c in ("billed (input tokens)", "x floor", "$")]
    print("| " + " | ".join(columns) + " |\n|---|" + "---:|" * (len(columns) - 1))
    cells = ["-", "-", f"{floor:,}", "-"]
    for prices in PRICES.values():
        cells += [f"{floor:,}", "1.00", f"{floor * prices.input / 1e6:.3f}"]
    print("| floor: every message once | " + " | ".join(cells) + " |")
    for label, meter in meters.items():
        (cached, dollars), sent = meter.bill(), meter.sent
        cells = [f"{meter.requests:,}", f"{meter.mean:,.0f}", f"{sent:,}"]
        cells.append(f"{100 * cached / sent:.1f} %")
        for price_list, prices in PRICES.items():
            billed = dollars[price_list] / prices.input * 1e6
            cells += [f"{billed:,.0f}", f"{billed / floor:.2f}", f"{dollars[price_list]:.3f}"]
        print(f"| {label} | " + " | ".join(cells) + " |")


NOTES = (
    f"Tokens: {COUNTER!r}. The peers are not run: their requests are computed from the "
    "no-policy run's by their rules (checked against real runs): openai-agents reads the last "
    "N stored items (a tool call is one, a result another) once per run and adds the run's, "
    "ToolOutputTrimmer() (its code) runs on each request; pydantic-ai's history processor "
    "keeps the last N messages (a turn's tool results are one) of each request. N: the window "
    f"whose mean request is closest to {BUDGET_SIDE}'s, never sending a result without its call."
)


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="60 turns instead of 300")
    parser.add_argument("--turns", type=int, help="turns per conversation (overrides --quick)")
    args = parser.parse_args()
    turns = args.turns or (60 if args.quick else 300)
    prices = ", ".join(f"{n} {p.model} (${p.input}/M input)" for n, p in PRICES.items())
    print(f"# What history policies are billed: {turns} turns, {prices}\n\n{NOTES}")
    if not any("clear_tool_results" in side[0] for side in SIDES):
        print("\nClearToolResults is not in this aniki: its side is left out.")
    for module in sorted({peer[1] for peer in PEERS if importlib.util.find_spec(peer[1]) is None}):
        print(f"\n{module} is not installed: its sides are left out.")
    heavy, floor = await measure(TOOL_HEAVY, trace(turns, tools=True))
    table(TOOL_HEAVY, turns, heavy, floor)
    chat, chat_floor = await measure(PAUSES, trace(turns, tools=False))
    table(PAUSES, turns, chat, chat_floor)
    paused, paused_floor = await measure(HEAVY_PAUSES, with_pauses(trace(turns, tools=True)))
    table(HEAVY_PAUSES, turns, paused, paused_floor)
    x_floor, ttl = heavy[BUDGET_SIDE].bill()[1], chat[TTL_SIDE].bill()[1]
    over = ", ".join(f"{x_floor[n] / p.input * 1e6 / floor:.2f}x ({n})" for n, p in PRICES.items())
    ratio = ", ".join(f"{ttl[n] / chat[BUDGET_SIDE].bill()[1][n]:.2f} ({n})" for n in PRICES)
    print(f"\nTargeted figures: tool-heavy, {BUDGET_SIDE} billed {over} the floor; pauses,")
    print(f"{TTL_SIDE} billed {ratio} times {BUDGET_SIDE}'s.")
    for side in (TTL_SIDE, CLEAR_TTL_SIDE):
        if side in paused:
            mine, today = paused[side].bill()[1], paused[BUDGET_SIDE].bill()[1]
            ratio = ", ".join(f"{mine[n] / today[n]:.2f} ({n})" for n in PRICES)
            print(f"{HEAVY_PAUSES}: {side} billed {ratio} times {BUDGET_SIDE}'s.")
    for name, meters in ((TOOL_HEAVY, heavy), (PAUSES, chat)):
        parts = []
        for side in (SUMMARY_AGENT, SUMMARY_SELF):
            total, own = meters[side].bill()[1], meters[side].bill(summaries=True)[1]
            shares = ", ".join(f"{own[n] / total[n]:.2f} ({n})" for n in PRICES)
            parts.append(f"{side}: the summaries' share {shares}")
        mine, agent = meters[SUMMARY_SELF].bill()[1], meters[SUMMARY_AGENT].bill()[1]
        ratio = ", ".join(f"{mine[n] / agent[n]:.2f} ({n})" for n in PRICES)
        print(f"{name}: " + "; ".join(parts) + f"; None billed {ratio} times the agent's.")
    for side in (SUMMARY_AGENT, SUMMARY_SELF):
        for label in CLEARINGS:
            if cleared(side, label) in heavy:
                print(f"{TOOL_HEAVY}: {cleared(side, label)}: {_against(heavy, side, label)}.")


def _against(meters: dict[str, Meter], side: str, label: str) -> str:
    """What clearing old tool results does to a summarizing side's bill: its total against
    the side's without clearing, and the summaries' share of it."""
    clearing, today = meters[cleared(side, label)], meters[side].bill()[1]
    total, own = clearing.bill()[1], clearing.bill(summaries=True)[1]
    ratio = ", ".join(f"{total[n] / today[n]:.2f} ({n})" for n in PRICES)
    share = ", ".join(f"{own[n] / total[n]:.2f} ({n})" for n in PRICES)
    return f"billed {ratio} times {side}'s; the summaries' share {share}"


if __name__ == "__main__":
    asyncio.run(main())
