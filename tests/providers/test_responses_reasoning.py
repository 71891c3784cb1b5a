"""Reasoning through the Responses API: read from replies (whole and streamed), kept on the
assistant message, sent back verbatim on later requests (stateless: ``store=false``), never
mixed with another provider's, and kept across runs by a real SQLiteSession."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from aniki import (
    Agent,
    Message,
    ModelRequest,
    ModelResponse,
    Reasoning,
    ReasoningDelta,
    RunCompleted,
    Runner,
    RunResult,
    TextDelta,
    ToolCall,
    tool,
)
from aniki.providers.anthropic import AnthropicProvider
from aniki.providers.openai_responses import OpenAIResponsesProvider
from aniki.sessions import SQLiteSession

from . import anthropic_shapes as anth
from . import responses_shapes as rsp
from .fake_server import FakeServer, Respond, Stream
from .vendors import API_KEY

R = "openai-responses"
ASK = Message("user", "Weather in Oslo?")
CALL_ARGS = '{"city": "Oslo"}'
THOUGHT = rsp.reasoning_item(
    "rs_6820f383d7c08191846711c5df8233bc",
    ["**Checking the weather**\n\nThe user wants Oslo.", "I should call get_weather."],
    "gAAAAABoIPOFmW3Ek4Yk-encrypted-1",
)


def responses(server: FakeServer) -> OpenAIResponsesProvider:
    return OpenAIResponsesProvider(api_key=API_KEY, base_url=server.url + "/v1", max_retries=0)


def parts_of(item: dict[str, Any]) -> tuple[Reasoning, ...]:
    """What aniki keeps of a reasoning item: one part per summary part, the first holding
    the encrypted content, all holding the item's id."""
    texts = [part["text"] for part in item["summary"]] or [""]
    return tuple(
        Reasoning(
            text,
            signature=item["id"],
            redacted=item.get("encrypted_content") if n == 0 else None,
            provider=R,
        )
        for n, text in enumerate(texts)
    )


async def test_a_reasoning_item_is_kept_and_sent_back_verbatim(server: FakeServer) -> None:
    server.enqueue(
        Respond(200, rsp.response([THOUGHT, rsp.call_item("call_1", "get_weather", CALL_ARGS)]))
    )
    server.enqueue(Respond(200, rsp.response([rsp.message_item("18C.")])))
    p = responses(server)
    first = await p.complete(ModelRequest(model="o4-mini", messages=(ASK,)))
    assert first.reasoning == parts_of(THOUGHT)
    assert first.tool_calls == (ToolCall("call_1", "get_weather", CALL_ARGS),)

    answer = Message("tool", "18C", tool_call_id="call_1")
    history = (ASK, first.to_message(), answer)
    await p.complete(ModelRequest(model="o4-mini", messages=history))
    body = server.requests[1].json()
    assert body["input"] == [
        {"role": "user", "content": "Weather in Oslo?"},
        THOUGHT,  # id, summary and encrypted_content exactly as they came
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": CALL_ARGS,
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
    ]
    assert (body["store"], body["include"]) == (False, ["reasoning.encrypted_content"])


async def test_streamed_reasoning_comes_first_and_is_kept_whole(server: FakeServer) -> None:
    events = rsp.stream(
        rsp.reasoning_events(
            0,
            THOUGHT["id"],
            [
                ["**Checking the weather**\n\n", "The user wants Oslo."],
                ["I should call ", "get_weather."],
            ],
            THOUGHT["encrypted_content"],
        ),
        rsp.text_events(1, ["It is ", "18C."]),
    )
    server.enqueue(Stream(events, chunk_size=23))
    request = ModelRequest(model="o4-mini", messages=(ASK,))
    items = [item async for item in responses(server).stream(request)]
    shown = [
        (type(i).__name__, i.text) for i in items if isinstance(i, (TextDelta, ReasoningDelta))
    ]
    assert shown == [
        ("ReasoningDelta", "**Checking the weather**\n\n"),
        ("ReasoningDelta", "The user wants Oslo."),
        ("ReasoningDelta", "\n\nI should call "),  # a new summary part, set apart
        ("ReasoningDelta", "get_weather."),
        ("TextDelta", "It is "),
        ("TextDelta", "18C."),
    ]
    final = items[-1]
    assert isinstance(final, ModelResponse)
    assert (final.content, final.reasoning) == ("It is 18C.", parts_of(THOUGHT))


