"""OpenAIResponsesProvider end to end: the official client against the fake server over real
HTTP, asserting the request bodies the server receives. Reasoning has its own file
(``test_responses_reasoning.py``); the shared fault tests run on this provider too."""

from __future__ import annotations

import base64
from typing import Any

import pytest

import aniki.providers
from aniki import (
    Attachment,
    AuthenticationError,
    BadRequestError,
    ContextWindowExceededError,
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ProviderError,
    RateLimitError,
    StreamInterruptedError,
    TextDelta,
    ToolCall,
    ToolDefinition,
    UserError,
)
from aniki.providers import get_provider
from aniki.providers.openai_responses import OpenAIResponsesProvider

from . import responses_shapes as rsp
from .fake_server import FakeServer, Respond, Stream, sse
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
OPEN = ToolDefinition("note", "", {"type": "object", "properties": {"text": {"type": "string"}}})
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
    Message("assistant", tool_calls=(ToolCall("call_1", "get_weather", '{"city":"Oslo"}'),)),
    Message("tool", "18C and sunny", tool_call_id="call_1"),
)
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001")
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF"


def provider(server: FakeServer, **options: Any) -> OpenAIResponsesProvider:
    options.setdefault("max_retries", 0)
    return OpenAIResponsesProvider(api_key=API_KEY, base_url=server.url + "/v1", **options)


async def collect(p: OpenAIResponsesProvider, request: ModelRequest) -> tuple[list[str], Any]:
    items = [item async for item in p.stream(request)]
    final = items[-1]
    assert isinstance(final, ModelResponse)
    return [item.text for item in items[:-1] if isinstance(item, TextDelta)], final


async def test_complete_sends_the_documented_request(server: FakeServer) -> None:
    server.enqueue(Respond(200, rsp.response([rsp.message_item('{"city":"Oslo","degrees":18}')])))
    request = ModelRequest(
        model="o4-mini",
        messages=HISTORY,
        tools=(WEATHER, OPEN),
        output_schema=SCHEMA,
        settings={
            "temperature": 0.1,
            "top_p": 0.9,
            "max_tokens": 200,
            "tool_choice": "get_weather",
            "parallel_tool_calls": False,
            "stop": ["###"],  # the Responses API has no stop, seed or penalties: not sent
            "seed": 3,
            "presence_penalty": 0.5,
            "prompt_cache": False,  # OpenAI caches by itself: nothing to send
        },
    )
    response = await provider(server).complete(request)

    assert response.content == '{"city":"Oslo","degrees":18}'
    assert (response.finish_reason, response.model) == ("stop", rsp.MODEL)
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (36, 87)

    [sent] = server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/responses")
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    assert sent.json() == {
        "model": "o4-mini",
        "input": [
            {"role": "developer", "content": "You are terse."},
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city":"Oslo"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "18C and sunny"},
        ],
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "Look up the weather.",
                "parameters": WEATHER.parameters,
                "strict": True,
            },
            # an open schema is closed for strict mode (the API's default is strict)
            {
                "type": "function",
                "name": "note",
                "parameters": {
                    **OPEN.parameters,
                    "additionalProperties": False,
                    "required": list(OPEN.parameters["properties"]),
                },
                "strict": True,
            },
        ],
        "text": {
            "format": {"type": "json_schema", "name": "Answer", "schema": SCHEMA, "strict": True}
        },
        "temperature": 0.1,
        "top_p": 0.9,
        "max_output_tokens": 200,
        "tool_choice": {"type": "function", "name": "get_weather"},
        "parallel_tool_calls": False,
    }


async def test_a_tool_call_round_trip(server: FakeServer) -> None:
    raw = '{"city": "Oslo", "unit": '  # cut off: kept exactly as the model produced it
    server.enqueue(Respond(200, rsp.response([rsp.call_item("call_9", "get_weather", raw)])))
    server.enqueue(Respond(200, rsp.response([rsp.message_item("18C.")])))
    p = provider(server)
    asked = await p.complete(ModelRequest(model="m", messages=HISTORY[1:2], tools=(WEATHER,)))
    assert asked.tool_calls == (ToolCall("call_9", "get_weather", raw),)  # id = call_id
    assert asked.finish_reason == "tool_calls"

    answer = Message("tool", "error: bad arguments", tool_call_id="call_9")
    history = (*HISTORY[1:2], asked.to_message(), answer)
    done = await p.complete(ModelRequest(model="m", messages=history, tools=(WEATHER,)))
    assert done.content == "18C."
    assert server.requests[1].json()["input"][1:] == [
        {"type": "function_call", "call_id": "call_9", "name": "get_weather", "arguments": raw},
        {"type": "function_call_output", "call_id": "call_9", "output": "error: bad arguments"},
    ]


