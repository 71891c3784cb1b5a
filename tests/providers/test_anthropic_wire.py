"""Anthropic Messages mapping, request and reply, without any HTTP."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from aniki import Message, ModelRequest, ToolCall, ToolDefinition, UserError
from aniki.providers._anthropic_wire import (
    EventAccumulator,
    build_params,
    finish_reason,
    messages_to_wire,
    parse_message,
    tool_input,
)
from aniki.providers._stream import IncompleteStream, MalformedReply

from . import anthropic_shapes as anth

ADD = ToolDefinition("add", "Add two numbers.", {"type": "object", "properties": {}})


def call(call_id: str, arguments: str = "{}") -> ToolCall:
    return ToolCall(id=call_id, name="add", arguments=arguments)


def test_system_messages_go_to_system() -> None:
    system, wire = messages_to_wire((Message("system", "Be brief."), Message("user", "Hi")))
    assert system == "Be brief."
    assert wire == [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    history = (
        Message("system", "Be brief."),
        Message("user", "Hi"),
        Message("system", "Summary so far: none."),
    )
    system, wire = messages_to_wire(history)
    assert system == [
        {"type": "text", "text": "Be brief."},
        {"type": "text", "text": "Summary so far: none."},
    ]
    assert [turn["role"] for turn in wire] == ["user"]


def test_tool_calls_and_results_map_to_blocks() -> None:
    history = (
        Message("user", "Add twice."),
        Message("assistant", "Adding.", tool_calls=(call("t1", '{"a": 1}'), call("t2", "[2]"))),
        Message("tool", "1", tool_call_id="t1"),
        Message("tool", "2", tool_call_id="t2"),
        Message("user", "Thanks; and now?"),
    )
    system, wire = messages_to_wire(history)
    assert system is None
    assert wire == [
        {"role": "user", "content": [{"type": "text", "text": "Add twice."}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Adding."},
                {"type": "tool_use", "id": "t1", "name": "add", "input": {"a": 1}},
                {"type": "tool_use", "id": "t2", "name": "add", "input": {"raw_arguments": "[2]"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "1"},
                {"type": "tool_result", "tool_use_id": "t2", "content": "2"},
                {"type": "text", "text": "Thanks; and now?"},
            ],
        },
    ]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"city": "Oslo"}', {"city": "Oslo"}),
        ("{}", {}),
        ('{"city": "Os', {"raw_arguments": '{"city": "Os'}),
        ('"just a string"', {"raw_arguments": '"just a string"'}),
        ("", {"raw_arguments": ""}),
    ],
)
def test_tool_input_from_stored_arguments(arguments: str, expected: dict[str, Any]) -> None:
    assert tool_input(arguments) == expected


def request(**kwargs: Any) -> ModelRequest:
    kwargs.setdefault("messages", (Message("user", "Hi"),))
    return ModelRequest(model="claude-sonnet-4-5", **kwargs)


def test_max_tokens_defaults_and_settings_map() -> None:
    assert build_params(request(), default_max_tokens=321)["max_tokens"] == 321
    settings = {
        "max_tokens": 50,
        "stop": ["END"],
        "timeout": 3.0,
        "extra_body": {"top_k": 5},
        "temperature": 0.3,
        "seed": 1,
    }
    params = build_params(request(settings=settings), default_max_tokens=321)
    assert params["max_tokens"] == 50
    assert params["stop_sequences"] == ["END"]
    assert params["timeout"] == 3.0
    assert params["extra_body"] == {"top_k": 5}
    # The Messages API this client speaks has no temperature or seed: they are not sent.
    assert "temperature" not in params
    assert "seed" not in params
    assert "system" not in params
    assert "tools" not in params


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, None),
        ({"tool_choice": "auto"}, {"type": "auto"}),
        ({"tool_choice": "required"}, {"type": "any"}),
        ({"tool_choice": "none"}, {"type": "none"}),
        ({"tool_choice": "add"}, {"type": "tool", "name": "add"}),
        ({"parallel_tool_calls": False}, {"type": "auto", "disable_parallel_tool_use": True}),
        (
            {"tool_choice": "required", "parallel_tool_calls": False},
            {"type": "any", "disable_parallel_tool_use": True},
        ),
    ],
)
def test_tool_choice(settings: dict[str, Any], expected: Any) -> None:
    uncached = {**settings, "prompt_cache": False}  # breakpoints are tested on their own
    params = build_params(request(tools=(ADD,), settings=uncached), default_max_tokens=10)
    assert params["tools"] == [
        {"name": "add", "description": "Add two numbers.", "input_schema": ADD.parameters}
    ]
    assert params.get("tool_choice") == expected


def test_tool_choice_naming_an_unknown_tool_is_a_user_error() -> None:
    with pytest.raises(UserError, match="names no tool"):
        build_params(request(tools=(ADD,), settings={"tool_choice": "x"}), default_max_tokens=1)


def test_output_schema_uses_structured_outputs() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 1}},
        "required": ["n"],
    }
    params = build_params(
        request(output_schema=schema),
        default_max_tokens=10,
        transform_schema=anthropic.transform_schema,
    )
    sent = params["output_config"]["format"]
    assert sent["type"] == "json_schema"
    assert sent["schema"]["additionalProperties"] is False
    assert sent["schema"]["required"] == ["n"]
    raw = build_params(request(output_schema=schema), default_max_tokens=10)
    assert raw["output_config"]["format"]["schema"] == schema


def test_parse_message() -> None:
    data = anth.message(
        [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            anth.text_block("Let me check."),
            anth.tool_use_block("toolu_1", "add", {"a": 1, "b": 2}),
        ],
        usage_tokens=anth.usage(10, 5, cache_read_input_tokens=100, cache_creation_input_tokens=7),
    )
    response = parse_message(data)
    assert response.content == "Let me check."
    assert response.tool_calls == (ToolCall("toolu_1", "add", '{"a": 1, "b": 2}'),)
    assert response.finish_reason == "tool_calls"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (117, 5)


@pytest.mark.parametrize(
    ("stop", "expected"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
        ("pause_turn", "pause_turn"),
        (None, None),
    ],
)
def test_finish_reason(stop: str | None, expected: str | None) -> None:
    assert finish_reason(stop) == expected


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"content": "x"},
        {"content": ["x"]},
        {"content": [{"type": "tool_use", "id": "t", "name": "f", "input": "{}"}]},
    ],
)
def test_parse_message_rejects_other_shapes(data: Any) -> None:
    with pytest.raises(MalformedReply):
        parse_message(data)


def feed_all(acc: EventAccumulator, events: list[dict[str, Any]]) -> list[str]:
    return [acc.feed(event) for event in events]


def test_stream_events_build_the_reply() -> None:
    acc = EventAccumulator()
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": anth.message() | {"content": [], "usage": anth.usage(25, 1)},
        },
        {"type": "content_block_start", "index": 0, "content_block": anth.text_block("")},
        {"type": "ping"},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "On it"},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": anth.tool_use_block("t1", "add", {}),
        },
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": anth.tool_use_block("t2", "add", {}),
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": '{"b"'},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"a": '},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": "1}"},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": ": 2}"},
        },
        {"type": "a_future_event", "whatever": True},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 40},
        },
        {"type": "message_stop"},
    ]
    texts = feed_all(acc, events)
    assert "".join(texts) == "On it"
    response = acc.finish()
    assert response.content == "On it"
    assert response.tool_calls == (
        ToolCall("t1", "add", '{"a": 1}'),
        ToolCall("t2", "add", '{"b": 2}'),
    )
    assert response.finish_reason == "tool_calls"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (25, 40)
    assert response.model == anth.MODEL


def test_a_tool_without_input_deltas_has_empty_arguments() -> None:
    acc = EventAccumulator()
    feed_all(
        acc,
        [
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": anth.tool_use_block("t", "now", {}),
            },
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use"},
                "usage": {"output_tokens": 3},
            },
            {"type": "message_stop"},
        ],
    )
    assert acc.finish().tool_calls == (ToolCall("t", "now", "{}"),)


def test_a_stream_without_message_stop_is_incomplete() -> None:
    acc = EventAccumulator()
    feed_all(
        acc,
        [
            {"type": "content_block_start", "index": 0, "content_block": anth.text_block("")},
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Hal"},
            },
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 3},
            },
        ],
    )
    with pytest.raises(IncompleteStream):
        acc.finish()


@pytest.mark.parametrize(
    "event",
    [
        "x",
        {"type": "content_block_delta", "index": 0, "delta": None},
        {
            "type": "content_block_delta",
            "index": "0",
            "delta": {"type": "input_json_delta", "partial_json": "{"},
        },
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": 1}},
        {"type": "message_start", "message": []},
    ],
)
def test_malformed_events_are_rejected(event: Any) -> None:
    with pytest.raises(MalformedReply):
        EventAccumulator().feed(event)


def test_a_window_opening_on_an_assistant_turn_gets_a_user_turn_first() -> None:
    history = (
        Message("system", "Summary of the earlier conversation: the user is Ana."),
        Message("assistant", "Hello again, Ana."),
        Message("user", "What's my name?"),
    )
    system, wire = messages_to_wire(history)
    assert system == "Summary of the earlier conversation: the user is Ana."
    assert [turn["role"] for turn in wire] == ["user", "assistant", "user"]
    assert wire[0]["content"] == [{"type": "text", "text": "(earlier conversation omitted)"}]