async def test_reasoning_without_a_summary_or_encrypted_content(server: FakeServer) -> None:
    bare = rsp.reasoning_item("rs_bare", [], "gAAAA-no-summary")
    unencrypted = rsp.reasoning_item("rs_plain", ["Thinking."], None)
    server.enqueue(Respond(200, rsp.response([bare, unencrypted, rsp.message_item("Hi.")])))
    server.enqueue(Respond(200, rsp.response()))
    p = responses(server)
    reply = await p.complete(ModelRequest(model="m", messages=(ASK,)))
    assert reply.reasoning == (
        *parts_of(bare),
        Reasoning("Thinking.", signature="rs_plain", provider=R),
    )
    await p.complete(ModelRequest(model="m", messages=(ASK, reply.to_message(), ASK)))
    # With store=false an id alone names nothing the server kept: only encrypted items go back.
    assert server.requests[1].json()["input"][1:3] == [
        bare,
        {"role": "assistant", "content": "Hi."},
    ]


def mixed_history() -> tuple[Message, ...]:
    """One conversation through three providers, each leaving its own reasoning."""
    return (
        Message("user", "Plan a trip."),
        Message(
            "assistant",
            "Claude: Norway.",
            reasoning=(
                Reasoning("Fjords.", signature="sig-anthropic", provider="anthropic"),
                Reasoning(redacted="enc-anthropic", provider="anthropic"),
            ),
        ),
        Message("user", "And then?"),
        Message(
            "assistant",
            "Old store: Sweden.",
            reasoning=(Reasoning("Lakes.", signature="sig-old"), Reasoning("unsigned, old")),
        ),
        Message("user", "Then?"),
        Message(
            "assistant", "Local: Finland.", reasoning=(Reasoning("Saunas.", provider="openai"),)
        ),
        Message("user", "Finally?"),
        Message("assistant", "GPT: Iceland.", reasoning=parts_of(THOUGHT)),
        Message("user", "Thanks."),
    )


async def test_each_provider_sends_back_only_its_own_reasoning(server: FakeServer) -> None:
    server.enqueue(Respond(200, rsp.response()), Respond(200, anth.message()))
    request = ModelRequest(model="m", messages=mixed_history(), settings={"prompt_cache": False})
    await responses(server).complete(request)
    anthropic = AnthropicProvider(api_key=API_KEY, base_url=server.url, max_retries=0)
    await anthropic.complete(request)

    to_responses = server.requests[0].json()["input"]
    assert [item for item in to_responses if item.get("type") == "reasoning"] == [THOUGHT]
    assert to_responses[7:9] == [THOUGHT, {"role": "assistant", "content": "GPT: Iceland."}]

    to_anthropic = server.requests[1].json()["messages"]
    thinking = [
        block
        for turn in to_anthropic
        for block in turn["content"]
        if block["type"] in ("thinking", "redacted_thinking")
    ]
    assert thinking == [
        {"type": "thinking", "thinking": "Fjords.", "signature": "sig-anthropic"},
        {"type": "redacted_thinking", "data": "enc-anthropic"},
        # stored before reasoning named its provider: the old rule (signed goes back)
        {"type": "thinking", "thinking": "Lakes.", "signature": "sig-old"},
    ]
    assert to_anthropic[-2]["content"] == [{"type": "text", "text": "GPT: Iceland."}]


