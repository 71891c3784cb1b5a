"""AnthropicProvider end to end: the official client against the fake server over real HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from aniki import (
    AuthenticationError,
    Message,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCall,
    UserError,
)
from aniki.providers.anthropic import AnthropicProvider

from . import anthropic_shapes as anth
from .fake_server import FakeServer, RecordedRequest, Respond, Stream
from .vendors import API_KEY, WEATHER

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "degrees": {"type": "number"}},
    "required": ["city", "degrees"],
}
HISTORY = (
    Message("system", "You are terse."),
    Message("user", "Weather in Oslo and Rome?"),
    Message(
        "assistant",
        "Checking both.",
        tool_calls=(
            ToolCall("toolu_1", "get_weather", '{"city":"Oslo"}'),
            ToolCall("toolu_2", "get_weather", '{"city": "Ro'),  # invalid JSON, stored verbatim
        ),
    ),
    Message("tool", "18C", tool_call_id="toolu_1"),
    Message("tool", "error: arguments are not valid JSON", tool_call_id="toolu_2"),
)


def provider(server: FakeServer, **options: Any) -> AnthropicProvider:
    options.setdefault("max_retries", 0)
    return AnthropicProvider(api_key=API_KEY, base_url=server.url, **options)


def key_sent(request: RecordedRequest) -> str | None:
    # The client version decides between x-api-key and a bearer token.
    bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
    return request.headers.get("x-api-key") or bearer or None


async def collect(p: AnthropicProvider, request: ModelRequest) -> tuple[list[str], ModelResponse]:
    items = [item async for item in p.stream(request)]
    final = items[-1]
    assert isinstance(final, ModelResponse)
    assert all(isinstance(item, TextDelta) for item in items[:-1])
    return [item.text for item in items[:-1] if isinstance(item, TextDelta)], final


async def test_complete_sends_the_documented_request(server: FakeServer) -> None:
    server.enqueue(Respond(200, anth.message([anth.text_block('{"city": "Oslo", "degrees": 18}')])))
    request = ModelRequest(
        model="claude-sonnet-4-5",
        messages=HISTORY,
        tools=(WEATHER,),
        output_schema=SCHEMA,
        settings={
            "stop": ["###"],
            "tool_choice": "required",
            "parallel_tool_calls": False,
            "prompt_cache": False,  # the breakpoints have tests of their own
        },
    )
    response = await provider(server, default_max_tokens=777).complete(request)

    assert response.content == '{"city": "Oslo", "degrees": 18}'
    assert response.finish_reason == "stop"
    assert response.usage is not None and response.usage.input_tokens == 21

    [sent] = server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    assert key_sent(sent) == API_KEY
    assert "anthropic-version" in sent.headers
    body = sent.json()
    assert body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 777,
        "system": "You are terse.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo and Rome?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking both."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {"city": "Oslo"},
                    },
                    {
                        "type": "tool_use",
                        "id": "toolu_2",
                        "name": "get_weather",
                        "input": {"raw_arguments": '{"city": "Ro'},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": "error: arguments are not valid JSON",
                    },
                ],
            },
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "Look up the weather.",
                "input_schema": WEATHER.parameters,
            }
        ],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "stop_sequences": ["###"],
        "output_config": {
            "format": {
                "type": "json_schema",
                "schema": {**SCHEMA, "additionalProperties": False},
            }
        },
    }


async def test_complete_returns_tool_calls(server: FakeServer) -> None:
    server.enqueue(
        Respond(
            200, anth.message([anth.tool_use_block("toolu_7", "get_weather", {"city": "Oslo"})])
        )
    )
    response = await provider(server).complete(ModelRequest(model="m", messages=HISTORY[:2]))
    assert response.tool_calls == (ToolCall("toolu_7", "get_weather", '{"city": "Oslo"}'),)
    assert response.finish_reason == "tool_calls"


async def test_stream_text_and_usage(server: FakeServer) -> None:
    server.enqueue(Stream(anth.text_stream(["It is ", "18C."], input_tokens=40, output_tokens=5)))
    texts, final = await collect(provider(server), ModelRequest(model="m", messages=HISTORY[:2]))
    assert texts == ["It is ", "18C."]
    assert final.content == "It is 18C."
    assert final.finish_reason == "stop"
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (40, 5)
    assert server.requests[0].json()["stream"] is True


async def test_stream_assembles_tool_input_from_json_deltas(server: FakeServer) -> None:
    calls = [
        ("toolu_A", "get_weather", {"city": "Oslo"}),
        ("toolu_B", "get_weather", {"city": "Rome"}),
    ]
    server.enqueue(Stream(anth.tool_stream(calls, text="Checking."), chunk_size=9))
    request = ModelRequest(model="m", messages=HISTORY[:2], tools=(WEATHER,))
    texts, final = await collect(provider(server), request)
    assert texts == ["Checking."]
    assert final.tool_calls == (
        ToolCall("toolu_A", "get_weather", '{"city": "Oslo"}'),
        ToolCall("toolu_B", "get_weather", '{"city": "Rome"}'),
    )
    assert final.finish_reason == "tool_calls"


async def test_key_and_url_come_from_the_environment(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    server.enqueue(Respond(200, anth.message()))
    p = AnthropicProvider(max_retries=0)
    assert (await p.complete(ModelRequest(model="m", messages=HISTORY[1:2]))).content == "Hello!"
    assert key_sent(server.requests[0]) == "sk-ant-from-env"


async def test_an_auth_token_from_the_environment_is_used_without_a_key(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "tok-123")
    server.enqueue(Respond(200, anth.message()))
    await AnthropicProvider(base_url=server.url, max_retries=0).complete(
        ModelRequest(model="m", messages=HISTORY[1:2])
    )
    assert server.requests[0].headers["authorization"] == "Bearer tok-123"


@pytest.mark.parametrize("key", [None, ""])
async def test_a_missing_key_fails_before_any_request(server: FakeServer, key: str | None) -> None:
    p = AnthropicProvider(api_key=key, base_url=server.url)
    request = ModelRequest(model="m", messages=HISTORY[1:2])
    with pytest.raises(AuthenticationError, match="ANTHROPIC_API_KEY") as info:
        await p.complete(request)
    assert info.value.env_var == "ANTHROPIC_API_KEY"
    with pytest.raises(AuthenticationError):
        async for _ in p.stream(request):
            pass
    assert server.requests == []


@pytest.mark.parametrize(
    "options", [{"bogus_option": 1}, {"default_max_tokens": 0}, {"max_retries": 1.5}]
)
def test_bad_options_fail_at_construction(options: dict[str, Any]) -> None:
    with pytest.raises(UserError):
        AnthropicProvider(api_key=API_KEY, **options)


def test_repr_never_shows_the_key() -> None:
    assert API_KEY not in repr(AnthropicProvider(api_key=API_KEY))


async def test_a_large_max_tokens_without_streaming_is_a_user_error(server: FakeServer) -> None:
    # The client refuses, before sending, a non-streamed call that may outlast its timeout.
    request = ModelRequest(model="m", messages=HISTORY[1:2], settings={"max_tokens": 200_000})
    with pytest.raises(UserError, match="Streaming"):
        await provider(server).complete(request)
    assert server.requests == []


async def test_another_credential_can_be_given_to_the_client(server: FakeServer) -> None:
    server.enqueue(Respond(200, anth.message()))
    p = AnthropicProvider(base_url=server.url, max_retries=0, auth_token="tok-from-option")
    await p.complete(ModelRequest(model="m", messages=HISTORY[1:2]))
    assert server.requests[0].headers["authorization"] == "Bearer tok-from-option"
