"""Scrubbing the API key out of errors only where it can be a secret.

A local server's placeholder key (``api_key="x"``, ``"EMPTY"``, ``"none"``) is no secret:
scrubbing it used to turn "maximum context length" into "ma***imum conte***t length" and
lose the ``ContextWindowExceededError`` mapping. The error is now classified first, and only
a key that can be a real one is scrubbed, so a real key still never appears.
"""

from __future__ import annotations

import traceback
from typing import Any

import pytest

from aniki import Agent, AnikiError, BadRequestError, ContextWindowExceededError, Runner
from aniki._secrets import is_secret, redact, scrub

from ..providers.fake_server import FakeServer, Respond
from ..providers.vendors import Vendor

REAL_KEY = "sk-proj-9f8e7d6c5b4a3f2e1d0c"
PLACEHOLDERS = ["x", "sk", "none", "EMPTY", "-", "not-needed", "sk-no-key-required"]
CONTEXT_TEXT = (
    "This model's maximum context length is 4096 tokens. However, your messages resulted "
    "in 5012 tokens (excess: 916). Please reduce the length of the messages."
)


def context_body(text: str) -> dict[str, Any]:
    return {"error": {"message": text, "type": "invalid_request_error", "param": "messages"}}


def all_text(error: BaseException) -> str:
    return "".join(traceback.format_exception(error)) + repr(error) + repr(error.body)  # type: ignore[attr-defined]


async def fail_once(vendor: Vendor, server: FakeServer, api_key: str, reply: Respond) -> AnikiError:
    base = server.url + "/v1" if vendor.name == "openai" else server.url
    provider = vendor.make(api_key=api_key, base_url=base, max_retries=0, timeout=2)
    server.enqueue(reply)
    with pytest.raises(AnikiError) as info:
        await Runner().run(Agent("A", model="m", provider=provider), message="hi")
    return info.value


@pytest.mark.parametrize("api_key", [*PLACEHOLDERS, REAL_KEY])
async def test_a_context_error_is_mapped_and_its_text_kept_whatever_the_key(
    server: FakeServer, vendor: Vendor, api_key: str
) -> None:
    error = await fail_once(vendor, server, api_key, Respond(400, context_body(CONTEXT_TEXT)))
    assert isinstance(error, ContextWindowExceededError), error
    assert CONTEXT_TEXT in str(error)
    assert CONTEXT_TEXT in repr(error.body)

    other = "the field 'max_tokens' expects an integer; example: max_tokens=512"
    error = await fail_once(vendor, server, api_key, Respond(400, context_body(other)))
    assert type(error) is BadRequestError
    assert other in str(error)


async def test_a_real_key_is_scrubbed_after_the_error_is_classified(
    server: FakeServer, vendor: Vendor
) -> None:
    echoed = f"{CONTEXT_TEXT} (request made with key {REAL_KEY})"
    error = await fail_once(vendor, server, REAL_KEY, Respond(400, context_body(echoed)))
    assert isinstance(error, ContextWindowExceededError)
    assert "maximum context length is 4096 tokens" in str(error)
    assert REAL_KEY not in all_text(error)
    # A key that is itself the phrase the mapping looks for: classified before it is hidden.
    phrase_key = "maximum context length"
    error = await fail_once(vendor, server, phrase_key, Respond(400, context_body(CONTEXT_TEXT)))
    assert isinstance(error, ContextWindowExceededError)
    assert phrase_key not in all_text(error)


@pytest.mark.parametrize("api_key", [*PLACEHOLDERS, "", None, "       x", "1234567"])
def test_what_cannot_be_a_secret_is_left_alone(api_key: str | None) -> None:
    assert not is_secret(api_key)
    text = "maximum context length exceeded: x - sk none EMPTY not-needed"
    assert redact(text, api_key) == text
    exc = ValueError(text)
    assert scrub(exc, api_key).args == (text,)


@pytest.mark.parametrize("api_key", [REAL_KEY, "12345678", "sk-ant-api03-abcdefgh"])
def test_what_can_be_a_secret_is_scrubbed_everywhere(api_key: str) -> None:
    assert is_secret(api_key)
    body = {"error": {"message": f"bad key {api_key}", "list": [api_key, 1]}}
    assert api_key not in repr(redact(body, api_key))
    inner = KeyError(f"echo {api_key}")
    outer = ValueError(f"wrapped {api_key}")
    outer.__cause__ = inner
    scrub(outer, api_key)
    assert api_key not in "".join(traceback.format_exception(outer))