# --- a whole agent turn, stored by SQLite -------------------------------------------------


@tool
def get_weather(city: str) -> str:
    """Look up the current weather.

    Args:
        city: The city to look up.
    """
    return f"Sunny, 18C in {city}"


MODES = ["run", "run_sync", "stream"]


async def drive(
    mode: str, agent: Agent, message: str, session: SQLiteSession
) -> tuple[RunResult, list[str]]:
    """Run one turn; also return the kinds of the deltas a stream sent, in order."""
    runner = Runner()
    if mode == "run":
        return await runner.run(agent, message=message, session=session), []
    if mode == "run_sync":
        run = runner.run_sync
        return await asyncio.to_thread(run, agent, message=message, session=session), []
    events = [event async for event in runner.stream(agent, message=message, session=session)]
    assert isinstance(events[-1], RunCompleted)
    kinds = [type(e).__name__ for e in events if isinstance(e, (ReasoningDelta, TextDelta))]
    return events[-1].result, kinds


def script(server: FakeServer, mode: str, *items: rsp.Built) -> None:
    if mode == "stream":
        server.enqueue(Stream(rsp.stream(*items), chunk_size=31))
    else:
        server.enqueue(Respond(200, rsp.response([item for _, item in items])))


@pytest.mark.parametrize("mode", MODES)
async def test_an_agent_turn_keeps_reasoning_in_sqlite_and_sends_it_back(
    server: FakeServer, tmp_path: Path, mode: str
) -> None:
    second_thought = rsp.reasoning_item("rs_second", ["Report it."], "gAAAA-encrypted-2")
    script(
        server,
        mode,
        rsp.reasoning_events(0, THOUGHT["id"], [[t] for t in ["A", "B"]], "gAAAA-encrypted-1"),
        rsp.call_events(1, "call_w1", "get_weather", ['{"city": ', '"Oslo"}']),
    )
    script(
        server,
        mode,
        rsp.reasoning_events(0, "rs_second", [["Report it."]], "gAAAA-encrypted-2"),
        rsp.text_events(1, ["Sunny, ", "18C."]),
    )
    script(server, mode, rsp.text_events(0, ["You're welcome."]))
    agent = Agent(
        "Forecaster",
        "Answer with the weather.",
        model="o4-mini",
        provider=responses(server),
        tools=[get_weather],
    )
    path = tmp_path / "chats.db"
    result, kinds = await drive(mode, agent, "Weather in Oslo?", SQLiteSession("trip", path))
    assert result.content == "Sunny, 18C."
    if mode == "stream":  # each turn's thinking streams before its text
        assert kinds == ["ReasoningDelta"] * 3 + ["TextDelta"] * 2

    first_thought = rsp.reasoning_item(THOUGHT["id"], ["A", "B"], "gAAAA-encrypted-1")
    within_run = server.requests[1].json()["input"]
    assert within_run[2:] == [
        first_thought,
        {
            "type": "function_call",
            "call_id": "call_w1",
            "name": "get_weather",
            "arguments": CALL_ARGS,
        },
        {"type": "function_call_output", "call_id": "call_w1", "output": "Sunny, 18C in Oslo"},
    ]

    stored = SQLiteSession("trip", path).get_messages()  # a new object, from the file
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[1].reasoning == parts_of(first_thought)
    assert stored[3].reasoning == parts_of(second_thought)

    await drive(mode, agent, "Thanks!", SQLiteSession("trip", path))
    later = server.requests[2].json()
    assert later["input"][0] == {"role": "developer", "content": "Answer with the weather."}
    assert later["input"][2:] == [
        *within_run[2:],
        second_thought,
        {"role": "assistant", "content": "Sunny, 18C."},
        {"role": "user", "content": "Thanks!"},
    ]
    assert (later["store"], later["include"]) == (False, ["reasoning.encrypted_content"])
    assert json.loads(later["input"][3]["arguments"]) == {"city": "Oslo"}
