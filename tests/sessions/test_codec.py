"""The shared, I/O-free record encoding and id rules of the persistent stores."""

from __future__ import annotations

import json

import pytest

from aniki import CorruptStoreError, Message, ToolCall, UserError, ValidationError
from aniki._secrets import hide_password
from aniki.messages import to_messages
from aniki.sessions._args import (
    MAX_ID_LENGTH,
    check_durability,
    check_limit,
    check_meta_key,
    check_session_id,
)
from aniki.sessions._codec import (
    decode_message,
    decode_messages,
    decode_meta,
    encode_batch,
    encode_message,
    encode_meta,
)
from aniki.testing._conformance_support import large_messages, sample_messages


@pytest.mark.parametrize("message", sample_messages() + large_messages())
def test_every_sample_round_trips_through_one_line_of_json(message: Message) -> None:
    text = encode_message(message)
    assert "\n" not in text
    assert "\x00" not in text  # PostgreSQL text cannot hold NUL; JSON escapes it
    assert decode_message(text, store="s") == message
    assert decode_message(text.encode("utf-8"), store="s") == message


def test_a_batch_is_one_line_and_decodes_in_order() -> None:
    samples = sample_messages()
    text = encode_batch(samples)
    assert "\n" not in text
    assert decode_messages(text, store="s") == samples
    assert decode_messages(encode_message(samples[0]), store="s") == samples[:1]


def test_tool_call_arguments_that_are_not_json_are_kept_verbatim() -> None:
    call = ToolCall(id="c", name="f", arguments='{"a": [1, 2')
    message = Message(role="assistant", tool_calls=(call,))
    assert (
        decode_message(encode_message(message), store="s").tool_calls[0].arguments == '{"a": [1, 2'
    )


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[1, 2",
        "42",
        '"a string"',
        '{"role": "robot", "content": "x"}',
        '{"role": "user"}',
        '[{"role": "user", "content": "ok"}, 3]',
    ],
)
def test_unreadable_records_raise_corrupt_store_error_naming_the_store(text: str) -> None:
    with pytest.raises(CorruptStoreError) as info:
        decode_messages(text, store="sqlite:///tmp/x.db")
    assert info.value.store == "sqlite:///tmp/x.db"
    assert "sqlite:///tmp/x.db" in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        '{"role": "user", "content": ""}',
        '{"role": "tool", "content": "x"}',
        '{"role": ["user"], "content": "x"}',
        '{"role": "user", "content": 5}',
        '{"role": "user", "content": "\\ud800"}',
        '{"role": "User", "content": "x"}',
        '{"role": "user", "extra": "x"}',
        '{"role": "user", "content": "x"} trailing',
        b'{"role": "user", "content": "\xff"}',
    ],
)
def test_records_near_the_plain_shape_are_checked_as_fully_as_any(text: str | bytes) -> None:
    # Plain text messages take a short path on reading; nothing invalid may slip through it.
    with pytest.raises(CorruptStoreError, match="cannot be read"):
        decode_message(text, store="s")


@pytest.mark.parametrize(
    "text",
    [
        '{"role":"user","content":"plain"}',
        '{"role":"system","content":"caf\\u00e9 \\ud83d\\ude00"}',
        '  {"role": "assistant", "content": "spaced"}\n',
        '{"content":"key order","role":"user"}',
        '{"role":"user","content":"x","tool_call_id":null}',
    ],
)
def test_the_plain_path_and_the_checked_path_build_equal_messages(text: str) -> None:
    decoded = decode_message(text, store="s")
    assert decoded == Message.from_dict(json.loads(text))
    assert decode_message(text.encode("utf-8"), store="s") == decoded
    assert hash(decoded) == hash(Message.from_dict(json.loads(text)))


def test_to_messages_validates_the_whole_batch_first() -> None:
    good = {"role": "user", "content": "hi"}
    assert to_messages([good, Message(role="user", content="x")])[0] == Message(
        role="user", content="hi"
    )
    with pytest.raises(ValidationError):
        to_messages([good, {"role": "user", "content": ""}])
    for not_a_batch in ("text", good, Message(role="user", content="x"), None, 5):
        with pytest.raises(ValidationError):
            to_messages(not_a_batch)  # type: ignore[arg-type]


def test_meta_values_must_be_json_safe() -> None:
    value = {"text": "\u00e9\x00", "n": [1, 2.5, None, True]}
    assert decode_meta(encode_meta("k", value), store="s") == value
    for bad in (object(), float("nan"), {1, 2}):
        with pytest.raises(UserError, match="JSON-safe"):
            encode_meta("k", bad)
    with pytest.raises(CorruptStoreError):
        decode_meta("{", store="s")


@pytest.mark.parametrize(
    "session_id",
    ["a", "../../etc/passwd", "'; DROP TABLE x; --", "\u00e9\U0001f600", "x" * MAX_ID_LENGTH],
)
def test_ids_that_every_store_accepts(session_id: str) -> None:
    assert check_session_id(session_id) == session_id


@pytest.mark.parametrize(
    ("session_id", "reason"),
    [
        ("", "empty"),
        ("a\x00b", "NUL"),
        ("x" * (MAX_ID_LENGTH + 1), "at most"),
        ("lone \ud800", "surrogate"),
        (5, "string"),
        (None, "string"),
    ],
)
def test_ids_that_are_refused_with_a_clear_user_error(session_id: object, reason: str) -> None:
    with pytest.raises(UserError, match=reason):
        check_session_id(session_id)


def test_small_argument_checks() -> None:
    assert check_limit(None) is None
    assert check_limit(3) == 3
    for bad in (True, 1.5, "3"):
        with pytest.raises(UserError):
            check_limit(bad)
    assert check_durability("full") == "full"
    with pytest.raises(UserError, match="'off', 'normal', 'full'"):
        check_durability("paranoid")
    assert check_meta_key("summary") == "summary"
    for bad_key in ("", None, 3):
        with pytest.raises(UserError):
            check_meta_key(bad_key)


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("redis://:s3cret@localhost:6379/0", "redis://:***@localhost:6379/0"),
        ("postgresql://bob:p%40ss@db:5432/app", "postgresql://bob:***@db:5432/app"),
        (
            "postgresql://u:pw@[::1]:5432/d?password=zz&x=1",
            "postgresql://u:***@[::1]:5432/d?password=***&x=1",
        ),
        ("host=db password=abc user=x", "host=db password=*** user=x"),
        ("host=db password='a b c' user=x", "host=db password=*** user=x"),
        ("redis://localhost:6379/0", "redis://localhost:6379/0"),
        ("postgresql://bob@db/app", "postgresql://bob@db/app"),
        ("postgresql://a=b:SECRETpw@db/app", "postgresql://a=b:***@db/app"),
        ("redis://x=y=z:pw@h:6379/0", "redis://x=y=z:***@h:6379/0"),
    ],
)
def test_redact_hides_passwords(location: str, expected: str) -> None:
    assert hide_password(location) == expected


def test_encoding_is_compact_and_keeps_non_ascii_text() -> None:
    text = encode_message(Message(role="user", content="h\u00e9"))
    assert json.loads(text) == {"role": "user", "content": "h\u00e9"}
    assert text == '{"role":"user","content":"h\u00e9"}'
