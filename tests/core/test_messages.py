"""Message and ToolCall: validation rules, errors that name the field, lossless round trips."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aniki import Message, ToolCall, ValidationError


def test_round_trip_of_every_shape() -> None:
    shapes = [
        Message(role="system", content="Be brief."),
        Message(role="user", content="héllo 👋 \x00 end"),
        Message(
            role="assistant",
            content="",
            tool_calls=(ToolCall(id="c1", name="f", arguments="{not json"),),
        ),
        Message(
            role="assistant",
            content="thinking",
            tool_calls=(
                ToolCall(id="c1", name="f", arguments='{"a": 1}'),
                ToolCall(id="c2", name="g", arguments=""),
            ),
        ),
        Message(role="tool", content="42", tool_call_id="c1"),
    ]
    for message in shapes:
        data = message.to_dict()
        assert Message.from_dict(json.loads(json.dumps(data))) == message


def test_to_dict_leaves_out_defaults() -> None:
    assert Message(role="user", content="hi").to_dict() == {"role": "user", "content": "hi"}


def test_tool_calls_given_as_a_list_of_dicts_become_a_tuple_of_tool_calls() -> None:
    message = Message(role="assistant", tool_calls=[{"id": "c", "name": "f"}])  # type: ignore[arg-type]
    assert message.tool_calls == (ToolCall(id="c", name="f", arguments="{}"),)
    hash(message)  # frozen and hashable


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"content": "x"}, "role", "needs a role"),
        ({"role": "user", "content": "x", "extra": 1}, "extra", "unknown message key"),
        ({"role": "user", "content": None}, "content", "must be a string"),
        ({"role": "user", "content": "\ud800"}, "content", "surrogate"),
        ({"role": "assistant", "content": "x", "tool_calls": "f"}, "tool_calls", "list or tuple"),
        (
            {"role": "assistant", "content": "x", "tool_calls": [{"name": "f"}]},
            "tool_calls.id",
            "needs",
        ),
        (
            {"role": "assistant", "content": "x", "tool_calls": [{"id": "", "name": "f"}]},
            "tool_calls.id",
            "empty",
        ),
        (
            {
                "role": "assistant",
                "content": "x",
                "tool_calls": [{"id": "1", "name": "f", "arguments": {"a": 1}}],
            },
            "tool_calls.arguments",
            "string",
        ),
        ({"role": "user", "content": "x", "tool_call_id": "c"}, "tool_call_id", "only allowed"),
        ({"role": "tool", "content": "x", "tool_call_id": ""}, "tool_call_id", "empty"),
        ({"role": "tool", "content": "", "tool_call_id": "c"}, "content", "non-empty"),
    ],
)
def test_validation_errors_name_the_field_and_the_rule(
    data: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(ValidationError) as info:
        Message.from_dict(data)
    assert info.value.field == field
    assert words in str(info.value)


def test_from_dict_refuses_non_mappings() -> None:
    with pytest.raises(ValidationError, match="mapping"):
        Message.from_dict(["user", "hi"])  # type: ignore[arg-type]


text = st.text(min_size=1)
tool_calls = st.lists(
    st.builds(ToolCall, id=text, name=text, arguments=st.text()), min_size=1, max_size=4
)
messages = st.one_of(
    st.builds(Message, role=st.sampled_from(["system", "user"]), content=text),
    st.builds(Message, role=st.just("assistant"), content=st.text(), tool_calls=tool_calls),
    st.builds(Message, role=st.just("assistant"), content=text),
    st.builds(Message, role=st.just("tool"), content=text, tool_call_id=text),
)


@given(messages)
def test_every_valid_message_round_trips_through_json(message: Message) -> None:
    assert Message.from_dict(json.loads(json.dumps(message.to_dict()))) == message


@given(
    st.dictionaries(
        st.sampled_from(["role", "content", "tool_calls", "tool_call_id", "x"]),
        st.one_of(
            st.none(),
            st.integers(),
            st.text(),
            st.lists(st.text()),
            st.dictionaries(st.text(), st.text()),
        ),
    )
)
def test_arbitrary_dicts_either_validate_or_raise_validation_error(data: dict[str, Any]) -> None:
    try:
        message = Message.from_dict(data)
    except ValidationError as exc:
        assert str(exc)
    else:
        assert Message.from_dict(message.to_dict()) == message
