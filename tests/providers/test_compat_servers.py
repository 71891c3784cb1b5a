"""``compat="auto"`` against loopback servers that answer as vLLM and Ollama do (from their
documentation and source): what they list at ``GET /v1/models``, what they refuse, and how
they report a prompt over the context window."""

from __future__ import annotations

import json
from typing import Any

import pytest

from aniki import (
    BadRequestError,
    ContextWindowExceededError,
    Message,
    ModelRequest,
    ModelResponse,
    ToolCall,
)

from . import openai_shapes as oai
from .fake_server import FakeServer, RecordedRequest, Reply, Respond, Stream
from .test_compat import HISTORY, SCHEMA, WEATHER, provider

CONTEXT = 4096


def _too_long(body: dict[str, Any]) -> bool:
    return len(json.dumps(body["messages"])) > CONTEXT * 4


def _answer(body: dict[str, Any]) -> Reply:
    text = '{"n": 3}' if "response_format" in body else "ok"
    if body.get("stream"):
        return Stream(oai.text_stream([text]))
    return Respond(200, oai.completion(text))


def vllm(request: RecordedRequest) -> Reply:
    """vLLM: its model list names itself; a prompt over ``max_model_len`` is an HTTP 400 in
    its own error shape, streamed or not (checked before anything is generated)."""
    if request.method == "GET":
        model = {"id": "qwen", "object": "model", "owned_by": "vllm", "max_model_len": CONTEXT}
        return Respond(200, {"object": "list", "data": [model]})
    body = request.json()
    if _too_long(body):
        message = (
            f"This model's maximum context length is {CONTEXT} tokens. However, you requested "
            "5000 tokens in the messages, Please reduce the length of the messages."
        )
        error = {"object": "error", "message": message, "type": "BadRequestError", "code": 400}
        return Respond(400, error)
    response_format = body.get("response_format")
    if response_format is not None and response_format["type"] not in (
        "json_schema",
        "json_object",
        "text",
    ):
        return Respond(400, {"object": "error", "message": "bad response_format", "code": 400})
    return _answer(body)


def _ollama_messages(body: dict[str, Any]) -> list[dict[str, Any]] | str:
    """The messages Ollama makes of a request (``openai.FromChatRequest``), or its refusal."""
    made: list[dict[str, Any]] = []
    for message in body["messages"]:
        for call in message.get("tool_calls") or ():
            try:
                parsed = json.loads(call["function"]["arguments"])
            except ValueError:
                return "invalid tool call arguments"
            if not isinstance(parsed, dict):
                return "invalid tool call arguments"
        content = message.get("content")
        if isinstance(content, list):  # every part a message of its own
            made += [{"role": message["role"], "content": part["text"]} for part in content]
        elif content is None and not message.get("tool_calls"):
            return "invalid message content type: <nil>"
        else:
            made.append(message)
    return made


def ollama(request: RecordedRequest) -> Reply:
    if request.method == "GET":
        model = {"id": "llama3.2:latest", "object": "model", "owned_by": "library"}
        return Respond(200, {"object": "list", "data": [model]})
    body = request.json()
    made = _ollama_messages(body)
    if isinstance(made, str):
        return Respond(400, {"error": {"message": made, "type": "invalid_request_error"}})
    if len(made) != len(body["messages"]):
        return Respond(500, {"error": {"message": "test: a message was split in parts"}})
    return _answer(body)


REQUEST = ModelRequest(
    model="m",
    messages=(
        *HISTORY,
        Message("assistant", tool_calls=(ToolCall("call_3", "get_weather", "[1, 2]"),)),
        Message("tool", "arguments must be an object", tool_call_id="call_3"),
    ),
    tools=(WEATHER,),
    output_schema=SCHEMA,
)


@pytest.mark.parametrize(("handler", "name"), [(vllm, "vllm"), (ollama, "ollama")])
@pytest.mark.parametrize("streamed", [False, True])
async def test_auto_talks_to_the_server(handler: Any, name: str, streamed: bool) -> None:
    async with FakeServer(handler) as server:
        p = provider(server, compat="auto")
        if streamed:
            items = [item async for item in p.stream(REQUEST)]
            reply = items[-1]
        else:
            reply = await p.complete(REQUEST)
        await p.aclose()
    assert isinstance(reply, ModelResponse) and reply.content == '{"n": 3}'
    assert p.profile is not None and p.profile.name == name
    sent = server.requests[-1].json()
    assert sent["response_format"]["type"] == "json_schema"


async def test_ollama_refuses_the_openai_shape() -> None:
    """What ``compat="auto"`` spares: Ollama refuses stored arguments that are not JSON."""
    async with FakeServer(ollama) as server:
        p = provider(server)  # compat="openai"
        with pytest.raises(BadRequestError, match="invalid tool call arguments"):
            await p.complete(REQUEST)
        await p.aclose()


@pytest.mark.parametrize("streamed", [False, True])
async def test_vllm_context_overflow(streamed: bool) -> None:
    long = ModelRequest(model="m", messages=(Message("user", "word " * CONTEXT * 2),))
    async with FakeServer(vllm) as server:
        p = provider(server, compat="vllm")
        with pytest.raises(ContextWindowExceededError, match="maximum context length is 4096"):
            if streamed:
                [item async for item in p.stream(long)]
            else:
                await p.complete(long)
        await p.aclose()
    assert len(server.requests) == 1
