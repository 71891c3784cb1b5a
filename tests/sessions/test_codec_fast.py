"""The short path of reading stored records (``sessions/_codec_fast.py``): it reads what the
stores write, gives exactly what the JSON path gives, and refuses what that path refuses."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aniki import Attachment, CorruptStoreError, Message, Reasoning, ToolCall, Usage
from aniki._stamps import stamp
from aniki.messages import _Unchecked
from aniki.reports import ContextReport, ContextTokens
from aniki.sessions import _codec_fast
from aniki.sessions._codec import decode_message, decode_messages, encode_batch, encode_message
from aniki.testing._conformance_support import sample_messages

USAGE = Usage(input_tokens=1200, output_tokens=40, requests=1, cache_read_tokens=1000)
REPORT = ContextReport(
    stored_messages=10,
    sent_messages=10,
    summarized_messages=0,
    tokens=ContextTokens(instructions=10, tools=0, summary=0, history=1190),
    prefix_kept=True,
    usage=USAGE,
)
REPLY = Message("assistant", "Done.\nReally.", model="gpt-4o-mini", usage=USAGE, context=REPORT)

SHORT = [
    Message("user", "The quick brown fox"),
    Message("system", "You are terse."),
    Message("user", 'quote " backslash \\ newline \n tab \t nul \x00 caf\u00e9 \U0001f600'),
    Message("user", "\U0001f469\u200d\U0001f469 separators \u2028\u2029 \x7f"),
    Message("assistant", "Hello."),
    Message("assistant", "Hello.", model="m"),
    Message("assistant", "Hello.", usage=USAGE),
    Message("assistant", "Hello.", context=dataclasses.replace(REPORT, usage=None)),
    REPLY,
    Message("tool", "12 degrees", tool_call_id="call_a"),
    Message("tool", "line\nbreak", tool_call_id="call_\u00e9"),
    Message("assistant", tool_calls=(ToolCall("c1", "get_weather", '{"city": "Os'),)),
    Message(
        "assistant",
        "Checking.",
        tool_calls=(ToolCall("c\u00e9", "echo", '{"s": "a\\u0000b"}'), ToolCall("c2", "noop", "")),
        model="m",
        usage=USAGE,
        context=REPORT,
    ),
]
"""Text messages and tool calls, which the short path reads once a store has stamped them."""

OTHERS = [
    Message("user", "see", attachments=(Attachment("image/png", data=b"\x89PNG"),)),
    Message(
        "tool", "", tool_call_id="c", attachments=(Attachment("text/plain", url="https://e.x/a"),)
    ),
    Message("assistant", "Sum.", reasoning=(Reasoning("Add first.", signature="sig"),)),
]
"""Messages with parts, which the short path leaves to the JSON path."""


def records(messages: list[Message]) -> list[str]:
    """Each message as a store writes it, stamped with an id and a time."""
    return [encode_message(message) for message in stamp(messages)]


def reference(text: str) -> Message | None:
    """What the plain JSON path reads from ``text``: ``None`` when it refuses it."""
    try:
        data = json.loads(text)
        return Message.from_dict(data) if isinstance(data, dict) else None
    except (ValueError, TypeError, RecursionError):
        return None


def short(text: str) -> Message | None:
    """What the short path reads from one record: ``None`` when it leaves it to JSON."""
    found = _codec_fast.read_at(text, 0)
    return found[0] if found is not None and found[1] == len(text) else None


def same(read: Message, expected: Message) -> None:
    """``read`` is ``expected``, metadata and type included."""
    assert type(read) is Message
    assert read == expected
    assert read.to_dict() == expected.to_dict()
    for name in ("id", "created_at", "model", "usage", "context", "tool_call_id"):
        assert getattr(read, name) == getattr(expected, name), name


@pytest.mark.parametrize("text", records(SHORT), ids=range(len(SHORT)))
def test_records_the_stores_write_are_read_exactly(text: str) -> None:
    expected = reference(text)
    assert expected is not None
    same(decode_message(text, store="s"), expected)
    same(decode_message(text.encode("utf-8"), store="s"), expected)
    same(decode_messages(text, store="s")[0], expected)


@pytest.mark.parametrize("message", SHORT)
def test_stamped_text_messages_take_the_short_path(message: Message) -> None:
    (text,) = records([message])
    read = short(text)
    assert read is not None
    same(read, Message.from_dict(json.loads(text)))


@pytest.mark.parametrize("message", OTHERS)
def test_other_messages_are_left_to_the_json_path(message: Message) -> None:
    (text,) = records([message])
    assert short(text) is None
    same(decode_message(text, store="s"), Message.from_dict(json.loads(text)))


def test_every_sample_and_a_whole_batch_round_trip() -> None:
    messages = stamp(sample_messages() + SHORT + OTHERS)
    batch = encode_batch(messages)
    for read, stored in zip(decode_messages(batch, store="s"), messages, strict=True):
        same(read, stored)
    text_only = stamp(SHORT)
    assert _codec_fast.read_batch(encode_batch(text_only)) is not None
    for read, stored in zip(
        decode_messages(encode_batch(text_only).encode("utf-8"), store="s"), text_only, strict=True
    ):
        same(read, stored)


BASE = '{"role":"user","content":"hi","id":"a1","created_at":"2026-12-04T09:30:00+00:00"}'
ASSISTANT = encode_message(stamp([REPLY])[0])
CALLS = BASE.replace(
    '"user","content":"hi"',
    '"assistant","content":"","tool_calls":[{"id":"c","name":"f","arguments":"{}"}]',
)
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    "text",
    [
        BASE.replace('"hi"', '""'),  # empty content
        BASE.replace('"hi"', '"h\ni"'),  # a raw control character: not JSON
        BASE.replace('"hi"', '"h\\qi"'),  # a bad escape
        BASE.replace('"hi"', '"\\ud800"'),  # a lone surrogate
        BASE.replace('"a1"', '""'),  # an empty id
        BASE.replace('"a1"', '"a\x001"'),  # a raw control character in the id
        BASE.replace("+00:00", ""),  # a time without an offset
        BASE.replace("2026-12-04T09:30:00+00:00", "yesterday"),
        BASE.replace('"user"', '"tool"'),  # a tool message answers no call
        BASE.replace('"hi",', '"hi","tool_call_id":"c",'),  # a user message answering one
        BASE.replace('"hi",', '"hi","tool_call_id":"",'),
        BASE.replace('"}', '","model":"m"}'),  # a model on a user message
        BASE.replace('"}', '","usage":{"input_tokens":1}}'),
        BASE + " x",
        BASE[:-1],
        "[" + BASE + "," + BASE.replace('"hi"', '""') + "]",  # one bad record spoils a batch
        "[" + BASE + "," + BASE,
        "[" + BASE + "]]",
        ASSISTANT.replace('"model":"gpt-4o-mini"', '"model":""'),
        ASSISTANT.replace('"input_tokens":1200', '"input_tokens":-1'),
        ASSISTANT.replace('"input_tokens":1200', '"input_tokens":true'),
        ASSISTANT.replace('"input_tokens":1200', '"input_tokens":1.5'),
        ASSISTANT.replace('"input_tokens":1200', '"tokens_in":1200'),
        ASSISTANT.replace('"sent_messages":10', '"sent_messages":-10'),
        ASSISTANT.replace('"prefix_kept":true', '"prefix_kept":1'),
        ASSISTANT.replace(',"prefix_kept":true', ""),
        ASSISTANT[:-1],
        ASSISTANT.replace('"usage":{', f'"usage":{{"x":{DEEP},'),  # nested too deeply
        ASSISTANT.replace('"context":{', f'"context":{{"x":{DEEP},'),
        CALLS.replace('"assistant"', '"user"'),  # tool calls on a user message
        CALLS.replace('"id":"c"', '"id":""'),
        CALLS.replace('"name":"f"', '"name":""'),
        CALLS.replace('"name":"f"', '"name":5'),
        CALLS.replace('"arguments":"{}"', '"arguments":{}'),
        CALLS.replace('"arguments":"{}"', '"arguments":"\\udc00"'),
        CALLS.replace(',"arguments":"{}"', ',"arguments":"{}","extra":1'),
        CALLS.replace('[{"id":"c","name":"f","arguments":"{}"}]', "[]"),
        CALLS.replace('[{"id":"c","name":"f","arguments":"{}"}]', DEEP),
        CALLS.replace('"content":""', '"content":"x","tool_call_id":"c"'),
    ],
)
def test_damaged_records_are_still_refused(text: str) -> None:
    with pytest.raises(CorruptStoreError, match="cannot be read"):
        decode_messages(text, store="sqlite:///tmp/x.db")
    if not text.startswith("["):
        assert short(text) is None
        with pytest.raises(CorruptStoreError):
            decode_message(text.encode("utf-8", "surrogatepass"), store="s")


EDITS = st.sampled_from([*'"\\{}[],: \x00\n\x1fun09-T+\u00e9\ud800aZ', "\\n", "\\u00e9"])


@settings(max_examples=400, deadline=None)
@given(
    base=st.sampled_from(records(SHORT)),
    edits=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 2), EDITS), min_size=1, max_size=3),
)
def test_a_changed_record_reads_as_the_json_path_reads_it(
    base: str, edits: list[tuple[float, int, str]]
) -> None:
    text = base
    for where, how, piece in edits:
        at = int(where * len(text))
        # 0 replaces a character, 1 inserts one, 2 deletes one
        text = text[:at] + (piece if how < 2 else "") + text[at + (how != 1) :]
    expected = reference(text)
    if expected is None:
        with pytest.raises(CorruptStoreError):
            decode_message(text, store="s")
    else:
        same(decode_message(text, store="s"), expected)


def reference_batch(text: str) -> list[Message] | None:
    """What the plain JSON path reads from a batch (or from one record, which a batch line
    may also hold): ``None`` when it refuses it."""
    try:
        items = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if isinstance(items, dict):
        return None if (one := reference(text)) is None else [one]
    if not isinstance(items, list):
        return None
    read = [reference(json.dumps(item)) for item in items]
    kept = [message for message in read if message is not None]
    return kept if len(kept) == len(read) else None


@settings(max_examples=300, deadline=None)
@given(
    picked=st.lists(st.sampled_from(SHORT), min_size=1, max_size=3),
    edits=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 2), EDITS), max_size=2),
)
def test_a_changed_batch_reads_as_the_json_path_reads_it(
    picked: list[Message], edits: list[tuple[float, int, str]]
) -> None:
    text = encode_batch(stamp(picked))
    for where, how, piece in edits:
        at = int(where * len(text))
        text = text[:at] + (piece if how < 2 else "") + text[at + (how != 1) :]
    expected = reference_batch(text)
    if expected is None:
        with pytest.raises(CorruptStoreError):
            decode_messages(text, store="s")
    else:
        read = decode_messages(text, store="s")
        assert len(read) == len(expected)
        for one, other in zip(read, expected, strict=True):
            same(one, other)


def test_repeated_strings_and_times_are_kept_once() -> None:
    first, second = stamp([REPLY, REPLY])
    a, b = (decode_message(encode_message(m), store="s") for m in (first, second))
    assert a.role is b.role is _codec_fast.ROLE_NAMES["assistant"]
    assert a.model is b.model
    assert a.created_at is b.created_at  # one batch, one time
    assert a.id != b.id


def test_the_time_cache_stays_bounded() -> None:
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for n in range(_codec_fast.TIMES_KEPT + 10):
        moment = start + timedelta(seconds=n)
        assert _codec_fast.moment(moment.isoformat()) == moment
    assert len(_codec_fast.TIMES) <= _codec_fast.TIMES_KEPT


def test_messages_made_without_checks_are_ordinary_messages() -> None:
    assert _Unchecked.__slots__ == Message.__slots__
    (text,) = records([REPLY])
    read = decode_message(text, store="s")
    built = Message.from_dict(json.loads(text))
    assert type(read) is Message
    assert hash(read) == hash(built)
    assert repr(read) == repr(built)
    assert pickle.loads(pickle.dumps(read)) == read
    assert copy.copy(read) == read
    changed = dataclasses.replace(read, content="changed")
    assert changed.content == "changed"
    assert changed.id == read.id
    with pytest.raises(dataclasses.FrozenInstanceError):
        read.content = "x"  # type: ignore[misc]
    stored = Message("assistant", tool_calls=(ToolCall("c", "f"),))._stored("i", read.created_at)
    assert type(stored) is Message
    assert (stored.id, stored.created_at, stored.tool_calls) == (
        "i",
        read.created_at,
        (ToolCall("c", "f"),),
    )


def _all_fields(message: Message) -> dict[str, Any]:
    return {f.name: getattr(message, f.name) for f in dataclasses.fields(message)}


def test_a_copy_a_store_stamps_keeps_every_field() -> None:
    original = Message("assistant", "x", model="m", usage=USAGE, context=REPORT)
    when = datetime(2026, 12, 4, tzinfo=timezone.utc)
    stored = original._stored("id-1", when)
    expected = _all_fields(original) | {"id": "id-1", "created_at": when}
    assert _all_fields(stored) == expected
