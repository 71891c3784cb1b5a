"""``Message.context``: the report of the model call that wrote an assistant message, kept
with it through ``to_dict``/``from_dict``, every copy and the stores' codec."""

from __future__ import annotations

import json
from typing import Any

import pytest

from aniki import (
    ContextReport,
    ContextTokens,
    CorruptStoreError,
    InMemorySession,
    Message,
    Usage,
    ValidationError,
)
from aniki._stamps import stamp, stamp_one
from aniki.sessions._codec import decode_message, decode_messages, encode_batch, encode_message

USAGE = Usage(input_tokens=1200, output_tokens=40, requests=1, cache_read_tokens=1000)
REPORT = ContextReport(
    stored_messages=12,
    sent_messages=12,
    summarized_messages=0,
    tokens=ContextTokens(instructions=30, tools=120, summary=0, history=900),
    prefix_kept=True,
    usage=USAGE,
)
UNKNOWN = ContextReport(  # what a history policy that never counted the rest reports
    stored_messages=None,
    sent_messages=4,
    summarized_messages=8,
    tokens=ContextTokens(summary=200, history=300),
    prefix_kept=None,
)


def reply(report: ContextReport | None = REPORT, **extra: Any) -> Message:
    usage = report.usage if report is not None else USAGE
    return Message("assistant", "Hi!", model="m", usage=usage, context=report, **extra)


@pytest.mark.parametrize("report", [REPORT, UNKNOWN], ids=["counted", "unknown"])
def test_to_dict_keeps_the_report_and_its_usage_once(report: ContextReport) -> None:
    message = reply(report)
    data = message.to_dict()
    expected = {
        "stored_messages": report.stored_messages,
        "sent_messages": report.sent_messages,
        "summarized_messages": report.summarized_messages,
        "tokens": {
            "instructions": report.tokens.instructions,
            "tools": report.tokens.tools,
            "summary": report.tokens.summary,
            "history": report.tokens.history,
        },
        "prefix_kept": report.prefix_kept,
    }
    assert data["context"] == expected  # no usage inside: the message keeps it
    assert ("usage" in data) == (report.usage is not None)
    back = Message.from_dict(json.loads(json.dumps(data)))
    assert back.context == report  # usage included, taken from the message's
    assert back.usage == report.usage


def test_the_report_takes_no_part_in_equality_hash_or_repr() -> None:
    message = reply()
    bare = Message("assistant", "Hi!")
    assert message == bare and hash(message) == hash(bare)
    assert "context" not in repr(message) and "900" not in repr(message)
    assert "context" not in Message("user", "x").to_dict()


def test_copies_keep_the_report() -> None:
    message = reply()
    assert stamp_one(message).context is REPORT
    assert stamp([message, Message("user", "x")])[0].context is REPORT
    session = InMemorySession()
    session.add_messages([Message("user", "q"), message])
    assert session.get_messages()[1].context == REPORT
    assert session.fork("copy").get_messages()[1].context == REPORT
    assert session.undo()[1].context == REPORT


@pytest.mark.parametrize("role", ["user", "system"])
def test_only_an_assistant_message_keeps_a_report(role: str) -> None:
    with pytest.raises(ValidationError, match="only kept on assistant messages") as caught:
        Message(role, "x", context=UNKNOWN)  # type: ignore[arg-type]
    assert caught.value.field == "context"
    with pytest.raises(ValidationError) as caught:
        Message.from_dict({"role": role, "content": "x", "context": reply(UNKNOWN).to_dict()})
    assert caught.value.field == "context"


