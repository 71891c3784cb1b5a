"""``OpenAIProvider(compat=...)``: the request each server profile sends, detection, and the
errors a server's refusals become; the official client against the loopback fake server."""

from __future__ import annotations

import time
from typing import Any

import pytest

from aniki import (
    Attachment,
    BadRequestError,
    ContextWindowExceededError,
    Message,
    ModelRequest,
    ModelResponse,
    ProviderError,
    StreamInterruptedError,
    TextDelta,
    ToolCall,
    UserError,
)
from aniki.providers.openai import OpenAIProvider

from . import openai_shapes as oai
from .fake_server import FakeServer, RecordedRequest, Reply, Respond, Stall, Stream
from .vendors import API_KEY, WEATHER

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
NOTES = Attachment("text/plain", data=b"milk, eggs", name="notes.txt")
HISTORY = (
    Message("user", "Weather in Oslo?", attachments=(NOTES,)),
    Message("assistant", tool_calls=(ToolCall("call_1", "get_weather", '{"city":"Oslo"}'),)),
    Message("tool", "18C", tool_call_id="call_1"),
    Message("assistant", tool_calls=(ToolCall("call_2", "get_weather", "not json"),)),
    Message("tool", "bad arguments", tool_call_id="call_2"),
)
REQUEST = ModelRequest(
    model="m", messages=HISTORY, tools=(WEATHER,), output_schema=SCHEMA, settings={}
)
LLAMA_CONTEXT_ERROR = oai.error_body(
    "This model's maximum context length is 2048 tokens. However, you requested 3039 tokens "
    "(3031 in the messages, 8 in the completion). Please reduce the length of the messages.",
    type="invalid_request_error",
    code="context_length_exceeded",
    param="messages",
)
# What llama-cpp-python answers a json_schema response_format with (HTTP 500).
LLAMA_SCHEMA_REFUSAL = oai.error_body(
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
    "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}",
    type="internal_server_error",
)


def provider(server: FakeServer, **options: Any) -> OpenAIProvider:
    options.setdefault("max_retries", 0)
    return OpenAIProvider(api_key=API_KEY, base_url=server.url + "/v1", **options)