async def test_stream_text_with_usage_and_cached_tokens(server: FakeServer) -> None:
    tokens = rsp.usage(1500, 6, cached=1024)
    server.enqueue(Stream(rsp.text_stream(["It is ", "18C ", "in Oslo."], usage_tokens=tokens)))
    texts, final = await collect(provider(server), ModelRequest(model="m", messages=HISTORY[1:2]))
    assert texts == ["It is ", "18C ", "in Oslo."]
    assert (final.content, final.finish_reason, final.model) == (
        "It is 18C in Oslo.",
        "stop",
        rsp.MODEL,
    )
    usage = final.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) == (1500, 6, 1024)
    assert usage.requests == 1
    body = server.requests[0].json()
    assert (body["stream"], body["store"]) == (True, False)
    assert body["include"] == ["reasoning.encrypted_content"]


async def test_stream_assembles_tool_calls_split_across_tcp_chunks(server: FakeServer) -> None:
    calls = [
        ("call_A", "get_weather", {"city": "Oslo"}),
        ("call_B", "get_weather", {"city": "Rome"}),
    ]
    server.enqueue(Stream(rsp.tool_stream(calls), chunk_size=11))
    request = ModelRequest(model="m", messages=HISTORY[1:2], tools=(WEATHER,))
    texts, final = await collect(provider(server), request)
    assert texts == []
    assert final.tool_calls == (
        ToolCall("call_A", "get_weather", '{"city": "Oslo"}'),
        ToolCall("call_B", "get_weather", '{"city": "Rome"}'),
    )
    assert final.finish_reason == "tool_calls"


async def test_a_stream_whose_final_response_omits_the_output(server: FakeServer) -> None:
    # Some compatible servers leave response.completed's output empty: the finished items count.
    events = rsp.text_stream(["Hi", "!"])
    completed = rsp.response([], status="incomplete") | {"status": "completed", "output": []}
    events[-1] = sse(
        {"type": "response.completed", "response": completed}, event="response.completed"
    )
    server.enqueue(Stream(events))
    _, final = await collect(provider(server), ModelRequest(model="m", messages=HISTORY[1:2]))
    assert final.content == "Hi!"


async def test_an_open_output_schema_is_closed_for_strict_mode(server: FakeServer) -> None:
    server.enqueue(Respond(200, rsp.response([rsp.message_item('{"n": 1}')])))
    server.enqueue(Respond(200, rsp.response([rsp.message_item('{"n": 1}')])))
    loose = {"type": "object", "properties": {"n": {"type": "integer"}}}
    request = ModelRequest(model="m", messages=HISTORY[1:2], output_schema=loose)
    await provider(server).complete(request)
    closed = {**loose, "additionalProperties": False, "required": ["n"]}
    assert server.requests[0].json()["text"] == {
        "format": {"type": "json_schema", "name": "output", "schema": closed, "strict": True}
    }
    as_given = ModelRequest(
        model="m",
        messages=HISTORY[1:2],
        output_schema=loose,
        settings=ModelSettings(strict_schemas=False),
    )
    await provider(server).complete(as_given)
    assert server.requests[1].json()["text"] == {
        "format": {"type": "json_schema", "name": "output", "schema": loose, "strict": False}
    }


async def test_attachments_in_a_user_message_and_a_tool_result(server: FakeServer) -> None:
    server.enqueue(Respond(200, rsp.response()))
    png, pdf = (base64.b64encode(data).decode() for data in (PNG, PDF))
    user = Message(
        "user",
        "What are these?",
        attachments=(
            Attachment("image/png", data=PNG),
            Attachment("image/jpeg", url="https://example.com/cat.jpg"),
            Attachment("application/pdf", data=PDF, name="report.pdf"),
            Attachment("application/pdf", url="https://example.com/terms.pdf"),
            Attachment("text/plain", data="notes ✓".encode(), name="notes.txt"),
        ),
    )
    call = Message("assistant", tool_calls=(ToolCall("call_s", "screenshot", "{}"),))
    shot = Message(
        "tool", "", tool_call_id="call_s", attachments=(Attachment("image/png", data=PNG),)
    )
    await provider(server).complete(ModelRequest(model="m", messages=(user, call, shot)))
    sent = server.requests[0].json()["input"]
    image = {"type": "input_image", "image_url": f"data:image/png;base64,{png}", "detail": "auto"}
    assert sent[0] == {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What are these?"},
            image,
            {"type": "input_image", "image_url": "https://example.com/cat.jpg", "detail": "auto"},
            {
                "type": "input_file",
                "filename": "report.pdf",
                "file_data": f"data:application/pdf;base64,{pdf}",
            },
            {"type": "input_file", "file_url": "https://example.com/terms.pdf"},
            {"type": "input_text", "text": "[notes.txt]\nnotes ✓"},
        ],
    }
    assert sent[2] == {"type": "function_call_output", "call_id": "call_s", "output": [image]}


