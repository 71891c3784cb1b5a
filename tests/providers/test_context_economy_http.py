"""The context-economy policies on the wire, for every wire format: old tool results reach the
vendor's server as placeholders, moved in steps that keep the request's prefix between them,
and a summary asked in place is the previous request plus one question, so a prompt cache
serves all but that question (with Anthropic's breakpoints placed for it)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from aniki import Agent, Runner, tool
from aniki.sessions import InMemorySession, SummarizingSession, TokenBudgetSession
from aniki.sessions.policies import ClearToolResults

from .fake_server import FakeServer, RecordedRequest, Respond
from .vendors import ALL_VENDORS, Vendor

ASK = "This message is from the application"
"""How a summary asked of the run's own model begins (see aniki's _summarizer)."""


@pytest.fixture(params=ALL_VENDORS, ids=lambda vendor: vendor.name)
def wire(request: pytest.FixtureRequest) -> Vendor:
    chosen: Vendor = request.param
    return chosen


def log_of(part: int) -> str:
    return "\n".join(f"part {part} line {n}: GET /orders/{n * 7} 200 {n + 3}ms" for n in range(60))


@tool
def read_log(part: int) -> str:
    """Read one part of the service log.

    Args:
        part: Which part.
    """
    return log_of(part)


def items(vendor: Vendor, request: RecordedRequest) -> list[Any]:
    """The conversation a request carries (its messages, or a Responses ``input``), with the
    cache marks taken out: they move to the newest message, and the cache matches content."""
    body = request.json()
    found = body["input"] if vendor.name == "openai-responses" else body["messages"]
    return [_unmarked(item) for item in found]


def _unmarked(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _unmarked(v) for k, v in node.items() if k != "cache_control"}
    if isinstance(node, list):
        return [_unmarked(value) for value in node]
    return node


def _text(vendor: Vendor, request: RecordedRequest) -> str:
    return json.dumps(items(vendor, request))


async def test_old_results_reach_the_server_cleared_in_steps(
    server: FakeServer, wire: Vendor
) -> None:
    session = TokenBudgetSession(
        InMemorySession("ops"), 100_000, clear_tool_results=ClearToolResults(every=2)
    )
    provider = wire.provider(server.url)
    agent = Agent("Ops", "Read logs.", model="test-model", provider=provider, tools=[read_log])
    turns = 6
    for turn in range(1, turns + 1):
        call = (f"call_{turn}", "read_log", {"part": turn})
        server.enqueue(Respond(200, wire.tool_reply([call])), wire.ok(f"Part {turn} is fine."))
        result = await Runner().run(agent, message=f"Check part {turn}.", session=session)
        assert result.content == f"Part {turn} is fine."
    requests = server.requests
    assert len(requests) == 2 * turns
    for turn in range(1, turns + 1):
        # The request that brings turn `turn`'s result back, and every result it holds.
        sent = _text(wire, requests[2 * turn - 1])
        whole = {part for part in range(1, turn + 1) if f"part {part} line 59" in sent}
        line = (turn - 1) // 2 * 2  # the turns before the one kept, in steps of 2
        assert whole == set(range(line + 1, turn + 1)), (turn, whole)
        assert sent.count("was cleared from the context to save space") == line
        assert "Call read_log again if you need it" in sent or line == 0
    # Between clearing steps each request starts with the one before (a cache serves it);
    # a step changes an old result, so the request after it does not.
    kept = [
        items(wire, earlier) == items(wire, later)[: len(items(wire, earlier))]
        for earlier, later in itertools.pairwise(requests)
    ]
    steps = [index for index, held in enumerate(kept) if not held]
    assert steps == [4 - 1, 8 - 1], kept  # the first requests of turns 3 and 5
    # The store keeps every result whole.
    stored = [m.content for m in session.inner.get_messages() if m.role == "tool"]
    assert stored == [log_of(part) for part in range(1, turns + 1)]


async def test_a_summary_asked_in_place_is_the_last_request_plus_a_question(
    server: FakeServer, wire: Vendor
) -> None:
    def reply(request: RecordedRequest) -> Any:
        if ASK in json.dumps(request.json()):
            return Respond(200, wire.text_reply("The user checked parts of the log."))
        return Respond(200, wire.text_reply("Noted: " + "word " * 60))

    server.handler = reply
    session = SummarizingSession(InMemorySession("chat"), None, 700)
    agent = Agent("Ops", "Answer briefly.", model="test-model", provider=wire.provider(server.url))
    for n in range(12):
        result = await Runner().run(agent, message=f"Tell me about part {n}.", session=session)
        if any(ASK in _text(wire, r) for r in server.requests):
            break
    else:
        raise AssertionError("the history never outgrew the budget")
    at = next(i for i, r in enumerate(server.requests) if ASK in _text(wire, r))
    summary, previous = server.requests[at], server.requests[at - 1]
    before, asked = items(wire, previous), items(wire, summary)
    assert asked[: len(before)] == before  # everything the last request sent: served cached
    assert ASK in json.dumps(asked[len(before) :]) and ASK not in json.dumps(before)
    body, last = summary.json(), previous.json()
    for key in ("model", "tools", "system", "instructions"):  # the rest of the prefix
        assert _unmarked(body.get(key)) == _unmarked(last.get(key)), key
    if wire.name == "anthropic":  # a breakpoint at the question: the cached prefix is read
        assert "cache_control" in json.dumps(body["messages"][-1])
    # The summary's call is the run's: one answer and one summary.
    assert result.usage.requests == 2
    server.handler = None
    server.enqueue(wire.ok("Fine."))
    after = await Runner().run(agent, message="And the next part?", session=session)
    assert "The user checked parts of the log." in json.dumps(server.requests[-1].json())
    assert after.context_reports[0].summarized_messages > 0
