"""Failures carry no message contents into spans unless ``include_content=True``.

An error's text can quote the conversation: pydantic's ``input_value=`` in the validation
error chained to an :class:`~aniki.OutputValidationError` is the model's reply, a JSON-schema
error names the value it rejected, and a provider's 400 body may echo the request it refused
(the prompt, the instructions, tool arguments and results). These tests fail runs in those
ways, against a real HTTP server for the provider, and read every span's name, attributes,
events, status and links.
"""

from __future__ import annotations

import json
from itertools import count
from typing import TYPE_CHECKING, Any

import pydantic
import pytest

from aniki import Agent, BadRequestError, OutputValidationError, Runner, tool
from aniki.testing import MockProvider
from tests.core.helpers import MODES, drive
from tests.providers.fake_server import FakeServer, RecordedRequest, Reply, Respond, Stream
from tests.providers.vendors import RESPONSES, VENDORS, Vendor

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from .spans import Spans

SECRET = "private"
"""Every piece of content in these tests holds this word; no span may."""

CALL = ("call_p1", "lookup", {"city": "private-city"})


@tool
def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: The city.
    """
    return f"private-result about {city}"


class Forecast(pydantic.BaseModel):
    city: str
    degrees: int


ENUM_SCHEMA = {
    "type": "object",
    "properties": {"city": {"enum": ["Oslo", "Bergen"]}},
    "required": ["city"],
}


def leaks(spans: list[ReadableSpan]) -> list[str]:
    """Where ``spans`` hold :data:`SECRET`: in a name, attribute, event (and its attributes),
    status description or link."""
    found: list[str] = []
    for span in spans:
        places: list[tuple[str, Any]] = [
            ("name", span.name),
            ("status", span.status.description),
            ("attributes", dict(span.attributes or {})),
        ]
        places += [(f"event {e.name}", [e.name, dict(e.attributes or {})]) for e in span.events]
        places += [("link", [str(k.context), dict(k.attributes or {})]) for k in span.links]
        found += [
            f"{span.name}: {where}"
            for where, value in places
            if SECRET in json.dumps(value, default=str)
        ]
    return found


def echoing(vendor: Vendor, mode: str) -> FakeServer:
    """A server that first asks for a tool call, then rejects the next request with a 400
    whose body quotes the whole request, as some compatible servers do."""
    calls = count()

    def reply(request: RecordedRequest) -> Reply:
        if next(calls) == 0:
            if mode == "stream":
                return Stream(vendor.tool_events([CALL]))
            return Respond(200, vendor.tool_reply([CALL]))
        said = f"invalid request: {request.body.decode()}"
        return Respond(400, {"error": {"message": said, "type": "invalid_request_error"}})

    return FakeServer(handler=reply)


async def fail_against_echoing_server(vendor: Vendor, mode: str) -> str:
    """Run an agent whose second model call is rejected; return what the server was sent."""
    async with echoing(vendor, mode) as server:
        agent = Agent(
            "Keeper",
            "private-instructions: keep secrets.",
            model="some-model",
            provider=vendor.provider(server.url),
            tools=[lookup],
        )
        with pytest.raises(BadRequestError) as raised:
            await drive(mode, Runner(), agent, message="private-prompt: hello")
    assert "private-result about private-city" in str(raised.value)  # the echo arrived
    return server.requests[-1].body.decode()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("vendor", [*VENDORS, RESPONSES], ids=lambda vendor: vendor.name)
async def test_a_rejected_request_echoed_by_the_server_stays_out_of_spans(
    vendor: Vendor, mode: str, spans: Spans
) -> None:
    await fail_against_echoing_server(vendor, mode)

    assert len(spans.named("chat ")) == 2
    assert len(spans.named("execute_tool ")) == 1
    assert leaks(spans.all()) == []
    run = spans.one("invoke_agent ")
    assert run.attributes["error.type"] == "aniki.errors.BadRequestError"
    assert run.status.status_code.name == "ERROR"
    assert "HTTP 400" in run.status.description  # what failed is still told, not what was sent
    failed_chat = spans.named("chat ")[-1]
    assert failed_chat.attributes["error.type"] == "aniki.errors.BadRequestError"
    (event,) = failed_chat.events
    assert event.attributes["exception.type"] == "aniki.errors.BadRequestError"
    assert "exception.stacktrace" in event.attributes


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("schema", [Forecast, ENUM_SCHEMA], ids=["pydantic", "json-schema"])
async def test_a_reply_that_fails_validation_stays_out_of_spans(
    schema: Any, mode: str, spans: Spans
) -> None:
    reply = '{"city": "private-town", "degrees": "private-degrees"}'
    provider = MockProvider([reply, reply])  # the reply and the one retry both fail
    agent = Agent(
        "Keeper",
        "private-instructions: keep secrets.",
        model="mock-model",
        provider=provider,
        output_schema=schema,
    )
    with pytest.raises(OutputValidationError) as raised:
        await drive(mode, Runner(), agent, message="private-prompt: hello")
    if schema is Forecast:
        assert "input_value='private-degrees'" in str(raised.value.__cause__)
    else:
        assert "private-town" in str(raised.value)

    assert leaks(spans.all()) == []
    run = spans.one("invoke_agent ")
    assert run.attributes["error.type"] == "aniki.errors.OutputValidationError"
    assert run.status.status_code.name == "ERROR"
    (event,) = run.events
    assert "exception.message" not in event.attributes


@pytest.mark.parametrize("mode", MODES)
async def test_include_content_keeps_the_error_text(mode: str, spans_with_content: Spans) -> None:
    vendor = VENDORS[0]
    sent = await fail_against_echoing_server(vendor, mode)

    run = spans_with_content.one("invoke_agent ")
    assert "private-prompt: hello" in run.status.description
    (event,) = run.events
    assert "private-result about private-city" in event.attributes["exception.message"]
    assert "private-instructions" in sent
