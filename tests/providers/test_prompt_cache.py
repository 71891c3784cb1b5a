"""Prompt caching over real HTTP: where the Anthropic breakpoints go, OpenAI's cache key, and
cache token counts from both wire formats, streamed or not, summed over a run."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from aniki import (
    Agent,
    Message,
    ModelRequest,
    ModelResponse,
    RunCompleted,
    Runner,
    RunResult,
    ToolCall,
    ToolDefinition,
    Usage,
    UserError,
    tool,
)
from aniki.providers.anthropic import AnthropicProvider
from aniki.providers.openai import OpenAIProvider
from aniki.testing import MockProvider

from . import anthropic_shapes as anth
from . import openai_shapes as oai
from .fake_server import FakeServer, Respond, Stream
from .vendors import API_KEY, Vendor

MARK = {"type": "ephemeral"}
LOOKUP = ToolDefinition("lookup", "Look a term up.", {"type": "object", "properties": {}})
WEATHER = ToolDefinition("get_weather", "Look up the weather.", {"type": "object"})


def claude(server: FakeServer) -> AnthropicProvider:
    return AnthropicProvider(api_key=API_KEY, base_url=server.url, max_retries=0)


def gpt(server: FakeServer, **options: Any) -> OpenAIProvider:
    return OpenAIProvider(api_key=API_KEY, base_url=server.url + "/v1", max_retries=0, **options)


def marks(body: dict[str, Any]) -> list[str]:
    """Where ``cache_control`` appears in a request body, as paths like ``messages.2.content.0``,
    in the order the API reads the prefix: tools, system, messages."""
    order = ["tools", "system", "messages"]
    keys = sorted(body, key=lambda key: order.index(key) if key in order else -1)
    return [path for key in keys for path in _marks(body[key], key)]


def _marks(node: Any, path: str) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        if "cache_control" in node:
            assert node["cache_control"] == MARK
            found.append(path)
        for key, value in node.items():
            found += _marks(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _marks(value, f"{path}.{index}")
    return found


async def sent_to_claude(
    server: FakeServer,
    messages: tuple[Message, ...],
    *,
    tools: tuple[ToolDefinition, ...] = (),
    **settings: Any,
) -> dict[str, Any]:
    """The body the Anthropic provider sends for one request."""
    server.enqueue(Respond(200, anth.message([anth.text_block("ok")])))
    request = ModelRequest(model="claude", messages=messages, tools=tools, settings=settings)  # type: ignore[arg-type]
    await claude(server).complete(request)
    body: dict[str, Any] = server.requests[-1].json()
    return body


def block_at(body: dict[str, Any], path: str) -> Any:
    node: Any = body
    for part in path.split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


# --- Anthropic breakpoints ---------------------------------------------------------------

CONVERSATION = (
    Message("system", "You answer questions."),
    Message("system", "Summary so far: the user is Ana."),
    Message("user", "What is aniki?"),
    Message("assistant", tool_calls=(ToolCall("toolu_1", "lookup", '{"term": "aniki"}'),)),
    Message("tool", "an agent SDK", tool_call_id="toolu_1"),
    Message("assistant", "An agent SDK."),
    Message("user", "Thanks. And who am I?"),
)


async def test_four_breakpoints_tools_system_last_and_previous_user_turn(
    server: FakeServer,
) -> None:
    body = await sent_to_claude(server, CONVERSATION, tools=(WEATHER, LOOKUP))
    assert marks(body) == [
        "tools.1",  # the last tool: every tool definition is cached
        "system.1",  # the last system block: instructions and summary
        "messages.2.content.0",  # the user turn before the last message: the tool result
        "messages.4.content.0",  # the last block of the last message
    ]
    assert "cache_control" not in body["tools"][0]
    assert body["system"][0] == {"type": "text", "text": "You answer questions."}
    assert block_at(body, "messages.2.content.0")["type"] == "tool_result"
    assert block_at(body, "messages.4.content.0")["text"] == "Thanks. And who am I?"


async def test_the_request_objects_are_not_changed_by_marking(server: FakeServer) -> None:
    schema = {"type": "object", "properties": {}}
    tools = (ToolDefinition("lookup", "Look a term up.", schema),)
    await sent_to_claude(server, CONVERSATION, tools=tools)
    await sent_to_claude(server, CONVERSATION, tools=tools)
    assert schema == {"type": "object", "properties": {}}
    first, second = (request.json() for request in server.requests)
    assert first == second  # the same request twice: byte-stable, so the prefix can be cached


async def test_prompt_cache_false_sends_no_breakpoints(server: FakeServer) -> None:
    body = await sent_to_claude(server, CONVERSATION, tools=(LOOKUP,), prompt_cache=False)
    assert marks(body) == []
    assert body["system"] == [
        {"type": "text", "text": "You answer questions."},
        {"type": "text", "text": "Summary so far: the user is Ana."},
    ]
    body = await sent_to_claude(server, CONVERSATION[:1] + CONVERSATION[2:3], prompt_cache=False)
    assert body["system"] == "You answer questions."  # one system text stays a plain string


async def test_no_tools_and_no_system(server: FakeServer) -> None:
    body = await sent_to_claude(server, (Message("user", "Hi"),))
    assert marks(body) == ["messages.0.content.0"]
    assert "system" not in body and "tools" not in body
    body = await sent_to_claude(server, CONVERSATION[2:])
    assert marks(body) == ["messages.2.content.0", "messages.4.content.0"]


async def test_one_system_text_becomes_a_marked_block(server: FakeServer) -> None:
    body = await sent_to_claude(server, (Message("system", "Be brief."), Message("user", "Hi")))
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": MARK}]


async def test_a_tool_result_last_message_marks_its_last_result(server: FakeServer) -> None:
    calls = (ToolCall("toolu_1", "lookup", "{}"), ToolCall("toolu_2", "lookup", "{}"))
    history = (
        Message("user", "Look both up."),
        Message("assistant", "Looking.", tool_calls=calls),
        Message("tool", "one", tool_call_id="toolu_1"),
        Message("tool", "two", tool_call_id="toolu_2"),
    )
    body = await sent_to_claude(server, history, tools=(LOOKUP,))
    assert marks(body) == ["tools.0", "messages.0.content.0", "messages.2.content.1"]
    assert block_at(body, "messages.2.content.1")["tool_use_id"] == "toolu_2"


async def test_empty_blocks_are_never_marked(server: FakeServer) -> None:
    # The last tool result is blank: the mark goes on the result before it.
    calls = (ToolCall("toolu_1", "lookup", "{}"), ToolCall("toolu_2", "lookup", "{}"))
    history = (
        Message("user", "Look both up."),
        Message("assistant", "", tool_calls=calls),
        Message("tool", "one", tool_call_id="toolu_1"),
        Message("tool", " ", tool_call_id="toolu_2"),
    )
    body = await sent_to_claude(server, history)
    assert marks(body) == ["messages.0.content.0", "messages.2.content.0"]
    # A blank text block cannot carry a mark: it goes on the turn before.
    body = await sent_to_claude(server, (Message("user", "Hi"), Message("assistant", "  ")))
    assert marks(body) == ["messages.0.content.0"]


async def test_an_assistant_tool_call_without_text_is_marked_on_the_call(
    server: FakeServer,
) -> None:
    history = (
        Message("user", "Look it up."),
        Message("assistant", "", tool_calls=(ToolCall("toolu_1", "lookup", "{}"),)),
    )
    body = await sent_to_claude(server, history)
    assert body["messages"][1]["content"] == [
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}, "cache_control": MARK}
    ]
    assert marks(body) == ["messages.0.content.0", "messages.1.content.0"]


async def test_the_previous_user_turn_mark_is_where_the_last_request_put_its_own(
    server: FakeServer,
) -> None:
    # A turn with 15 parallel calls adds 30 blocks, more than the API looks back from a mark:
    # only a mark at the previous request's end finds that request's cached prefix.
    calls = tuple(ToolCall(f"toolu_{i}", "lookup", f'{{"n": {i}}}') for i in range(15))
    before = (Message("system", "Go."), Message("user", "Look up all 15."))
    turn = (
        Message("assistant", tool_calls=calls),
        *(Message("tool", f"result {i}", tool_call_id=f"toolu_{i}") for i in range(15)),
    )
    first = await sent_to_claude(server, before, tools=(LOOKUP,))
    second = await sent_to_claude(server, before + turn, tools=(LOOKUP,))
    assert marks(first)[-1] == "messages.0.content.0"
    assert marks(second) == ["tools.0", "system.0", "messages.0.content.0", "messages.2.content.14"]
    # The previous request's body is a prefix of this one's, marks included.
    assert second["messages"][0] == first["messages"][0]
    assert second["system"] == first["system"] and second["tools"] == first["tools"]


@pytest.mark.parametrize("length", range(1, 9))
async def test_never_more_than_four_breakpoints(server: FakeServer, length: int) -> None:
    turns = [
        Message("user", "Question?"),
        Message("assistant", "", tool_calls=(ToolCall("toolu_1", "lookup", "{}"),)),
        Message("tool", "answer", tool_call_id="toolu_1"),
        Message("assistant", "Answer."),
    ] * 2
    history = (Message("system", "A"), Message("system", "B"), *turns[:length])
    body = await sent_to_claude(server, history, tools=(LOOKUP, WEATHER))
    found = marks(body)
    assert 3 <= len(found) <= 4
    for path in found:
        block = block_at(body, path)
        assert block.get("text", "x").strip() and block.get("content", "x")


async def test_streamed_requests_carry_the_same_breakpoints(server: FakeServer) -> None:
    server.enqueue(Stream(anth.text_stream(["ok"])))
    request = ModelRequest(model="claude", messages=CONVERSATION, tools=(LOOKUP,))
    _ = [item async for item in claude(server).stream(request)]
    body = server.requests[0].json()
    assert body["stream"] is True
    assert marks(body) == ["tools.0", "system.1", "messages.2.content.0", "messages.4.content.0"]


# --- OpenAI: the cache key ----------------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True])
async def test_prompt_cache_key_is_sent_only_when_set(server: FakeServer, streaming: bool) -> None:
    provider = gpt(server)
    history = (Message("system", "Be brief."), Message("user", "Hi"))
    for settings in ({"prompt_cache_key": "conversation-42"}, {}, {"prompt_cache": False}):
        request = ModelRequest(model="m", messages=history, settings=settings)  # type: ignore[arg-type]
        if streaming:
            server.enqueue(Stream(oai.text_stream(["Hello"])))
            _ = [item async for item in provider.stream(request)]
        else:
            server.enqueue(Respond(200, oai.completion("Hello")))
            await provider.complete(request)
    with_key, without, off = (request.json() for request in server.requests)
    assert with_key["prompt_cache_key"] == "conversation-42"
    assert "prompt_cache_key" not in without and "prompt_cache_key" not in off
    # OpenAI caches by itself: nothing else about the request changes.
    assert {k: v for k, v in with_key.items() if k != "prompt_cache_key"} == without == off
    assert marks(with_key) == []


# --- Cache tokens from the replies --------------------------------------------------------


def openai_usage(prompt: int, completion: int, cached: int) -> dict[str, Any]:
    usage = oai.usage(prompt, completion)
    usage["prompt_tokens_details"]["cached_tokens"] = cached
    return usage


def openai_reply(text: str, *, prompt: int, cached: int) -> dict[str, Any]:
    body = oai.completion(text)
    body["usage"] = openai_usage(prompt, 7, cached)
    return body


def openai_stream(text: str, *, prompt: int, cached: int) -> list[str]:
    final = oai.chunk(with_usage=(prompt, 4))
    final["usage"] = openai_usage(prompt, 4, cached)
    return oai.events(
        oai.chunk({"role": "assistant", "content": ""}),
        oai.chunk({"content": text}),
        oai.chunk(finish_reason="stop"),
        final,
    )


def anthropic_counts(uncached: int, read: int, written: int, out: int) -> dict[str, Any]:
    return anth.usage(
        uncached, out, cache_read_input_tokens=read, cache_creation_input_tokens=written
    )


def anthropic_stream(
    text: str, start: dict[str, Any], end: dict[str, Any], *, stop: str = "end_turn"
) -> list[str]:
    opening = anth.message([anth.text_block("")], usage_tokens=start)
    opening.update(content=[], stop_reason=None)
    return [
        anth.event({"type": "message_start", "message": opening}),
        anth.block_start(0, anth.text_block("")),
        anth.text_delta(0, text),
        anth.block_stop(0),
        anth.event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": end,
            }
        ),
        anth.message_stop(),
    ]


ASK = ModelRequest(model="m", messages=(Message("user", "Hi"),))


async def test_openai_cached_tokens_whole_reply(server: FakeServer) -> None:
    server.enqueue(Respond(200, openai_reply("Hello", prompt=2006, cached=1920)))
    response = await gpt(server).complete(ASK)
    assert response.usage == Usage(
        input_tokens=2006, output_tokens=7, requests=1, cache_read_tokens=1920
    )


async def test_openai_cached_tokens_streamed(server: FakeServer) -> None:
    server.enqueue(Stream(openai_stream("Hello", prompt=3000, cached=2944), chunk_size=13))
    items = [item async for item in gpt(server).stream(ASK)]
    final = items[-1]
    assert isinstance(final, ModelResponse)
    assert final.usage == Usage(
        input_tokens=3000, output_tokens=4, requests=1, cache_read_tokens=2944
    )


async def test_openai_usage_without_details_reads_no_cache(server: FakeServer) -> None:
    body = oai.completion("Hello")
    del body["usage"]["prompt_tokens_details"]  # older servers send no details
    server.enqueue(Respond(200, body))
    response = await gpt(server).complete(ASK)
    assert response.usage == Usage(input_tokens=11, output_tokens=7, requests=1)


async def test_anthropic_cache_tokens_whole_reply(server: FakeServer) -> None:
    usage = anthropic_counts(uncached=10, read=1800, written=200, out=5)
    server.enqueue(Respond(200, anth.message([anth.text_block("Hi")], usage_tokens=usage)))
    response = await claude(server).complete(ASK)
    # The API's input_tokens leaves the cached part out; aniki's includes it.
    assert response.usage == Usage(
        input_tokens=2010,
        output_tokens=5,
        requests=1,
        cache_read_tokens=1800,
        cache_write_tokens=200,
    )


@pytest.mark.parametrize(
    "end",
    [
        {"output_tokens": 40},  # the counts as message_start gave them
        # message_delta may repeat the input counts (cumulative) ...
        {"output_tokens": 40, "input_tokens": 10, "cache_read_input_tokens": 1800},
        # ... or send them as null, which must not erase message_start's
        {"output_tokens": 40, "cache_read_input_tokens": None, "cache_creation_input_tokens": None},
    ],
)
async def test_anthropic_cache_tokens_streamed(server: FakeServer, end: dict[str, Any]) -> None:
    start = anthropic_counts(uncached=10, read=1800, written=200, out=1)
    server.enqueue(Stream(anthropic_stream("Hi", start, end)))
    items = [item async for item in claude(server).stream(ASK)]
    final = items[-1]
    assert isinstance(final, ModelResponse)
    assert final.usage == Usage(
        input_tokens=2010,
        output_tokens=40,
        requests=1,
        cache_read_tokens=1800,
        cache_write_tokens=200,
    )


async def test_anthropic_streamed_delta_counts_replace_the_start_counts(
    server: FakeServer,
) -> None:
    start = anthropic_counts(uncached=10, read=0, written=0, out=1)
    end = {"output_tokens": 3, "cache_read_input_tokens": 500, "cache_creation_input_tokens": 90}
    server.enqueue(Stream(anthropic_stream("Hi", start, end)))
    items = [item async for item in claude(server).stream(ASK)]
    final = items[-1]
    assert isinstance(final, ModelResponse)
    assert final.usage == Usage(
        input_tokens=600, output_tokens=3, requests=1, cache_read_tokens=500, cache_write_tokens=90
    )


async def test_replies_without_usage_report_none(server: FakeServer) -> None:
    body = oai.completion("Hello")
    del body["usage"]
    server.enqueue(Respond(200, body))
    assert (await gpt(server).complete(ASK)).usage is None
    message = anth.message([anth.text_block("Hi")])
    message["usage"] = {}
    server.enqueue(Respond(200, message))
    assert (await claude(server).complete(ASK)).usage is None


# --- Summed over a run --------------------------------------------------------------------

MODES = ["run", "run_sync", "stream"]
CALL = ("call_1", "get_weather", {"city": "Oslo"})


@tool
def get_weather(city: str) -> str:
    """Look up the current weather.

    Args:
        city: The city to look up.
    """
    return f"Sunny in {city}"


async def drive(mode: str, agent: Agent, message: str) -> RunResult:
    runner = Runner()
    if mode == "run":
        return await runner.run(agent, message=message)
    if mode == "run_sync":
        return await asyncio.to_thread(runner.run_sync, agent, message=message)
    events = [event async for event in runner.stream(agent, message=message)]
    assert isinstance(events[-1], RunCompleted)
    return events[-1].result


def openai_tool_turn(streaming: bool, *, prompt: int, cached: int) -> Respond | Stream:
    call_id, name, arguments = CALL
    if not streaming:
        body = oai.completion(
            None, tool_calls=[oai.tool_call(call_id, name, json.dumps(arguments))]
        )
        body["usage"] = openai_usage(prompt, 12, cached)
        return Respond(200, body)
    final = oai.chunk(with_usage=(prompt, 12))
    final["usage"] = openai_usage(prompt, 12, cached)
    return Stream(
        oai.events(
            oai.chunk({"role": "assistant", "content": None}),
            oai.chunk(oai.fragment(0, call_id=call_id, name=name, arguments=json.dumps(arguments))),
            oai.chunk(finish_reason="tool_calls"),
            final,
        )
    )


def anthropic_tool_turn(streaming: bool, usage: dict[str, Any]) -> Respond | Stream:
    call_id, name, arguments = CALL
    if not streaming:
        return Respond(
            200, anth.message([anth.tool_use_block(call_id, name, arguments)], usage_tokens=usage)
        )
    opening = anth.message([anth.text_block("")], usage_tokens=usage)
    opening.update(content=[], stop_reason=None)
    events = anth.tool_stream([CALL])
    events[0] = anth.event({"type": "message_start", "message": opening})
    events[-2] = anth.event(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        }
    )
    return Stream(events)


def anthropic_text_turn(streaming: bool, text: str, usage: dict[str, Any]) -> Respond | Stream:
    if not streaming:
        return Respond(200, anth.message([anth.text_block(text)], usage_tokens=usage))
    return Stream(anthropic_stream(text, usage, {"output_tokens": usage["output_tokens"]}))


def script_cached_run(server: FakeServer, vendor: Vendor, streaming: bool) -> Usage:
    """Two replies (a tool call, then text) reporting cache use; returns the expected sum."""
    if vendor.name == "openai":
        server.enqueue(openai_tool_turn(streaming, prompt=1500, cached=0))
        server.enqueue(
            Stream(openai_stream("Sunny.", prompt=1600, cached=1408))
            if streaming
            else Respond(200, openai_reply("Sunny.", prompt=1600, cached=1408))
        )
        second_out = 4 if streaming else 7
        return Usage(
            input_tokens=3100, output_tokens=12 + second_out, requests=2, cache_read_tokens=1408
        )
    server.enqueue(anthropic_tool_turn(streaming, anthropic_counts(20, 0, 1480, 12)))
    server.enqueue(anthropic_text_turn(streaming, "Sunny.", anthropic_counts(25, 1480, 95, 6)))
    return Usage(
        input_tokens=1500 + 1600,
        output_tokens=18,
        requests=2,
        cache_read_tokens=1480,
        cache_write_tokens=1480 + 95,
    )


@pytest.mark.parametrize("mode", MODES)
async def test_cache_tokens_are_summed_over_a_run_with_tools(
    server: FakeServer, vendor: Vendor, mode: str
) -> None:
    expected = script_cached_run(server, vendor, mode == "stream")
    agent = Agent(
        "Forecaster",
        "Answer with the weather.",
        model="test-model",
        provider=vendor.provider(server.url),
        tools=[get_weather],
    )
    result = await drive(mode, agent, "Weather in Oslo?")
    assert result.content == "Sunny."
    assert result.usage == expected
    assert "tokens not reported" not in result.usage.describe()
    if vendor.name == "anthropic":
        # The second request reads the first one's prefix: its tool-call turn follows the
        # block the first request marked last.
        first, second = (request.json() for request in server.requests)
        assert marks(first)[-1] == "messages.0.content.0"
        assert marks(second)[-2:] == ["messages.0.content.0", "messages.2.content.0"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_reply_without_usage_is_counted_as_unreported(
    server: FakeServer, mode: str
) -> None:
    # llama.cpp's server sends no usage chunk in a stream; a whole reply may lack it too.
    streaming = mode == "stream"
    silent_stream = oai.events(
        oai.chunk({"role": "assistant", "content": ""}),
        oai.chunk({"content": "Hello"}),
        oai.chunk(finish_reason="stop"),
    )
    silent_reply = oai.completion("Hello")
    del silent_reply["usage"]
    server.enqueue(Stream(silent_stream) if streaming else Respond(200, silent_reply))
    agent = Agent("Local", model="m", provider=gpt(server))
    result = await drive(mode, agent, "Hi")
    assert result.content == "Hello"
    assert result.usage == Usage(requests=1, unreported_requests=1)
    assert result.usage.describe() == "1 request; tokens not reported"
    assert "0 tokens" not in str(result.usage)  # not a zero that looks measured


@pytest.mark.parametrize("mode", MODES)
async def test_some_replies_without_usage_make_the_counts_a_lower_bound(
    server: FakeServer, mode: str
) -> None:
    streaming = mode == "stream"
    server.enqueue(openai_tool_turn(streaming, prompt=1500, cached=1024))
    silent = oai.completion("Sunny.")
    del silent["usage"]
    server.enqueue(
        Stream(oai.text_stream(["Sunny."])[:-2] + oai.events())
        if streaming
        else Respond(200, silent)
    )
    agent = Agent("Local", model="m", provider=gpt(server), tools=[get_weather])
    result = await drive(mode, agent, "Weather in Oslo?")
    assert result.usage == Usage(
        input_tokens=1500,
        output_tokens=12,
        requests=2,
        cache_read_tokens=1024,
        unreported_requests=1,
    )
    assert result.usage.describe() == (
        "1,500 tokens in (1,024 read from cache, 0 written), 12 out, 2 requests; "
        "tokens not reported for 1 of 2 requests"
    )


async def test_mock_provider_usage_mappings_take_the_cache_fields() -> None:
    provider = MockProvider()
    provider.enqueue_response(
        tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}],
        usage={"input_tokens": 1500, "output_tokens": 9, "requests": 1, "cache_write_tokens": 1400},
    )
    provider.enqueue_response(
        "Sunny.",
        usage={"input_tokens": 1600, "output_tokens": 3, "requests": 1, "cache_read_tokens": 1400},
    )
    provider.enqueue_response("No usage this time.")
    agent = Agent("Forecaster", model="m", provider=provider, tools=[get_weather])
    first = await Runner().run(agent, message="Weather in Oslo?")
    assert first.usage == Usage(
        input_tokens=3100,
        output_tokens=12,
        requests=2,
        cache_read_tokens=1400,
        cache_write_tokens=1400,
    )
    second = await Runner().run(agent, message="Thanks")
    assert second.usage == Usage(requests=1, unreported_requests=1)
    with pytest.raises(UserError, match="cache_hits"):
        provider.enqueue_response("x", usage={"cache_hits": 3})