@pytest.mark.parametrize(
    ("report", "usage", "field"),
    [
        ({"sent_messages": 1}, None, "context"),
        (UNKNOWN, Usage(requests=1), "context.usage"),  # kept once: it must be the message's
        (REPORT, None, "context.usage"),
        (ContextReport(-1, 0, 0, ContextTokens(), None), None, "context.stored_messages"),
        (ContextReport(0, True, 0, ContextTokens(), None), None, "context.sent_messages"),
        (ContextReport(0, 0, 1.5, ContextTokens(), None), None, "context.summarized_messages"),
        (ContextReport(0, 0, 0, ContextTokens(history=-3), None), None, "context.tokens.history"),
        (ContextReport(0, 0, 0, (1, 2, 3, 4), None), None, "context.tokens"),  # type: ignore[arg-type]
        (ContextReport(0, 0, 0, ContextTokens(), 1), None, "context.prefix_kept"),  # type: ignore[arg-type]
    ],
)
def test_a_bad_report_is_refused_naming_the_field(report: Any, usage: Any, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Message("assistant", "x", usage=usage, context=report)
    assert caught.value.field == field


def record(**changes: Any) -> dict[str, Any]:
    """A stored assistant record, its context changed as given (``None`` drops a key)."""
    data = reply().to_dict()
    context = data["context"]
    tokens = context["tokens"]
    for key, value in changes.items():
        target = tokens if key.startswith("tokens_") else context
        name = key.removeprefix("tokens_")
        if value is None:
            del target[name]
        else:
            target[name] = value
    return data


DAMAGED = [
    (record(extra=1), "context", "allowed: ['prefix_kept', 'sent_messages'"),
    (record(prefix_kept=None), "context.prefix_kept", "needs ['prefix_kept']"),
    (record(tokens=None), "context.tokens", "needs ['tokens']"),
    (record(tokens_history=None), "context.tokens.history", "needs ['history']"),
    (record(tokens_cached=5), "context.tokens", "allowed: ['history', 'instructions'"),
    (record(tokens=[1, 2]), "context.tokens", "must be a mapping"),
    (record(sent_messages=True), "context.sent_messages", "an int from 0"),
    (record(sent_messages="3"), "context.sent_messages", "an int from 0"),
    (record(stored_messages=-1), "context.stored_messages", "an int from 0"),
    (record(summarized_messages=2.0), "context.summarized_messages", "an int from 0"),
    (record(tokens_tools=-1), "context.tokens.tools", "an int from 0"),
    (record(tokens_summary=None, tokens_summry=0), "context.tokens", "'summry'"),
    (record(prefix_kept="yes"), "context.prefix_kept", "True, False or None"),
    ({**record(), "context": "kept"}, "context", "must be a mapping"),
    ({**record(), "context": [1]}, "context", "must be a mapping"),
]


@pytest.mark.parametrize(("data", "field", "words"), DAMAGED)
def test_a_damaged_record_is_a_validation_error_naming_the_field(
    data: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        Message.from_dict(data)
    assert caught.value.field == field
    assert words in str(caught.value)


@pytest.mark.parametrize(("data", "field", "words"), DAMAGED)
def test_a_store_reads_a_damaged_report_as_a_damaged_record(
    data: dict[str, Any], field: str, words: str
) -> None:
    text = json.dumps(data, separators=(",", ":"))
    with pytest.raises(CorruptStoreError, match="cannot be read") as caught:
        decode_message(text, store="test")
    assert words in str(caught.value)
    with pytest.raises(CorruptStoreError):
        decode_messages(f"[{text}]", store="test")


@pytest.mark.parametrize("report", [REPORT, UNKNOWN, None], ids=["counted", "unknown", "none"])
@pytest.mark.parametrize("stored", [False, True], ids=["new", "stamped"])
def test_the_codec_writes_what_json_writes_and_reads_it_back(
    report: ContextReport | None, stored: bool
) -> None:
    message = reply(report)
    if stored:
        message = stamp_one(message)
    text = encode_message(message)
    assert text == json.dumps(message.to_dict(), separators=(",", ":"), ensure_ascii=False)
    back = decode_message(text, store="test")
    assert (back, back.id, back.created_at) == (message, message.id, message.created_at)
    assert (back.model, back.usage, back.context) == (message.model, message.usage, report)
    assert decode_message(text.encode(), store="test").context == report
    [again] = decode_messages(encode_batch([message]), store="test")
    assert again.context == report


def test_a_report_on_a_tool_call_message_goes_through_the_full_path() -> None:
    message = Message(
        "assistant", tool_calls=({"id": "c1", "name": "f"},), usage=USAGE, context=REPORT
    )
    back = decode_message(encode_message(message), store="test")
    assert back == message and back.context == REPORT
