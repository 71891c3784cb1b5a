"""Chat Completions mapping, request and reply, without any HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from aniki import Message, ModelRequest, ToolCall, ToolDefinition, UserError
from aniki.providers._openai_wire import (
    ChunkAccumulator,
    build_params,
    is_strict_schema,
    message_to_wire,
    parse_completion,
    response_format,
    tool_to_wire,
)
from aniki.providers._stream import IncompleteStream, MalformedReply

from . import openai_shapes as oai

ADD = ToolDefinition("add", "Add two numbers.", {"type": "object", "properties": {}})


def test_every_role_maps_to_its_wire_shape() -> None:
    call = ToolCall(id="call_1", name="add", arguments='{"a": 1, "b": ')  # invalid JSON kept
    assert message_to_wire(Message("system", "Be brief.")) == {
        "role": "system",
        "content": "Be brief.",
    }
    assert message_to_wire(Message("user", "Hi")) == {"role": "user", "content": "Hi"}
    assert message_to_wire(Message("assistant", "Hello")) == {
        "role": "assistant",
        "content": "Hello",
    }
    assert message_to_wire(Message("assistant", tool_calls=(call,))) == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 1, "b": '},
            }
        ],
    }
    assert message_to_wire(Message("tool", "3", tool_call_id="call_1")) == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "3",
    }


def closed(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
        **extra,
    }


def test_strict_when_every_object_is_closed_and_fully_required() -> None:
    item = closed({"name": {"type": "string"}})
    schema = closed(
        {
            "items": {"type": "array", "items": item},
            "ref": {"$ref": "#/$defs/Inner"},
            "either": {"anyOf": [item, {"type": "null"}]},
        },
        **{"$defs": {"Inner": closed({"x": {"type": "integer"}})}},
    )
    assert is_strict_schema(schema)
    assert response_format(schema)["json_schema"]["strict"] is True


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
        closed({"a": {"type": "string"}}) | {"required": []},
        closed({"inner": {"type": "object", "properties": {"x": {"type": "integer"}}}}),
        closed({"list": {"type": "array", "items": {"type": "object", "properties": {}}}}),
        closed({}, **{"$defs": {"Open": {"type": "object", "properties": {"x": {}}}}}),
        {"type": "array", "items": {"type": "string"}},
    ],
    ids=["open root", "optional", "open nested", "open items", "open def", "array root"],
)
def test_not_strict_as_it_is_but_rewritten_for_strict_mode(schema: dict[str, Any]) -> None:
    assert not is_strict_schema(schema)
    fmt = response_format(schema)["json_schema"]
    if schema.get("type") != "object":  # the APIs take only an object at the root
        assert fmt["strict"] is False and fmt["schema"] == schema
        return
    assert fmt["strict"] is True and is_strict_schema(fmt["schema"])
    assert set(fmt["schema"]["properties"]) == set(schema["properties"])
    assert response_format(schema, strict=False)["json_schema"] == {
        "name": "output",
        "schema": schema,
        "strict": False,
    }


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {}, "additionalProperties": True},
        closed({"tags": {"type": "object", "additionalProperties": {"type": "string"}}}),
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/A", "title": "A"}}, "$defs": {}},
    ],
    ids=["open on purpose", "a map", "a dangling reference"],
)
def test_never_strict_when_strict_mode_would_refuse_what_the_schema_allows(
    schema: dict[str, Any],
) -> None:
    fmt = response_format(schema)["json_schema"]
    assert fmt["strict"] is False and fmt["schema"] == schema


def test_a_ref_with_a_description_is_inlined_and_defaults_of_null_dropped() -> None:
    schema = {
        "type": "object",
        "properties": {
            "home": {"$ref": "#/$defs/City", "description": "where they live"},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        },
        "required": ["home"],
        "$defs": {"City": {"type": "object", "properties": {"name": {"type": "string"}}}},
    }
    strict = response_format(schema)["json_schema"]["schema"]
    assert strict["properties"]["home"] == {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "additionalProperties": False,
        "required": ["name"],
        "description": "where they live",
    }
    assert "default" not in strict["properties"]["note"]
    assert strict["required"] == ["home", "note"]
    assert schema["required"] == ["home"]  # the agent's own schema is left as it was


def test_response_format_is_named_from_the_title() -> None:
    fmt = response_format(closed({}, title="Weather report!"))
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "Weather_report_"
    assert response_format({"type": "object"})["json_schema"]["name"] == "output"


def request(**kwargs: Any) -> ModelRequest:
    kwargs.setdefault("messages", (Message("user", "Hi"),))
    return ModelRequest(model="gpt-4o-mini", **kwargs)


def test_settings_map_to_request_fields() -> None:
    settings = {
        "temperature": 0.2,
        "top_p": 0.9,
        "seed": 7,
        "presence_penalty": 0.1,
        "frequency_penalty": 0.3,
        "max_tokens": 99,
        "stop": ["END"],
        "parallel_tool_calls": False,
        "tool_choice": "add",
        "timeout": 12.5,
        "extra_body": {"top_k": 40},
    }
    params = build_params(request(tools=(ADD,), settings=settings), stream=False)
    assert params["temperature"] == 0.2
    assert params["top_p"] == 0.9
    assert params["seed"] == 7
    assert params["presence_penalty"] == 0.1
    assert params["frequency_penalty"] == 0.3
    assert params["max_completion_tokens"] == 99
    assert "max_tokens" not in params
    assert params["stop"] == ["END"]
    assert params["parallel_tool_calls"] is False
    assert params["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    assert params["timeout"] == 12.5
    assert params["extra_body"] == {"top_k": 40}
    other = build_params(
        request(settings={"max_tokens": 5}), stream=False, max_tokens_param="max_tokens"
    )
    assert other["max_tokens"] == 5


def test_tool_options_are_left_out_without_tools() -> None:
    params = build_params(
        request(settings={"parallel_tool_calls": True, "tool_choice": "none"}), stream=False
    )
    assert "parallel_tool_calls" not in params
    assert "tool_choice" not in params
    assert "tools" not in params


def test_tool_choice_naming_an_unknown_tool_is_a_user_error() -> None:
    with pytest.raises(UserError, match="names no tool"):
        build_params(request(tools=(ADD,), settings={"tool_choice": "mul"}), stream=False)


def test_stream_asks_for_usage_unless_told_not_to() -> None:
    assert build_params(request(), stream=True)["stream_options"] == {"include_usage": True}
    assert "stream_options" not in build_params(request(), stream=True, stream_usage=False)
    assert "stream_options" not in build_params(request(), stream=False)


def test_parse_completion_with_tool_calls() -> None:
    data = oai.completion(
        None,
        tool_calls=[oai.tool_call("call_a", "add", '{"a":1}'), oai.tool_call("call_b", "add", "{")],
        prompt_tokens=3,
        completion_tokens=4,
    )
    response = parse_completion(data)
    assert response.content == ""
    assert response.tool_calls == (
        ToolCall("call_a", "add", '{"a":1}'),
        ToolCall("call_b", "add", "{"),
    )
    assert response.finish_reason == "tool_calls"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (3, 4)  # type: ignore[union-attr]


def test_parse_completion_uses_a_refusal_as_text() -> None:
    data = oai.completion(None)
    data["choices"][0]["message"]["refusal"] = "I can't help with that."
    assert parse_completion(data).content == "I can't help with that."


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"choices": []},
        {"choices": [{"message": "x"}]},
        {"choices": [{"message": {"content": 5}}]},
    ],
)
def test_parse_completion_rejects_other_shapes(data: Any) -> None:
    with pytest.raises(MalformedReply):
        parse_completion(data)


def test_interleaved_tool_call_fragments_are_assembled() -> None:
    acc = ChunkAccumulator()
    chunks = [
        oai.chunk({"role": "assistant", "content": None}),
        oai.chunk(oai.fragment(0, call_id="call_A", name="weather")),
        oai.chunk(oai.fragment(1, call_id="call_B", name="time")),
        oai.chunk(oai.fragment(0, arguments='{"ci')),
        oai.chunk(oai.fragment(1, arguments='{"tz"')),
        oai.chunk(oai.fragment(0, arguments='ty": "Oslo"}')),
        oai.chunk(oai.fragment(1, arguments=': "CET"}')),
        oai.chunk(finish_reason="tool_calls"),
        oai.chunk(with_usage=(40, 17)),
    ]
    assert [acc.feed(c) for c in chunks] == [""] * len(chunks)
    response = acc.finish()
    assert response.tool_calls == (
        ToolCall("call_A", "weather", '{"city": "Oslo"}'),
        ToolCall("call_B", "time", '{"tz": "CET"}'),
    )
    assert response.finish_reason == "tool_calls"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (40, 17)


def test_text_deltas_are_returned_and_joined() -> None:
    acc = ChunkAccumulator()
    assert acc.feed(oai.chunk({"role": "assistant", "content": ""})) == ""
    assert acc.feed(oai.chunk({"content": "Hel"})) == "Hel"
    assert acc.feed(oai.chunk({"content": "lo"}, finish_reason="stop")) == "lo"
    response = acc.finish()
    assert response.content == "Hello"
    assert response.usage is None  # the server sent no usage chunk


def test_a_call_without_id_gets_one_and_other_choices_are_ignored() -> None:
    acc = ChunkAccumulator()
    acc.feed(
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{}"}}]
                    },
                }
            ]
        }
    )
    acc.feed({"choices": [{"index": 1, "delta": {"content": "other choice"}}]})
    acc.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    response = acc.finish()
    assert response.content == ""
    assert response.tool_calls[0].name == "f"
    assert response.tool_calls[0].id.startswith("call_")


def test_a_stream_without_finish_reason_is_incomplete() -> None:
    acc = ChunkAccumulator()
    acc.feed(oai.chunk({"content": "half an ans"}))
    with pytest.raises(IncompleteStream):
        acc.finish()


@pytest.mark.parametrize(
    "chunk",
    [
        "text",
        {"choices": "x"},
        {"choices": [{"index": 0, "delta": "x"}]},
        {"choices": [{"index": 0, "delta": {"content": 3}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": "0"}]}}]},
    ],
)
def test_malformed_chunks_are_rejected(chunk: Any) -> None:
    with pytest.raises(MalformedReply):
        ChunkAccumulator().feed(chunk)


def test_a_tool_call_that_never_got_a_name_is_malformed() -> None:
    acc = ChunkAccumulator()
    acc.feed(oai.chunk(oai.fragment(0, arguments="{}"), finish_reason="tool_calls"))
    with pytest.raises(MalformedReply, match="no name"):
        acc.finish()


def test_a_tool_with_optional_parameters_is_sent_in_strict_mode() -> None:
    from aniki import tool

    @tool
    def get_weather(city: str, unit: str = "celsius") -> str:
        """Look up the weather.

        Args:
            city: the city.
            unit: celsius or fahrenheit.
        """
        return city

    definition = get_weather.definition()
    wire = tool_to_wire(definition)["function"]
    assert wire["strict"] is True
    assert wire["parameters"]["required"] == ["city", "unit"]  # the model always gives both
    assert definition.parameters["required"] == ["city"]  # the tool's own schema is unchanged
    assert "strict" not in tool_to_wire(definition, strict=False)["function"]
    # What a strict model sends validates as the tool's arguments.
    assert get_weather._parse_arguments('{"city": "Oslo", "unit": "celsius"}') == {
        "city": "Oslo",
        "unit": "celsius",
    }
