"""Workload 7: what a long conversation's requests cost where the serving stack caches prefixes.

Serving stacks keep the longest prefix a request shares with the previous one (OpenAI and
Gemini by themselves, Anthropic at ``cache_control`` breakpoints, vLLM and llama.cpp in their
KV cache) and bill a cached token at about a tenth. So a request is priced here as

    billed equivalent = uncached tokens + 0.1 x cached tokens,

where the cached tokens are those of the longest run of leading messages (system prompt
included) equal, role, content and tool calls, to the previous request of the same
conversation. Tokens are counted with aniki's ``EstimatingCounter`` for every side.

Every side holds the same scripted conversation of ``economy_turns`` turns: the user's
message and the reply are the other workloads' texts, tagged with the turn and cut to a
length drawn per turn (120 to 280 characters, seeded), so no two messages are equal (equal
messages would let a sliding window look cached) and token budgets fall between messages as
in a real conversation. Sides: aniki bare and behind ``WindowedSession``, ``TokenBudgetSession``
(each with its default ``trim_to`` and with ``trim_to`` at the limit, the one-step slide) and
``SummarizingSession`` (its summarizer's calls priced too, as one more stream of requests);
openai-agents with ``SessionSettings(limit=N)`` and pydantic-ai with a keep-the-last-messages
history processor, each ``N`` chosen so that the peer's mean request matches the token
budget's. The counts are deterministic, so each side runs once.
"""

from __future__ import annotations

import inspect
import math
import random
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from peers import INSTRUCTIONS, REPLY, USER_MESSAGE, Unsupported

from workloads._common import Context, Section, Target, aniki_at_most, ratio_at_most

NUMBER = 7
TITLE = "billed context under prefix caching"
CACHED_PRICE = 0.1
"""What a token served from the prefix cache costs, relative to one that is not."""
SEED = 7
SUMMARY = ("Summary of the conversation so far: the user keeps asking about the fox. " * 6)[:400]
"""Every summary the scripted summarizer writes: 400 characters."""

Key = tuple[str, str, tuple[Any, ...], str | None]
"""What makes two messages the same to a prefix cache."""


@dataclass(frozen=True)
class Limits:
    window: int
    budget: int
    summarizing: int


def _limits(turns: int) -> Limits:
    """The stated limits for a real run; smaller ones for short runs, so that they still trim."""
    if turns >= 100:
        return Limits(window=40, budget=4_000, summarizing=4_000)
    return Limits(window=10, budget=800, summarizing=800)


@dataclass
class Ledger:
    """One stream of requests, priced: tokens sent, and how many of them were cached."""

    counter: Any
    requests: int = 0
    sent: int = 0
    cached: int = 0
    _previous: list[Key] = field(default_factory=list)

    def record(self, messages: Sequence[Any]) -> None:
        """Price one request against the one before it."""
        keys = [(m.role, m.content, m.tool_calls, m.tool_call_id) for m in messages]
        sizes = [self.counter.count_message(m) for m in messages]
        shared = 0
        for mine, theirs in zip(keys, self._previous, strict=False):
            if mine != theirs:
                break
            shared += 1
        self.requests += 1
        self.sent += sum(sizes)
        self.cached += sum(sizes[:shared])
        self._previous = keys

    @property
    def billed(self) -> float:
        return self.sent - self.cached + CACHED_PRICE * self.cached


@dataclass(frozen=True)
class Script:
    """The conversation every side holds: one user message and one reply per turn."""

    users: tuple[str, ...]
    replies: tuple[str, ...]

    @classmethod
    def make(cls, turns: int, seed: int = SEED) -> Script:
        rng = random.Random(seed)

        def text(tag: str, base: str) -> str:
            return (tag + (base + " ") * 2)[: rng.randint(120, 280)]

        pairs = [
            (text(f"Turn {t}. ", USER_MESSAGE), text(f"Answer {t}. ", REPLY)) for t in range(turns)
        ]
        return cls(tuple(u for u, _ in pairs), tuple(r for _, r in pairs))

    def messages(self) -> list[Any]:
        """The whole conversation as aniki messages, in order."""
        from aniki import Message

        return [
            message
            for user, reply in zip(self.users, self.replies, strict=True)
            for message in (
                Message(role="user", content=user),
                Message(role="assistant", content=reply),
            )
        ]


class Recorder:
    """The scripted model of one side: prices every request, checks it, answers from the script.

    Every request must be the system prompt, perhaps a summary (a second system message), then
    an unbroken run of the latest messages: a request of any other shape would mean that the
    harness misread what a framework sent, and would price it wrongly.
    """

    def __init__(self, side: str, script: Script, counter: Any) -> None:
        from aniki import Message

        self.side = side
        self.ledger = Ledger(counter)
        self.replies = script.replies
        self.turn_of = {text: turn for turn, text in enumerate(script.users)}
        self.expected = [Message(role="system", content=INSTRUCTIONS), *script.messages()]

    def answer(self, messages: Sequence[Any]) -> str:
        self.ledger.record(messages)
        last = messages[-1]
        turn = self.turn_of.get(last.content) if last.role == "user" else None
        if turn is None:
            raise AssertionError(f"{self.side}: the request does not end with a scripted turn")
        end = 2 * turn + 2  # the system prompt, then the messages up to this turn's
        history = messages[2:] if messages[1].role == "system" else messages[1:]
        if (
            messages[0] != self.expected[0]
            or list(history) != self.expected[end - len(history) : end]
        ):
            raise AssertionError(
                f"{self.side} sent turn {turn + 1} a request that is not the system prompt "
                "and the latest messages: the comparison would be unfair"
            )
        return self.replies[turn]

    def answer_pairs(self, pairs: list[tuple[str, str]]) -> str:
        """:meth:`answer` for a peer, whose request arrives as ``(role, content)`` pairs."""
        from aniki import Message

        return self.answer([Message.from_dict({"role": r, "content": c}) for r, c in pairs])