async def test_audio_is_refused_before_sending(server: FakeServer) -> None:
    message = Message("user", "Listen.", attachments=(Attachment("audio/wav", data=b"RIFF"),))
    with pytest.raises(UserError, match="takes no audio"):
        await provider(server).complete(ModelRequest(model="m", messages=(message,)))
    assert server.requests == []


async def test_a_reply_without_usage_counts_as_unreported(server: FakeServer) -> None:
    reply = rsp.response([rsp.message_item("ok")])
    reply["usage"] = None
    server.enqueue(Respond(200, reply))
    response = await provider(server).complete(ModelRequest(model="m", messages=HISTORY[1:2]))
    assert response.usage is None


@pytest.mark.parametrize("streaming", [False, True])
async def test_prompt_cache_key_is_passed_through(server: FakeServer, streaming: bool) -> None:
    server.enqueue(Stream(rsp.text_stream(["ok"])) if streaming else Respond(200, rsp.response()))
    settings: Any = {"prompt_cache_key": "conversation-42"}
    request = ModelRequest(model="m", messages=HISTORY[1:2], settings=settings)
    if streaming:
        await collect(provider(server), request)
    else:
        await provider(server).complete(request)
    assert server.requests[0].json()["prompt_cache_key"] == "conversation-42"


# --- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (400, rsp.error_body("Invalid 'input[0]'.", type="invalid_request_error"), BadRequestError),
        (
            400,
            rsp.error_body(
                "Your input exceeds the context window of this model.",
                type="invalid_request_error",
                code="context_length_exceeded",
            ),
            ContextWindowExceededError,
        ),
        (
            401,
            rsp.error_body(f"Incorrect API key provided: {API_KEY}.", type="x"),
            AuthenticationError,
        ),
        (429, rsp.error_body("Rate limit reached.", type="tokens"), RateLimitError),
        (500, rsp.error_body("The server had an error.", type="server_error"), ProviderError),
    ],
)
async def test_http_errors(
    server: FakeServer, streaming: bool, status: int, body: Any, expected: type[Exception]
) -> None:
    server.enqueue(Respond(status, body, {"retry-after-ms": "10"}))
    request = ModelRequest(model="m", messages=HISTORY[1:2])
    with pytest.raises(expected) as info:
        if streaming:
            await collect(provider(server), request)
        else:
            await provider(server).complete(request)
    error = info.value
    assert isinstance(error, ProviderError)
    assert (type(error), error.status_code, error.provider) == (
        expected,
        status,
        "openai-responses",
    )
    assert API_KEY not in str(error) and API_KEY not in repr(error.body)


async def assert_interrupted(
    p: OpenAIResponsesProvider, texts: list[str]
) -> StreamInterruptedError:
    seen: list[str] = []
    with pytest.raises(StreamInterruptedError) as info:
        async for item in p.stream(ModelRequest(model="m", messages=HISTORY[1:2])):
            assert isinstance(item, TextDelta), "no reply may come from a broken stream"
            seen.append(item.text)
    assert seen == texts
    return info.value


async def test_a_dropped_stream_raises_and_commits_nothing(server: FakeServer) -> None:
    server.enqueue(Stream(rsp.text_stream(["Once ", "upon"])[:5], end="drop"))
    error = await assert_interrupted(provider(server, max_retries=2), ["Once "])
    assert "connection dropped" in str(error)
    assert len(server.requests) == 1


async def test_a_stream_that_ends_before_response_completed(server: FakeServer) -> None:
    server.enqueue(Stream(rsp.text_stream(["Once ", "upon"])[:-1]))
    error = await assert_interrupted(provider(server), ["Once ", "upon"])
    assert "ended before response.completed" in str(error)


async def test_a_response_failed_event(server: FakeServer) -> None:
    failed = {"code": "server_error", "message": "The model crashed."}
    events = rsp.stream(rsp.text_events(0, ["Once "]), terminal="response.failed", error=failed)
    server.enqueue(Stream(events))
    error = await assert_interrupted(provider(server), ["Once "])
    assert "The model crashed." in str(error)
    assert error.body == failed


