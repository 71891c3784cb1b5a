"""Agents with tools and structured output, run end to end against both wire formats.

Each test drives ``Runner.run``, ``Runner.run_sync`` (its own event loop, in a thread) and
``Runner.stream`` against the fake server, and checks the conversation on both sides: what
the server was sent, and what the session holds.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pydantic
import pytest

from aniki import (
    Agent,
    InMemorySession,
    Message,
    RateLimitError,
    RunCompleted,
    Runner,
    RunResult,
    StreamInterruptedError,
    TextDelta,
    ToolCall,
    ToolCallCompleted,
    tool,
)

from .fake_server import FakeServer, Respond, Stream
from .vendors import API_KEY, Vendor

MODES = ["run", "run_sync", "stream"]
CALL = ("call_w1", "get_weather", {"city": "Oslo"})


@tool
def get_weather(city: str) -> str:
    """Look up the current weather.

    Args:
        city: The city to look up.
    """
    return f"Sunny, 18C in {city}"


class Forecast(pydantic.BaseModel):
    city: str
    degrees: int


def stored(agent: Agent) -> list[Message]:
    assert isinstance(agent.session, InMemorySession)
    return list(agent.session.get_messages())


async def drive(mode: str, agent: Agent, message: str) -> RunResult:
    runner = Runner()
    if mode == "run":
        return await runner.run(agent, message=message)
    if mode == "run_sync":
        return await asyncio.to_thread(runner.run_sync, agent, message=message)
    events = [event async for event in runner.stream(agent, message=message)]
    assert isinstance(events[-1], RunCompleted)
    assert any(isinstance(event, ToolCallCompleted) for event in events) == bool(agent.tools)
    return events[-1].result


def script(server: FakeServer, vendor: Vendor, mode: str, *, tool_turn: bool, final: str) -> None:
    streaming = mode == "stream"
    if tool_turn:
        server.enqueue(
            Stream(vendor.tool_events([CALL]), chunk_size=17)
            if streaming
            else Respond(200, vendor.tool_reply([CALL]))
        )
    server.enqueue(
        Stream(vendor.text_events([final[:5], final[5:]])) if streaming else vendor.ok(final)
    )


def weather_agent(server: FakeServer, vendor: Vendor, **kwargs: Any) -> Agent:
    return Agent(
        "Forecaster",
        "Answer with the weather.",
        model="test-model",
        provider=vendor.provider(server.url),
        tools=[get_weather],
        **kwargs,
    )


@pytest.mark.parametrize("mode", MODES)
async def test_an_agent_with_a_tool(server: FakeServer, vendor: Vendor, mode: str) -> None:
    script(server, vendor, mode, tool_turn=True, final="It is sunny and 18C in Oslo.")
    agent = weather_agent(server, vendor)
    result = await drive(mode, agent, "Weather in Oslo?")

    assert result.content == "It is sunny and 18C in Oslo."
    assert [m.role for m in stored(agent)] == ["user", "assistant", "tool", "assistant"]
    asked, answered = stored(agent)[1:3]
    assert asked.tool_calls == (ToolCall("call_w1", "get_weather", json.dumps({"city": "Oslo"})),)
    assert answered == Message("tool", "Sunny, 18C in Oslo", tool_call_id="call_w1")
    assert result.usage.requests == 2
    assert result.usage.input_tokens > 0

    first, second = (r.json() for r in server.requests)
    names = [t.get("name") or t["function"]["name"] for t in first["tools"]]
    assert names == ["get_weather"]
    if vendor.name == "openai":
        assert first["messages"][0] == {"role": "system", "content": "Answer with the weather."}
        assert (
            second["messages"][-2]["tool_calls"][0]["function"]["arguments"] == '{"city": "Oslo"}'
        )
        assert second["messages"][-1] == {
            "role": "tool",
            "tool_call_id": "call_w1",
            "content": "Sunny, 18C in Oslo",
        }
    else:
        cached = {"cache_control": {"type": "ephemeral"}}  # prompt caching is on by default
        assert first["system"] == [{"type": "text", "text": "Answer with the weather."} | cached]
        assert second["messages"][-2]["content"] == [
            {"type": "tool_use", "id": "call_w1", "name": "get_weather", "input": {"city": "Oslo"}}
        ]
        assert second["messages"][-1] == {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_w1", "content": "Sunny, 18C in Oslo"}
                | cached
            ],
        }


@pytest.mark.parametrize("mode", MODES)
async def test_an_agent_with_structured_output(
    server: FakeServer, vendor: Vendor, mode: str
) -> None:
    script(server, vendor, mode, tool_turn=False, final='{"city": "Oslo", "degrees": 18}')
    agent = Agent(
        "Forecaster",
        model="test-model",
        provider=vendor.provider(server.url),
        output_schema=Forecast,
    )
    result = await drive(mode, agent, "Weather in Oslo?")
    assert result.output == Forecast(city="Oslo", degrees=18)

    sent = server.requests[0].json()
    if vendor.name == "openai":
        fmt = sent["response_format"]
        assert fmt["type"] == "json_schema"
        assert fmt["json_schema"]["name"] == "Forecast"
        assert fmt["json_schema"]["schema"]["properties"].keys() == {"city", "degrees"}
        # pydantic leaves objects open (it ignores other keys): strict mode closes them
        assert fmt["json_schema"]["strict"] is True
        assert fmt["json_schema"]["schema"]["additionalProperties"] is False
        assert fmt["json_schema"]["schema"]["required"] == ["city", "degrees"]
    else:
        schema = sent["output_config"]["format"]["schema"]
        assert sent["output_config"]["format"]["type"] == "json_schema"
        assert schema["required"] == ["city", "degrees"]
        assert schema["additionalProperties"] is False


async def stream_events(runner: Runner, agent: Agent, message: str) -> list[Any]:
    return [event async for event in runner.stream(agent, message=message)]


@pytest.mark.parametrize("retries", [0, 1])
async def test_a_broken_stream_leaves_only_the_user_message(
    server: FakeServer, vendor: Vendor, retries: int
) -> None:
    # The tool turn completes; the final answer breaks off part-way (on every attempt).
    server.enqueue(Stream(vendor.tool_events([CALL])))
    broken = Stream(vendor.first_events(["It is sunny", " and warm"], 1), end="drop")
    server.enqueue(*[broken] * (retries + 1))
    agent = weather_agent(server, vendor)
    runner = Runner(stream_retries=retries, retry_backoff=0.01)
    texts: list[str] = []
    with pytest.raises(StreamInterruptedError):
        async for event in runner.stream(agent, message="Weather in Oslo?"):
            if isinstance(event, TextDelta):
                texts.append(event.text)
    assert texts == ["It is sunny"] * (retries + 1)
    assert stored(agent) == [Message("user", "Weather in Oslo?")]
    assert len(server.requests) == 2 + retries
    assert server.pending == 0


async def test_a_stream_without_end_marker_also_leaves_only_the_user_message(
    server: FakeServer, vendor: Vendor
) -> None:
    server.enqueue(Stream(vendor.unfinished_events(["It is sunny", " and"])))
    agent = weather_agent(server, vendor)
    with pytest.raises(StreamInterruptedError):
        await stream_events(Runner(stream_retries=0), agent, "Weather?")
    assert stored(agent) == [Message("user", "Weather?")]


@pytest.mark.parametrize("fault", ["drop", "no end marker", "malformed"])
async def test_a_broken_stream_is_restarted_afresh(
    server: FakeServer, vendor: Vendor, fault: str
) -> None:
    if fault == "drop":
        broken = Stream(vendor.first_events(["It is rainy"], 1), end="drop")
    elif fault == "no end marker":
        broken = Stream(vendor.unfinished_events(["It is rainy"]))
    else:
        broken = Stream([*vendor.first_events(["It is rainy"], 1), "data: {oops\n\n"])
    server.enqueue(broken, Stream(vendor.text_events(["It is sunny", "."])))
    agent = weather_agent(server, vendor)
    events = await stream_events(Runner(retry_backoff=0.01), agent, "Weather?")

    kinds = [type(event).__name__ for event in events]
    assert kinds == ["TextDelta", "StreamRestarted", "TextDelta", "TextDelta", "RunCompleted"]
    assert events[-1].result.content == "It is sunny."
    assert stored(agent) == [Message("user", "Weather?"), Message("assistant", "It is sunny.")]
    first, second = server.requests
    assert first.body == second.body  # the same request, sent again


async def test_a_run_that_fails_keeps_the_turns_that_completed(
    server: FakeServer, vendor: Vendor
) -> None:
    server.enqueue(Respond(200, vendor.tool_reply([CALL])))
    server.enqueue(Respond(429, vendor.rate_limit_error, {"Retry-After": "30"}))
    agent = weather_agent(server, vendor)
    with pytest.raises(RateLimitError) as info:
        await Runner().run(agent, message="Weather in Oslo?")
    assert info.value.retry_after == 30.0
    assert [m.role for m in stored(agent)] == ["user", "assistant", "tool"]


async def test_providers_by_name_read_the_environment(
    server: FakeServer, vendor: Vendor, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = server.url + "/v1" if vendor.name == "openai" else server.url
    monkeypatch.setenv(vendor.env_var, API_KEY)
    monkeypatch.setenv(vendor.env_var.replace("API_KEY", "BASE_URL"), base)
    server.enqueue(vendor.ok("Hello from the registry."))
    agent = Agent("Named", model="test-model", provider=vendor.name)
    result = await Runner().run(agent, message="Hi")
    assert result.content == "Hello from the registry."
    assert type(agent.resolve_provider()).__name__.lower().startswith(vendor.name)