class _Provider:
    """An aniki provider answering through ``answer``."""

    def __init__(self, answer: Callable[[Sequence[Any]], str]) -> None:
        self.answer = answer

    async def complete(self, request: Any) -> Any:
        from aniki import ModelResponse

        return ModelResponse(content=self.answer(request.messages), finish_reason="stop")

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        yield await self.complete(request)


@dataclass
class Outcome:
    """What one side's conversation cost."""

    model: Ledger
    summarizer: Ledger | None = None

    @property
    def ledgers(self) -> list[Ledger]:
        return [self.model] if self.summarizer is None else [self.model, self.summarizer]

    @property
    def sent(self) -> int:
        return sum(ledger.sent for ledger in self.ledgers)

    @property
    def cached(self) -> int:
        return sum(ledger.cached for ledger in self.ledgers)

    @property
    def billed(self) -> float:
        return sum(ledger.billed for ledger in self.ledgers)

    @property
    def mean_request(self) -> float:
        return self.model.sent / self.model.requests


Wrap = Callable[[Any, Any], Any]
"""(store, summarizer agent) -> the session the runner uses."""


def _sides(limits: Limits, counter: Any) -> dict[str, Wrap | str]:
    """aniki's sides, by label; a side this aniki cannot run says why instead."""
    from aniki.sessions import SummarizingSession, TokenBudgetSession, WindowedSession

    window, budget, summarizing = limits.window, limits.budget, limits.summarizing
    stepped = all(
        "trim_to" in inspect.signature(cls).parameters
        for cls in (WindowedSession, TokenBudgetSession)
    )
    slide = "the policies of this aniki take no trim_to= yet"

    def windowed(inner: Any, _: Any) -> Any:
        return WindowedSession(inner, window, trim_to=window)

    def budgeted(inner: Any, _: Any) -> Any:
        return TokenBudgetSession(inner, budget, trim_to=budget, counter=counter)

    return {
        "no policy": lambda inner, _: inner,
        f"WindowedSession({window})": lambda inner, _: WindowedSession(inner, window),
        f"WindowedSession({window}, trim_to={window})": windowed if stepped else slide,
        f"TokenBudgetSession({budget:,})": lambda inner, _: TokenBudgetSession(
            inner, budget, counter=counter
        ),
        f"TokenBudgetSession({budget:,}, trim_to={budget:,})": budgeted if stepped else slide,
        f"SummarizingSession({summarizing:,})": lambda inner, summarizer: SummarizingSession(
            inner, summarizer, summarizing, counter=counter
        ),
    }


async def _converse_aniki(side: str, wrap: Wrap, script: Script, counter: Any) -> Outcome:
    from aniki import Agent, InMemorySession, Runner

    model = Recorder(side, script, counter)
    summaries = Ledger(counter)

    def summarize(messages: Sequence[Any]) -> str:
        summaries.record(messages)
        return SUMMARY

    agent = Agent("bench", INSTRUCTIONS, model="scripted", provider=_Provider(model.answer))
    summarizer = Agent("summarizer", model="scripted", provider=_Provider(summarize))
    session = wrap(InMemorySession(), summarizer)
    runner = Runner()
    for turn, text in enumerate(script.users):
        result = await runner.run(agent, message=text, session=session)
        if result.content != script.replies[turn]:
            raise AssertionError(f"{side}: aniki did not return the scripted reply")
    return Outcome(model.ledger, summaries if summaries.requests else None)


def matching_history(script: Script, counter: Any, mean: float) -> int:
    """How many earlier messages a keep-the-last-messages window needs for its mean request
    to come closest to ``mean`` tokens. Whole exchanges only, so that every request's history
    starts at a user message, as the policies' windows do."""
    from aniki import Message

    system: int = counter.count_message(Message(role="system", content=INSTRUCTIONS))
    sums: list[int] = [0, *accumulate(counter.count_message(m) for m in script.messages())]
    turns = len(script.users)

    def mean_request(history: int) -> float:
        # Turn t sends its own message (index 2t) and up to `history` before it.
        total = sum(sums[2 * t + 1] - sums[max(0, 2 * t - history)] for t in range(turns))
        return system + total / turns

    return min(range(0, 2 * turns, 2), key=lambda history: abs(mean_request(history) - mean))


