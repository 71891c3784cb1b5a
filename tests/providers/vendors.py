"""One description per wire format, so that a behaviour is tested once for both vendors."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aniki.providers.anthropic import AnthropicProvider
from aniki.providers.base import Provider, ToolDefinition
from aniki.providers.openai import OpenAIProvider
from aniki.providers.openai_responses import OpenAIResponsesProvider

from . import anthropic_shapes as anth
from . import openai_shapes as oai
from . import responses_shapes as rsp
from .fake_server import RecordedRequest, Respond

WEATHER = ToolDefinition(
    "get_weather",
    "Look up the weather.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
"""A tool the model may call, as the HTTP tests offer it."""

API_KEY = "sk-test-4f9c2a77d1e04b8b"


@dataclass(frozen=True)
class Vendor:
    """How to talk to one wire format: build a provider, script replies, read requests."""

    name: str
    env_var: str
    path: str
    make: Callable[..., Provider]
    text_reply: Callable[[str], dict[str, Any]]
    tool_reply: Callable[[Sequence[tuple[str, str, dict[str, Any]]]], dict[str, Any]]
    text_events: Callable[[Sequence[str]], list[str]]
    tool_events: Callable[[Sequence[tuple[str, str, dict[str, Any]]]], list[str]]
    unfinished_events: Callable[[Sequence[str]], list[str]]
    """A text stream that ends cleanly but without the end-of-reply marker."""
    text_prefix: int
    """How many events of ``text_events`` come before the first text delta."""
    context_error: dict[str, Any]
    rate_limit_error: dict[str, Any]
    server_error: dict[str, Any]
    auth_error: dict[str, Any]

    def provider(self, server_url: str, **options: Any) -> Provider:
        options.setdefault("max_retries", 0)
        return self.make(api_key=API_KEY, base_url=self._base(server_url), **options)

    def _base(self, server_url: str) -> str:
        return server_url + "/v1" if self.name.startswith("openai") else server_url

    def sent_messages(self, request: RecordedRequest) -> list[dict[str, Any]]:
        body = request.json()
        messages: list[dict[str, Any]] = body["messages"]
        return messages

    def ok(self, text: str) -> Respond:
        return Respond(200, self.text_reply(text))

    def first_events(self, pieces: Sequence[str], count: int) -> list[str]:
        """The start of a text stream, up to and including its ``count``-th text delta."""
        return self.text_events(pieces)[: self.text_prefix + count]


def _openai_tools(calls: Sequence[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    return oai.completion(
        None, tool_calls=[oai.tool_call(i, n, json.dumps(a)) for i, n, a in calls]
    )


def _openai_tool_events(calls: Sequence[tuple[str, str, dict[str, Any]]]) -> list[str]:
    chunks = [oai.chunk({"role": "assistant", "content": None})]
    for index, (call_id, name, arguments) in enumerate(calls):
        raw = json.dumps(arguments)
        chunks.append(oai.chunk(oai.fragment(index, call_id=call_id, name=name)))
        chunks += [
            oai.chunk(oai.fragment(index, arguments=raw[i : i + 4])) for i in range(0, len(raw), 4)
        ]
    chunks += [oai.chunk(finish_reason="tool_calls"), oai.chunk(with_usage=(30, 12))]
    return oai.events(*chunks)


OPENAI = Vendor(
    name="openai",
    env_var="OPENAI_API_KEY",
    path="/v1/chat/completions",
    make=OpenAIProvider,
    text_reply=lambda text: oai.completion(text),
    tool_reply=_openai_tools,
    text_events=lambda pieces: oai.text_stream(pieces),
    tool_events=_openai_tool_events,
    unfinished_events=lambda pieces: oai.events(
        oai.chunk({"role": "assistant", "content": ""}),
        *(oai.chunk({"content": p}) for p in pieces),
        done=False,
    ),
    text_prefix=1,
    context_error=oai.error_body(
        "This model's maximum context length is 128000 tokens. However, your messages "
        "resulted in 131072 tokens. Please reduce the length of the messages.",
        type="invalid_request_error",
        code="context_length_exceeded",
        param="messages",
    ),
    rate_limit_error=oai.error_body(
        "Rate limit reached for gpt-4o-mini on tokens per min (TPM): Limit 200000.",
        type="tokens",
        code="rate_limit_exceeded",
    ),
    server_error=oai.error_body(
        "The server had an error while processing your request.", type="server_error"
    ),
    auth_error=oai.error_body(
        f"Incorrect API key provided: {API_KEY}. You can find your API key in your settings.",
        type="invalid_request_error",
        code="invalid_api_key",
    ),
)

ANTHROPIC = Vendor(
    name="anthropic",
    env_var="ANTHROPIC_API_KEY",
    path="/v1/messages",
    make=AnthropicProvider,
    text_reply=lambda text: anth.message([anth.text_block(text)]),
    tool_reply=lambda calls: anth.message([anth.tool_use_block(i, n, a) for i, n, a in calls]),
    text_events=lambda pieces: anth.text_stream(pieces),
    tool_events=lambda calls: anth.tool_stream(calls),
    unfinished_events=lambda pieces: anth.text_stream(pieces)[:-1],
    text_prefix=3,
    context_error=anth.error_body(
        "prompt is too long: 208310 tokens > 200000 maximum", type="invalid_request_error"
    ),
    rate_limit_error=anth.error_body(
        "This request would exceed the rate limit for your organization.", type="rate_limit_error"
    ),
    server_error=anth.error_body("Internal server error", type="api_error"),
    auth_error=anth.error_body(f"invalid x-api-key {API_KEY}", type="authentication_error"),
)

RESPONSES = Vendor(
    name="openai-responses",
    env_var="OPENAI_API_KEY",
    path="/v1/responses",
    make=OpenAIResponsesProvider,
    text_reply=lambda text: rsp.response([rsp.message_item(text)]),
    tool_reply=lambda calls: rsp.response(
        [rsp.call_item(i, n, json.dumps(a)) for i, n, a in calls]
    ),
    text_events=lambda pieces: rsp.text_stream(pieces),
    tool_events=rsp.tool_stream,
    unfinished_events=lambda pieces: rsp.text_stream(pieces)[:-1],
    text_prefix=4,
    context_error=rsp.error_body(
        "Your input exceeds the context window of this model. Please adjust your input and "
        "try again.",
        type="invalid_request_error",
        code="context_length_exceeded",
        param="input",
    ),
    rate_limit_error=OPENAI.rate_limit_error,
    server_error=OPENAI.server_error,
    auth_error=OPENAI.auth_error,
)

VENDORS = [OPENAI, ANTHROPIC]
"""The two wire formats every shared behaviour is tested on (the reliability suites too)."""

ALL_VENDORS = [OPENAI, ANTHROPIC, RESPONSES]
"""Every wire format, the Responses API included (the fault tests run on all three)."""