def models(owner: str) -> Respond:
    return Respond(
        200, {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": owner}]}
    )


async def sent(server: FakeServer, compat: str) -> dict[str, Any]:
    server.enqueue(Respond(200, oai.completion("ok")))
    p = provider(server, compat=compat)
    try:
        await p.complete(REQUEST)
    finally:
        await p.aclose()
    body: dict[str, Any] = server.requests[-1].json()
    return body


async def test_openai_and_vllm_send_openais_own_shape(server: FakeServer) -> None:
    for compat in ("openai", "vllm"):
        body = await sent(server, compat)
        user, first, _, second, _ = body["messages"]
        assert user["content"] == [
            {"type": "text", "text": "Weather in Oslo?"},
            {"type": "text", "text": "[notes.txt]\nmilk, eggs"},
        ]
        assert first["content"] is None
        assert second["tool_calls"][0]["function"]["arguments"] == "not json"
        assert body["response_format"]["type"] == "json_schema"
        assert body["response_format"]["json_schema"]["schema"]["required"] == ["n"]
        assert "tool_choice" not in body


async def test_llama_cpp_shape(server: FakeServer) -> None:
    body = await sent(server, "llama.cpp")
    user, first, tool, second, _ = body["messages"]
    assert user["content"] == "Weather in Oslo?\n\n[notes.txt]\nmilk, eggs"
    assert first["content"] == "" and first["tool_calls"][0]["id"] == "call_1"
    assert tool == {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
    assert second["tool_calls"][0]["function"]["arguments"] == "not json"
    assert body["response_format"] == {
        "type": "json_object",
        "schema": body["response_format"]["schema"],
    }
    assert body["response_format"]["schema"]["properties"] == {"n": {"type": "integer"}}
    # llama-cpp-python's chatml-function-calling leaves tools out without a tool_choice.
    assert body["tool_choice"] == "auto"


async def test_a_tool_choice_that_was_set_is_kept(server: FakeServer) -> None:
    server.enqueue(Respond(200, oai.completion("ok")))
    p = provider(server, compat="llama.cpp")
    request = ModelRequest(
        model="m", messages=HISTORY[:1], tools=(WEATHER,), settings={"tool_choice": "none"}
    )
    await p.complete(request)
    await p.aclose()
    assert server.requests[0].json()["tool_choice"] == "none"


async def test_ollama_shape(server: FakeServer) -> None:
    body = await sent(server, "ollama")
    user, first, _, second, _ = body["messages"]
    assert user["content"] == "Weather in Oslo?\n\n[notes.txt]\nmilk, eggs"
    assert first["content"] == ""
    # Ollama parses arguments and refuses what is not JSON ("invalid tool call arguments").
    assert second["tool_calls"][0]["function"]["arguments"] == '{"raw_arguments": "not json"}'
    assert first["tool_calls"][0]["function"]["arguments"] == '{"city":"Oslo"}'
    assert body["response_format"]["type"] == "json_schema"
    assert "tool_choice" not in body


async def test_images_keep_their_parts(server: FakeServer) -> None:
    image = Attachment("image/png", url="https://example.com/a.png")
    server.enqueue(Respond(200, oai.completion("ok")))
    p = provider(server, compat="llama.cpp")
    await p.complete(
        ModelRequest(model="m", messages=(Message("user", "What?", attachments=(image,)),))
    )
    await p.aclose()
    content = server.requests[0].json()["messages"][0]["content"]
    assert [part["type"] for part in content] == ["text", "image_url"]


def test_a_bad_compat_is_refused() -> None:
    with pytest.raises(UserError, match=r"compat must be one of 'openai', 'llama\.cpp'"):
        OpenAIProvider(api_key="k", base_url="http://127.0.0.1:1/v1", compat="llamacpp")  # type: ignore[arg-type]


# --- detection ----------------------------------------------------------------------------


def answering(models_reply: Reply) -> Any:
    def handler(request: RecordedRequest) -> Reply:
        if request.method == "GET":
            return models_reply
        return Respond(200, oai.completion("ok"))

    return handler


@pytest.mark.parametrize(
    ("owner", "expected"),
    [("me", "llama.cpp"), ("llamacpp", "llama.cpp"), ("vllm", "vllm"), ("library", "ollama"),
     ("system", "openai")],
)  # fmt: skip
async def test_auto_asks_the_server_once(owner: str, expected: str) -> None:
    async with FakeServer(answering(models(owner))) as server:
        p = provider(server, compat="auto")
        assert p.profile is None
        await p.complete(REQUEST)
        await p.complete(REQUEST)
        await p.aclose()
    assert [(r.method, r.path) for r in server.requests] == [
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/chat/completions"),
    ]
    assert p.profile is not None and p.profile.name == expected
    schema_type = server.requests[1].json()["response_format"]["type"]
    assert schema_type == ("json_object" if expected == "llama.cpp" else "json_schema")


@pytest.mark.parametrize(
    "reply",
    [Respond(404, {"error": "not found"}), Respond(200, b"<html>hi</html>"),
     Respond(200, {"object": "list"})],
)  # fmt: skip
async def test_a_server_that_does_not_say_is_openai(reply: Reply) -> None:
    async with FakeServer(answering(reply)) as server:
        p = provider(server, compat=None)
        assert (await p.complete(REQUEST)).content == "ok"
        await p.aclose()
    assert p.profile is not None and p.profile.name == "openai"


async def test_detection_is_bounded_by_the_timeout() -> None:
    async with FakeServer(answering(Stall())) as server:
        p = provider(server, compat="auto", timeout=0.5)
        started = time.monotonic()
        assert (await p.complete(REQUEST)).content == "ok"
        assert time.monotonic() - started < 5
        await p.complete(REQUEST)  # not asked again
        await p.aclose()
    assert [r.method for r in server.requests] == ["GET", "POST", "POST"]


async def test_a_server_that_cannot_be_reached_is_asked_again(server: FakeServer) -> None:
    from .fake_server import closed_port

    p = OpenAIProvider(
        api_key=API_KEY, base_url=f"http://127.0.0.1:{await closed_port()}/v1", compat="auto",
        max_retries=0,
    )  # fmt: skip
    with pytest.raises(ProviderError, match="could not connect"):
        await p.complete(REQUEST)
    assert p.profile is None
    await p.aclose()


# --- refusals and empty streams -----------------------------------------------------------


async def test_a_refused_shape_is_not_retried_and_names_compat(server: FakeServer) -> None:
    server.enqueue(*[Respond(500, LLAMA_SCHEMA_REFUSAL)] * 3)
    p = provider(server, max_retries=2)
    with pytest.raises(BadRequestError) as caught:
        await p.complete(REQUEST)
    await p.aclose()
    assert len(server.requests) == 1
    message = str(caught.value)
    assert caught.value.status_code == 500
    assert "does not take response_format of json_schema" in message
    assert "compat='openai'" in message and "'llama.cpp'" in message


async def test_other_server_errors_are_still_retried(server: FakeServer) -> None:
    server.enqueue(
        Respond(500, oai.error_body("boom", type="server_error")),
        Respond(200, oai.completion("ok")),
    )
    p = provider(server, max_retries=1)
    assert (await p.complete(REQUEST)).content == "ok"
    await p.aclose()
    assert len(server.requests) == 2


async def test_a_list_of_parts_refused_names_compat(server: FakeServer) -> None:
    body = oai.error_body(
        'can only concatenate str (not "list") to str', type="internal_server_error"
    )
    server.enqueue(Respond(500, body))
    p = provider(server, max_retries=2)
    with pytest.raises(BadRequestError, match="message content as a list of parts"):
        await p.complete(REQUEST)
    await p.aclose()
    assert len(server.requests) == 1


async def collect(p: OpenAIProvider, request: ModelRequest) -> list[Any]:
    return [item async for item in p.stream(request)]


async def test_llama_cpp_empty_stream_over_the_context_window(server: FakeServer) -> None:
    # llama-cpp-python: a streamed request that fails answers 200 and an empty body.
    server.enqueue(Stream([]), Respond(400, LLAMA_CONTEXT_ERROR))
    p = provider(server, compat="llama.cpp")
    with pytest.raises(ContextWindowExceededError, match="maximum context length is 2048"):
        await collect(p, REQUEST)
    await p.aclose()
    assert [r.json().get("stream", False) for r in server.requests] == [True, False]


async def test_llama_cpp_empty_stream_then_an_answer(server: FakeServer) -> None:
    server.enqueue(Stream([]), Respond(200, oai.completion("It is 18C.")))
    p = provider(server, compat="llama.cpp")
    items = await collect(p, REQUEST)
    await p.aclose()
    assert items[0] == TextDelta("It is 18C.")
    assert isinstance(items[-1], ModelResponse) and items[-1].content == "It is 18C."


async def test_a_stream_that_started_is_not_sent_again(server: FakeServer) -> None:
    server.enqueue(Stream(oai.events(oai.chunk({"content": "Hel"}), done=False)))
    p = provider(server, compat="llama.cpp")
    with pytest.raises(StreamInterruptedError):
        await collect(p, REQUEST)
    await p.aclose()
    assert len(server.requests) == 1


async def test_openai_profile_empty_stream_is_interrupted(server: FakeServer) -> None:
    server.enqueue(Stream([]))
    p = provider(server)
    with pytest.raises(StreamInterruptedError):
        await collect(p, REQUEST)
    await p.aclose()
    assert len(server.requests) == 1
