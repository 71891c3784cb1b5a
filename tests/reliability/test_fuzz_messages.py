"""Hostile input for ``Message.from_dict`` and ``Memory``: a clear refusal or an exact round trip.

Random unicode (lone surrogates too), strings of hundreds of thousands of characters, NUL,
containers nested 20,000 deep and values of every wrong type go in; each ends either in a
``ValidationError`` with a short message, or in a message that ``to_dict()`` gives back
exactly (defaults filled in) and that survives JSON.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aniki import Memory, Message, UserError, ValidationError

from .hostile import anything, deep, message_dicts, valid_messages

FUZZ = settings(
    deadline=timedelta(seconds=5),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def normalized(data: dict[Any, Any]) -> dict[str, Any]:
    """What ``to_dict()`` must give for an accepted input: the same, defaults filled in."""
    out: dict[str, Any] = {"role": data["role"], "content": data.get("content", "")}
    calls = data.get("tool_calls")
    assert calls is None or isinstance(calls, (list, tuple)), f"accepted tool_calls={calls!r}"
    if calls:
        out["tool_calls"] = [
            {"id": c["id"], "name": c["name"], "arguments": c.get("arguments", "{}")} for c in calls
        ]
    if data.get("tool_call_id") is not None:
        out["tool_call_id"] = data["tool_call_id"]
    return out


def assert_clear(error: ValidationError) -> None:
    text = str(error)
    assert text, "a ValidationError must say what is wrong"
    assert len(text) < 1000, f"an unreadable message ({len(text)} characters)"


@settings(FUZZ, max_examples=400)
@given(message_dicts)
def test_from_dict_refuses_clearly_or_round_trips_exactly(data: dict[Any, Any]) -> None:
    try:
        message = Message.from_dict(data)
    except ValidationError as error:
        assert_clear(error)
        return
    out = message.to_dict()
    assert out == normalized(data)
    assert Message.from_dict(out) == message
    assert Message.from_dict(json.loads(json.dumps(out))) == message


@settings(FUZZ, max_examples=100)
@given(st.one_of(anything, deep, st.lists(anything, max_size=3)))
def test_from_dict_refuses_whatever_is_not_a_mapping(value: Any) -> None:
    if isinstance(value, dict):
        value = [value]
    try:
        Message.from_dict(value)
    except ValidationError as error:
        assert_clear(error)
    else:
        raise AssertionError(f"accepted {type(value).__name__}")


operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.one_of(message_dicts, valid_messages, anything)),
        st.tuples(
            st.just("add_messages"),
            st.one_of(st.lists(st.one_of(valid_messages, message_dicts), max_size=4), anything),
        ),
        st.tuples(st.just("get_messages"), st.one_of(st.none(), st.integers(-3, 8), anything)),
        st.tuples(st.just("clear"), st.none()),
    ),
    max_size=12,
)


@settings(FUZZ, max_examples=150)
@given(st.one_of(st.lists(valid_messages, max_size=3), anything), operations)
def test_memory_keeps_exactly_what_it_accepted(initial: Any, steps: list[tuple[str, Any]]) -> None:
    try:
        memory = Memory(initial)
    except ValidationError as error:
        assert_clear(error)
        memory = Memory()
        model: list[Message] = []
    else:
        model = list(memory.get_messages())
        assert model == [m if isinstance(m, Message) else Message.from_dict(m) for m in initial]
    for name, value in steps:
        if name == "add":
            try:
                memory.add_message(value)
            except ValidationError as error:
                assert_clear(error)
            else:
                model.append(value if isinstance(value, Message) else Message.from_dict(value))
        elif name == "add_messages":
            try:
                memory.add_messages(value)
            except ValidationError as error:
                assert_clear(error)  # all or nothing: the model is unchanged
            else:
                model += [m if isinstance(m, Message) else Message.from_dict(m) for m in value]
        elif name == "get_messages":
            try:
                got = memory.get_messages(value)
            except UserError:
                assert not (isinstance(value, int) and not isinstance(value, bool))
                assert value is not None
            else:
                limit = value
                want = model if limit is None else (model[-limit:] if limit > 0 else [])
                assert list(got) == want
        else:
            memory.clear()
            model = []
        assert list(memory.get_messages()) == model
        assert len(memory) == len(model)
