"""The error mapping shared by every provider, without any HTTP."""

from __future__ import annotations

import email.utils

import pytest

from aniki import (
    AuthenticationError,
    BadRequestError,
    ContextWindowExceededError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
)
from aniki._secrets import redact
from aniki.providers._errors import (
    ErrorContext,
    context_window_exceeded,
    error_for_status,
    parse_retry_after,
)

CTX = ErrorContext(
    provider="openai", env_var="OPENAI_API_KEY", base_url="http://x/v1", secret="sk-SECRET"
)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (401, AuthenticationError),
        (403, AuthenticationError),
        (429, RateLimitError),
        (408, ProviderTimeoutError),
        (400, BadRequestError),
        (404, BadRequestError),
        (409, BadRequestError),
        (422, BadRequestError),
        (500, ProviderError),
        (502, ProviderError),
        (503, ProviderError),
        (529, ProviderError),
    ],
)
def test_status_maps_to_error_class(status: int, expected: type[ProviderError]) -> None:
    body = {"error": {"message": "the server says why", "type": "x"}}
    error = error_for_status(status, body, headers={}, ctx=CTX)
    assert type(error) is expected
    assert error.status_code == status
    assert error.provider == "openai"
    assert error.body == body
    assert "the server says why" in str(error)


def test_authentication_error_names_the_variable() -> None:
    error = error_for_status(401, None, headers=None, ctx=CTX)
    assert isinstance(error, AuthenticationError)
    assert error.env_var == "OPENAI_API_KEY"
    assert "OPENAI_API_KEY" in str(error)


def test_rate_limit_error_carries_retry_after() -> None:
    error = error_for_status(429, None, headers={"Retry-After": "12"}, ctx=CTX)
    assert isinstance(error, RateLimitError)
    assert error.retry_after == 12.0
    assert error_for_status(429, None, headers={}, ctx=CTX).retry_after is None  # type: ignore[attr-defined]


def test_the_key_is_scrubbed_from_message_and_body() -> None:
    body = {"error": {"message": "Incorrect API key provided: sk-SECRET.", "extra": ["sk-SECRET"]}}
    error = error_for_status(401, body, headers={}, ctx=CTX)
    assert "sk-SECRET" not in str(error)
    assert "sk-SECRET" not in repr(error.body)
    assert error.body == {
        "error": {"message": "Incorrect API key provided: ***.", "extra": ["***"]}
    }


def test_redact_leaves_other_values_alone() -> None:
    assert redact({"n": 1, "s": "a sk-SECRET b"}, "sk-SECRET") == {"n": 1, "s": "a *** b"}
    assert redact("sk-SECRET", None) == "sk-SECRET"


CONTEXT_BODIES = {
    "openai": {
        "message": "This model's maximum context length is 128000 tokens. However, your "
        "messages resulted in 130011 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    },
    "openai code only": {"message": "Input too long.", "code": "context_length_exceeded"},
    "vllm": {
        "object": "error",
        "message": "This model's maximum context length is 4096 tokens. However, you requested "
        "5000 tokens (4000 in the messages, 1000 in the completion).",
        "type": "BadRequestError",
        "code": 400,
    },
    "llama.cpp": {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 5000,
            "n_ctx": 4096,
        }
    },
    "anthropic": {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 208310 tokens > 200000 maximum",
        },
    },
    "anthropic max_tokens": {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "input length and `max_tokens` exceed context limit: 198000 + 8192 > "
            "200000, decrease input length or `max_tokens` and try again",
        },
    },
    "lm studio": {
        "error": "Trying to keep the first 5120 tokens when context the overflows. However, "
        "the model is loaded with context length of only 4096 tokens, which is not enough."
    },
    "ollama": {"error": {"message": "input length exceeds the context length"}},
}


@pytest.mark.parametrize("server", list(CONTEXT_BODIES))
def test_context_window_errors_are_recognised(server: str) -> None:
    error = error_for_status(400, CONTEXT_BODIES[server], headers={}, ctx=CTX)
    assert isinstance(error, ContextWindowExceededError)
    assert isinstance(error, BadRequestError)


@pytest.mark.parametrize(
    "message",
    [
        "Invalid value for 'temperature': expected a number.",
        "max_tokens is too large: 100000. This model supports at most 16384 completion tokens.",
        "tool_choice is only allowed when tools are specified",
        "messages: roles must alternate between user and assistant",
    ],
)
def test_other_bad_requests_are_not_context_errors(message: str) -> None:
    body = {"error": {"message": message, "type": "invalid_request_error"}}
    assert not context_window_exceeded(body)
    assert type(error_for_status(400, body, headers={}, ctx=CTX)) is BadRequestError


def test_a_context_message_on_a_server_error_is_not_a_bad_request() -> None:
    body = {"error": {"message": "maximum context length exceeded while loading"}}
    assert type(error_for_status(500, body, headers={}, ctx=CTX)) is ProviderError


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "2"}, 2.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"Retry-After": "soon"}, None),
        ({"Retry-After": "-3"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str] | None, seconds: float | None) -> None:
    assert parse_retry_after(headers) == seconds


def test_parse_retry_after_http_date() -> None:
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after({"Retry-After": date}, now=now) == pytest.approx(30.0)
    past = email.utils.formatdate(now - 30, usegmt=True)
    assert parse_retry_after({"Retry-After": past}, now=now) == 0.0
