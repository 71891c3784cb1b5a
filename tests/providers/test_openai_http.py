"""OpenAIProvider end to end: the official client against the fake server over real HTTP."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aniki import (
    AuthenticationError,
    Message,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCall,
    ToolDefinition,
    UserError,
)
from aniki.providers.openai import OpenAIProvider

from . import openai_shapes as oai
from .fake_server import FakeServer, Respond, Stream
from .vendors import API_KEY

WEATHER = ToolDefinition(
    "get_weather",
    "Look up the weather.",
    {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
)
SCHEMA = {
    "title": "Answer",
    "type": "object",
    "properties": {"city": {"type": "string"}, "degrees": {"type": "number"}},
    "required": ["city", "degrees"],
    "additionalProperties": False,
}
HISTORY = (
    Message("system", "You are terse."),
    Message("user", "Weather in Oslo?"),
    Message(
        "assistant",
        tool_calls=(ToolCall("call_1", "get_weather", '{"city":"Oslo"}'),),
    ),
    Message("tool", "18C and sunny", tool_call_id="call_1"),
)


def provider(server: FakeServer, **options: Any) -> OpenAIProvider:
    options.setdefault("max_retries", 0)
    return OpenAIProvider(api_key=API_KEY, base_url=server.url + "/v1", **options)


async def collect(p: OpenAIProvider, request: ModelRequest) -> tuple[list[str], ModelResponse]:
    items = [item async for item in p.stream(request)]
    final = items[-1]
    assert isinstance(final, ModelResponse)
    assert all(isinstance(item, TextDelta) for item in items[:-1])
    return [item.text for item in items[:-1] if isinstance(item, TextDelta)], final


async def test_complete_sends_the_documented_request(server: FakeServer) -> None:
    server.enqueue(Respond(200, oai.completion("It is 18C in Oslo.")))
    request = ModelRequest(
        model="gpt-4o-mini",
        messages=HISTORY,
        tools=(WEATHER,),
        output_schema=SCHEMA,
        settings={"temperature": 0.1, "max_tokens": 200, "seed": 3, "tool_choice": "auto"},
    )
    response = await provider(server).complete(request)

    assert response.content == "It is 18C in Oslo."
    assert response.finish_reason == "stop"
    assert response.model == oai.MODEL
    assert response.usage is not None and response.usage.input_tokens == 11

    [sent] = server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    assert sent.json() == {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "18C and sunny"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Look up the weather.",
                    "parameters": WEATHER.parameters,  # already strict: sent as it is
                    "strict": True,
                },
            }
        ],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "Answer", "schema": SCHEMA, "strict": True},
        },
        "temperature": 0.1,
        "seed": 3,
        "tool_choice": "auto",
        # a compatible server: the classic field name
        "max_tokens": 200,
    }


async def test_complete_returns_tool_calls_verbatim(server: FakeServer) -> None:
    raw = '{"city": "Oslo", "unit": '  # cut off: kept exactly as the model produced it
    server.enqueue(
        Respond(200, oai.completion(None, tool_calls=[oai.tool_call("call_9", "get_weather", raw)]))
    )
    response = await provider(server).complete(ModelRequest(model="m", messages=HISTORY[:2]))
    assert response.tool_calls == (ToolCall("call_9", "get_weather", raw),)
    assert response.finish_reason == "tool_calls"


async def test_stream_text_with_usage_from_the_last_chunk(server: FakeServer) -> None:
    server.enqueue(Stream(oai.text_stream(["It is ", "18C ", "in Oslo."], usage_tokens=(50, 6))))
    texts, final = await collect(provider(server), ModelRequest(model="m", messages=HISTORY[:2]))
    assert texts == ["It is ", "18C ", "in Oslo."]
    assert final.content == "It is 18C in Oslo."
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens, final.usage.requests) == (50, 6, 1)
    body = server.requests[0].json()
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


async def test_stream_assembles_interleaved_tool_calls_split_across_tcp_chunks(
    server: FakeServer,
) -> None:
    chunks = [
        oai.chunk({"role": "assistant", "content": None}),
        oai.chunk(oai.fragment(0, call_id="call_A", name="get_weather")),
        oai.chunk(oai.fragment(1, call_id="call_B", name="get_weather")),
    ]
    for a, b in zip(['{"ci', 'ty": ', '"Oslo"}'], ['{"city"', ': "Ro', 'me"}'], strict=True):
        chunks += [oai.chunk(oai.fragment(0, arguments=a)), oai.chunk(oai.fragment(1, arguments=b))]
    chunks += [oai.chunk(finish_reason="tool_calls"), oai.chunk(with_usage=(70, 33))]
    # 11-byte pieces: events and even JSON strings are split across reads
    server.enqueue(Stream(oai.events(*chunks), chunk_size=11))
    request = ModelRequest(model="m", messages=HISTORY[:2], tools=(WEATHER,))
    texts, final = await collect(provider(server), request)
    assert texts == []
    assert final.tool_calls == (
        ToolCall("call_A", "get_weather", '{"city": "Oslo"}'),
        ToolCall("call_B", "get_weather", '{"city": "Rome"}'),
    )
    assert final.finish_reason == "tool_calls"
    assert final.usage is not None and final.usage.output_tokens == 33


async def test_official_endpoint_gets_max_completion_tokens() -> None:
    p = OpenAIProvider(api_key=API_KEY)
    assert p.max_tokens_param == "max_completion_tokens"
    assert p.base_url == "https://api.openai.com/v1"
    local = OpenAIProvider(api_key=API_KEY, base_url="http://127.0.0.1:8000/v1")
    assert local.max_tokens_param == "max_tokens"
    forced = OpenAIProvider(
        api_key=API_KEY,
        base_url="http://127.0.0.1:8000/v1",
        max_tokens_param="max_completion_tokens",
    )
    assert forced.max_tokens_param == "max_completion_tokens"


async def test_stream_usage_can_be_turned_off(server: FakeServer) -> None:
    server.enqueue(Stream(oai.text_stream(["ok"])))
    await collect(
        provider(server, stream_usage=False), ModelRequest(model="m", messages=HISTORY[:2])
    )
    assert "stream_options" not in server.requests[0].json()


async def test_key_and_url_come_from_the_environment(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    server.enqueue(Respond(200, oai.completion("hi")))
    p = OpenAIProvider(max_retries=0)
    assert (await p.complete(ModelRequest(model="m", messages=HISTORY[1:2]))).content == "hi"
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-env"


@pytest.mark.parametrize("key", [None, ""])
async def test_a_missing_key_fails_before_any_request(server: FakeServer, key: str | None) -> None:
    p = OpenAIProvider(api_key=key, base_url=server.url + "/v1")
    request = ModelRequest(model="m", messages=HISTORY[1:2])
    with pytest.raises(AuthenticationError, match="OPENAI_API_KEY") as info:
        await p.complete(request)
    assert info.value.env_var == "OPENAI_API_KEY"
    assert 'api_key="none"' in str(info.value)  # the hint for key-less local servers
    with pytest.raises(AuthenticationError):
        async for _ in p.stream(request):
            pass
    assert server.requests == []


async def test_a_placeholder_key_serves_key_less_local_servers(server: FakeServer) -> None:
    server.enqueue(Respond(200, oai.completion("local model here")))
    p = OpenAIProvider(api_key="none", base_url=server.url + "/v1", max_retries=0)
    response = await p.complete(ModelRequest(model="llama3.2", messages=HISTORY[1:2]))
    assert response.content == "local model here"


async def test_client_options_reach_the_client(server: FakeServer) -> None:
    server.enqueue(Respond(200, oai.completion("ok")))
    p = provider(server, default_headers={"X-Trace": "t-1"}, organization="org-7")
    await p.complete(ModelRequest(model="m", messages=HISTORY[1:2]))
    assert server.requests[0].headers["x-trace"] == "t-1"
    assert server.requests[0].headers["openai-organization"] == "org-7"


@pytest.mark.parametrize(
    "options",
    [{"bogus_option": 1}, {"max_retries": -1}, {"timeout": 0}, {"timeout": "soon"}],
)
def test_bad_options_fail_at_construction(options: dict[str, Any]) -> None:
    with pytest.raises(UserError):
        OpenAIProvider(api_key=API_KEY, **options)


def test_repr_never_shows_the_key() -> None:
    p = OpenAIProvider(api_key=API_KEY, base_url="http://user:pw@127.0.0.1:9/v1")
    assert API_KEY not in repr(p)
    assert "pw" not in repr(p)
    assert "127.0.0.1:9" in repr(p)


async def test_one_client_per_event_loop(server: FakeServer) -> None:
    server.enqueue(*(Respond(200, oai.completion(text)) for text in ("one", "two", "three")))
    p = provider(server)
    request = ModelRequest(model="m", messages=HISTORY[1:2])
    assert (await p.complete(request)).content == "one"
    assert (await p.complete(request)).content == "two"
    # Another thread's event loop gets a client of its own (pooled connections are per loop).
    other = await asyncio.to_thread(asyncio.run, p.complete(request))
    assert other.content == "three"
    first, second, third = server.requests
    assert first.connection == second.connection  # kept alive and reused
    assert third.connection != first.connection
    await p.aclose()


async def test_client_options_the_client_refuses_are_a_user_error(server: FakeServer) -> None:
    p = provider(server, http_client="not a client")
    with pytest.raises(UserError, match="could not be built"):
        await p.complete(ModelRequest(model="m", messages=HISTORY[1:2]))
    assert server.requests == []
