"""Message contents reach the spans only with ``include_content=True``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from aniki import Agent, Attachment, Message, ModelResponse, Reasoning, Runner, ToolCall, tool
from aniki.testing import MockProvider
from aniki.tracing._content import messages_json, reply_json
from tests.core.helpers import MODES, drive

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from .spans import Spans


@tool
def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: The city.
    """
    return f"private-result about {city}"


@tool
def leaky(city: str) -> str:
    """A tool whose error names what it was asked.

    Args:
        city: The city.
    """
    raise ValueError(f"no forecast for {city}")  # the city is what must stay out


def private_run(provider: MockProvider) -> Agent:
    provider.enqueue_response(
        "private-thought before the calls",
        tool_calls=[
            {"id": "c1", "name": "lookup", "arguments": {"city": "private-city-1"}},
            {"id": "c2", "name": "leaky", "arguments": {"city": "private-city-2"}},
        ],
    )
    provider.enqueue_response("private-reply: all done")
    return Agent(
        "Keeper",
        "private-instructions: keep secrets.",
        model="mock-model",
        provider=provider,
        tools=[lookup, leaky],
    )


def everything_recorded(spans: list[ReadableSpan]) -> str:
    """Every name, attribute, event and status text of ``spans``, as one text."""
    seen: list[Any] = []
    for span in spans:
        seen += [span.name, span.status.description, dict(span.attributes or {})]
        seen += [(event.name, dict(event.attributes or {})) for event in span.events]
    return json.dumps(seen, default=str)


@pytest.mark.parametrize("mode", MODES)
async def test_no_message_text_is_recorded_by_default(mode: str, spans: Spans) -> None:
    await drive(mode, Runner(), private_run(MockProvider()), message="private-prompt: hello")
    assert len(spans.all()) == 5
    recorded = everything_recorded(spans.all())
    assert "private" not in recorded
    assert "Keeper" in recorded and "lookup" in recorded  # names are no content
    failed = next(
        s for s in spans.named("execute_tool") if s.attributes["gen_ai.tool.name"] == "leaky"
    )
    assert failed.attributes["error.type"] == "ValueError"
    assert "exception.message" not in failed.events[0].attributes
    assert "exception.stacktrace" in failed.events[0].attributes


@pytest.mark.parametrize("mode", MODES)
async def test_include_content_records_messages_arguments_and_results(
    mode: str, spans_with_content: Spans
) -> None:
    spans = spans_with_content
    await drive(mode, Runner(), private_run(MockProvider()), message="private-prompt: hello")

    first, second = (span.attributes for span in spans.named("chat "))
    sent = json.loads(first["gen_ai.input.messages"])
    assert sent == [
        {
            "role": "system",
            "parts": [{"type": "text", "content": "private-instructions: keep secrets."}],
        },
        {"role": "user", "parts": [{"type": "text", "content": "private-prompt: hello"}]},
    ]
    (reply,) = json.loads(first["gen_ai.output.messages"])
    assert reply["finish_reason"] == "tool_calls"
    assert reply["parts"][0] == {"type": "text", "content": "private-thought before the calls"}
    assert reply["parts"][1] == {
        "type": "tool_call",
        "id": "c1",
        "name": "lookup",
        "arguments": {"city": "private-city-1"},
    }
    answers = [m for m in json.loads(second["gen_ai.input.messages"]) if m["role"] == "tool"]
    assert answers[0]["parts"] == [
        {
            "type": "tool_call_response",
            "id": "c1",
            "response": "private-result about private-city-1",
        }
    ]

    by_name = {s.attributes["gen_ai.tool.name"]: s for s in spans.named("execute_tool")}
    assert (
        by_name["lookup"].attributes["gen_ai.tool.call.arguments"] == '{"city": "private-city-1"}'
    )
    assert (
        by_name["lookup"].attributes["gen_ai.tool.call.result"]
        == "private-result about private-city-1"
    )
    error = by_name["leaky"].events[0].attributes
    assert error["exception.message"] == "no forecast for private-city-2"

    agent = spans.one("invoke_agent ").attributes
    assert agent["gen_ai.agent.description"] == "private-instructions: keep secrets."
    assert json.loads(agent["gen_ai.input.messages"])[0]["parts"][0]["content"] == (
        "private-prompt: hello"
    )
    (final,) = json.loads(agent["gen_ai.output.messages"])
    assert final == {
        "role": "assistant",
        "parts": [{"type": "text", "content": "private-reply: all done"}],
        "finish_reason": "stop",
    }


def test_messages_follow_the_conventions_parts() -> None:
    picture = Attachment("image/png", data=b"\x89PNG....", name="chart.png")
    linked = Attachment("application/pdf", url="https://example.com/report.pdf")
    messages = [
        Message("user", "Look at these", attachments=(picture, linked)),
        Message(
            "assistant",
            "",
            tool_calls=(ToolCall("c1", "read", "not json"),),
            reasoning=(Reasoning("I should read it"),),
        ),
        Message("tool", "It says hello", tool_call_id="c1"),
    ]
    assert json.loads(messages_json(messages)) == [
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": "Look at these"},
                {
                    "type": "attachment",
                    "size": 8,
                    "mime_type": "image/png",
                    "modality": "image",
                    "name": "chart.png",
                },
                {
                    "type": "uri",
                    "uri": "https://example.com/report.pdf",
                    "mime_type": "application/pdf",
                },
            ],
        },
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "I should read it"},
                {"type": "tool_call", "id": "c1", "name": "read", "arguments": "not json"},
            ],
        },
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": "c1", "response": "It says hello"}],
        },
    ]


def test_a_reply_says_why_it_finished() -> None:
    cut = ModelResponse(content="Once upon a", finish_reason="length")
    assert json.loads(reply_json(cut))[0]["finish_reason"] == "length"
    asking = ModelResponse(tool_calls=(ToolCall("c1", "read"),))
    assert json.loads(reply_json(asking))[0]["finish_reason"] == "tool_calls"