async def test_an_error_event(server: FakeServer) -> None:
    error_event = {"type": "error", "code": "overloaded", "message": "Overloaded", "param": None}
    error_sse = sse(error_event | {"sequence_number": 5}, event="error")
    events = [*rsp.text_stream(["Once "])[:5], error_sse]
    server.enqueue(Stream(events))
    error = await assert_interrupted(provider(server), ["Once "])
    assert "Overloaded" in str(error)
    assert error.body is not None and error.body["code"] == "overloaded"


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("server_error", ProviderError),
        ("rate_limit_exceeded", RateLimitError),
        ("invalid_prompt", BadRequestError),
    ],
)
async def test_a_failed_whole_response(
    server: FakeServer, code: str, expected: type[Exception]
) -> None:
    failed = {"code": code, "message": f"failed with {code} (key {API_KEY})"}
    server.enqueue(Respond(200, rsp.response([], status="failed", error=failed)))
    with pytest.raises(ProviderError) as info:
        await provider(server).complete(ModelRequest(model="m", messages=HISTORY[1:2]))
    error = info.value
    assert type(error) is expected
    assert f"failed with {code} (key ***)" in str(error)
    assert error.body == {"code": code, "message": f"failed with {code} (key ***)"}
    assert API_KEY not in str(error.__cause__)


@pytest.mark.parametrize("streaming", [False, True])
async def test_an_incomplete_response_is_a_reply_cut_at_the_length(
    server: FakeServer, streaming: bool
) -> None:
    # As Chat Completions has it: the partial reply, finish_reason "length"; not an error.
    if streaming:
        events = rsp.stream(
            rsp.text_events(0, ["It was a dark ", "and"]),
            terminal="response.incomplete",
            incomplete_reason="max_output_tokens",
        )
        server.enqueue(Stream(events))
    else:
        reply = rsp.response(
            [rsp.message_item("It was a dark and")],
            status="incomplete",
            incomplete_reason="max_output_tokens",
        )
        server.enqueue(Respond(200, reply))
    request = ModelRequest(model="m", messages=HISTORY[1:2], settings={"max_tokens": 5})
    p = provider(server)
    if streaming:
        _, response = await collect(p, request)
    else:
        response = await p.complete(request)
    assert (response.content, response.finish_reason) == ("It was a dark and", "length")
    assert server.requests[0].json()["max_output_tokens"] == 5


async def test_a_model_that_refuses_encrypted_reasoning_says_what_to_do(server: FakeServer) -> None:
    refused = rsp.error_body(
        "Encrypted content is not supported with this model.",
        type="invalid_request_error",
        param="include",
    )
    server.enqueue(Respond(400, refused), Respond(200, rsp.response()))
    request = ModelRequest(model="gpt-4.1-mini", messages=HISTORY[1:2])
    with pytest.raises(BadRequestError, match="encrypted_reasoning=False") as info:
        await provider(server).complete(request)
    assert info.value.status_code == 400
    await provider(server, encrypted_reasoning=False).complete(request)
    assert "include" not in server.requests[1].json()


# --- construction -------------------------------------------------------------------------


async def test_key_and_url_come_from_the_environment(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-1234")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    server.enqueue(Respond(200, rsp.response()))
    p = OpenAIResponsesProvider(max_retries=0)
    assert (await p.complete(ModelRequest(model="m", messages=HISTORY[1:2]))).content == "Hello!"
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-env-1234"


@pytest.mark.parametrize("key", [None, ""])
async def test_a_missing_key_fails_before_any_request(server: FakeServer, key: str | None) -> None:
    p = OpenAIResponsesProvider(api_key=key, base_url=server.url + "/v1")
    request = ModelRequest(model="m", messages=HISTORY[1:2])
    with pytest.raises(AuthenticationError, match="OPENAI_API_KEY"):
        await p.complete(request)
    with pytest.raises(AuthenticationError):
        await collect(p, request)
    assert server.requests == []


@pytest.mark.parametrize("options", [{"bogus_option": 1}, {"max_retries": -1}, {"timeout": 0}])
def test_bad_options_fail_at_construction(options: dict[str, Any]) -> None:
    with pytest.raises(UserError):
        OpenAIResponsesProvider(api_key=API_KEY, **options)


def test_repr_never_shows_the_key() -> None:
    p = OpenAIResponsesProvider(api_key=API_KEY, base_url="http://user:pw@127.0.0.1:9/v1")
    assert API_KEY not in repr(p) and "pw" not in repr(p)
    assert "127.0.0.1:9" in repr(p)


async def test_client_options_reach_the_client(server: FakeServer) -> None:
    server.enqueue(Respond(200, rsp.response()))
    p = provider(server, default_headers={"X-Trace": "t-1"})
    await p.complete(ModelRequest(model="m", messages=HISTORY[1:2]))
    assert server.requests[0].headers["x-trace"] == "t-1"
    await p.aclose()


def test_the_registry_name_and_the_lazy_export() -> None:
    assert "openai-responses" in aniki.providers.available_providers()
    assert isinstance(get_provider("openai-responses"), OpenAIResponsesProvider)
    assert aniki.providers.OpenAIResponsesProvider is OpenAIResponsesProvider
    assert OpenAIResponsesProvider.name == "openai-responses"