async def _converse_peer(peer: Any, history: int, script: Script, counter: Any) -> Outcome:
    model = Recorder(peer.name, script, counter)
    chat = peer.trimmed_chat(history, model.answer_pairs)
    for text in script.users:
        await chat.turn(text)
    return Outcome(model.ledger)


def _record(section: Section, side: str, column: str, outcome: Outcome, bare: Outcome) -> None:
    """The side's rows: tokens sent, share from the cache, billed equivalent, against bare."""
    section.row(f"{side}: tokens sent", "tokens").values[column] = outcome.sent
    section.row(f"{side}: served from cache", "%").values[column] = (
        100 * outcome.cached / outcome.sent
    )
    section.row(f"{side}: billed equivalent", "tokens").values[column] = outcome.billed
    if outcome is not bare:
        section.row(f"{side}: billed / no policy's", "x").values[column] = (
            outcome.billed / bare.billed
        )


def _set_targets(section: Section, peers: str, ratio_to_slide: str) -> None:
    """The token budget's targets, on its rows (``peers``: their label, shared with the peers)."""
    targets = {
        f"{peers}: served from cache": Target("≥ 85 %", None, at_least=85.0),
        f"{peers}: billed equivalent": ratio_at_most(
            "openai-agents", 0.25, "≤ 1/4 of openai-agents'"
        ),
        f"{peers}: billed / no policy's": Target("< 1", None, at_most=math.nextafter(1.0, 0)),
        ratio_to_slide: aniki_at_most(0.25, "≤ 1/4"),
    }
    for row in section.rows:
        row.target = targets.get(row.measure, row.target)


async def run(ctx: Context) -> Section:
    from aniki.tokens import EstimatingCounter

    turns = ctx.scale.economy_turns
    limits = _limits(turns)
    section = Section(NUMBER, f"{TITLE}: {turns} turns, a cached token at {CACHED_PRICE:g}")
    script = Script.make(turns)
    counter = EstimatingCounter()
    outcomes: dict[str, Outcome] = {}
    for side, wrap in _sides(limits, counter).items():
        if isinstance(wrap, str):
            section.skip("aniki", Unsupported(wrap), side)
            continue
        began = time.perf_counter()
        outcomes[side] = await _converse_aniki(side, wrap, script, counter)
        ctx.log(f"  7: {side}: {time.perf_counter() - began:.2f} s")

    bare = outcomes["no policy"]
    budget = f"TokenBudgetSession({limits.budget:,})"
    slide = f"TokenBudgetSession({limits.budget:,}, trim_to={limits.budget:,})"
    peers = f"{budget} vs peers' last-N windows"
    ratio_to_slide = f"{budget}: billed / {slide}'s"
    for side, outcome in outcomes.items():
        if side != budget:
            _record(section, side, "aniki", outcome, bare)
            continue
        _record(section, peers, "aniki", outcome, bare)
        section.row(f"{peers}: mean request", "tokens").values["aniki"] = outcome.mean_request
        if slide in outcomes:
            section.row(ratio_to_slide, "x").values["aniki"] = (
                outcome.billed / outcomes[slide].billed
            )
    history = matching_history(script, counter, outcomes[budget].mean_request)
    for peer in ctx.peers[1:]:
        await _measure_peer(ctx, section, peer, history, script, counter, peers, bare)
    _set_targets(section, peers, ratio_to_slide)
    section.notes += _notes(outcomes, f"SummarizingSession({limits.summarizing:,})")
    return section


async def _measure_peer(
    ctx: Context,
    section: Section,
    peer: Any,
    history: int,
    script: Script,
    counter: Any,
    label: str,
    bare: Outcome,
) -> None:
    if not hasattr(peer, "trimmed_chat"):
        section.skip(peer.name, Unsupported("no way to keep only the last messages"))
        return
    began = time.perf_counter()
    outcome = await _converse_peer(peer, history, script, counter)
    ctx.log(f"  7: {peer.name}, {history} earlier messages: {time.perf_counter() - began:.2f} s")
    _record(section, label, peer.name, outcome, bare)
    section.row(f"{label}: mean request", "tokens").values[peer.name] = outcome.mean_request
    how = {
        "openai-agents": f"RunConfig(session_settings=SessionSettings(limit={history}))",
        "pydantic-ai": f"a history processor keeping the last {history + 1} messages",
    }.get(peer.name, f"the last {history} messages before the new one")
    section.notes.append(
        f"{peer.name}: {how}, so each request holds the system prompt, at most {history} earlier "
        "messages and the new one, the window whose mean request comes closest to the token "
        "budget's"
    )


def _notes(outcomes: dict[str, Outcome], summarizing: str) -> list[str]:
    notes = [
        f"billed equivalent = uncached tokens + {CACHED_PRICE:g} x cached tokens; cached = the "
        "leading messages a request shares with the previous request of its conversation"
    ]
    summarized = outcomes.get(summarizing)
    if summarized is not None and summarized.summarizer is not None:
        calls = summarized.summarizer
        notes.append(
            f"{summarizing}: {calls.requests} summarizer calls, {calls.sent:,} tokens sent to "
            f"them, {calls.billed:,.0f} billed (included in its rows)"
        )
    return notes
