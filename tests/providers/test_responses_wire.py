"""The Responses wire mapping on its own, without HTTP: the corners the end-to-end tests do
not reach."""

from __future__ import annotations

from typing import Any

import pytest

from aniki import Message, Reasoning, ToolCall
from aniki.providers._responses_stream import EventAccumulator
from aniki.providers._responses_wire import message_to_items, parse_response, reasoning_items
from aniki.providers._stream import IncompleteStream, MalformedReply, ReplyFailed

from . import responses_shapes as rsp

R = "openai-responses"


def test_an_assistant_message_goes_out_as_reasoning_then_text_then_calls() -> None:
    message = Message(
        "assistant",
        "Checking.",
        tool_calls=(ToolCall("call_1", "look", "{}"),),
        reasoning=(Reasoning("Hm.", signature="rs_1", redacted="enc", provider=R),),
    )
    assert [item.get("type", item.get("role")) for item in message_to_items(message)] == [
        "reasoning",
        "assistant",
        "function_call",
    ]


def test_reasoning_parts_regroup_into_the_items_they_came_from() -> None:
    parts = (
        Reasoning("a", signature="rs_1", provider=R),
        Reasoning("b", signature="rs_1", redacted="enc-1", provider=R),  # not on the first
        Reasoning("c", signature="rs_2", redacted="enc-2", provider=R),
        Reasoning("no id", redacted="enc-3", provider=R),  # cannot be named: left out
        Reasoning("theirs", signature="rs_3", redacted="enc-4", provider="anthropic"),
        Reasoning("d", signature="rs_1", redacted="enc-5", provider=R),  # apart: its own item
    )
    assert reasoning_items(parts) == [
        rsp.reasoning_item("rs_1", ["a", "b"], "enc-1"),
        rsp.reasoning_item("rs_2", ["c"], "enc-2"),
        rsp.reasoning_item("rs_1", ["d"], "enc-5"),
    ]


@pytest.mark.parametrize(
    ("reason", "finish"),
    [("max_output_tokens", "length"), ("content_filter", "content_filter"), ("steered", "steered")],
)
def test_incomplete_reasons_in_aniki_words(reason: str, finish: str) -> None:
    reply = rsp.response([rsp.message_item("Part")], status="incomplete", incomplete_reason=reason)
    assert parse_response(reply).finish_reason == finish
    unexplained = rsp.response([rsp.message_item("Part")], status="incomplete")
    assert parse_response(unexplained).finish_reason == "incomplete"


def test_a_refusal_hosted_tool_items_and_cache_writes() -> None:
    refusal = {"type": "refusal", "refusal": "I can't help with that."}
    message = rsp.message_item("") | {"content": [refusal]}
    search = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    tokens = rsp.usage(2000, 5, cached=1024) | {
        "input_tokens_details": {"cached_tokens": 1024, "cache_write_tokens": 512}
    }
    reply = parse_response(rsp.response([search, message], usage_tokens=tokens))
    assert (reply.content, reply.finish_reason, reply.tool_calls) == (
        refusal["refusal"],
        "stop",
        (),
    )
    assert reply.usage is not None
    assert (reply.usage.cache_read_tokens, reply.usage.cache_write_tokens) == (1024, 512)


@pytest.mark.parametrize(
    "broken",
    [
        {"output": "nope"},
        {"output": [{"type": "message", "content": "text"}]},
        {"output": [{"type": "reasoning", "id": "rs", "summary": "text"}]},
        {"output": [{"type": "function_call", "call_id": "c", "arguments": "{}"}]},  # no name
        {"output": [{"type": "message", "content": [{"type": "output_text", "text": 5}]}]},
    ],
)
def test_a_reply_of_another_shape_is_malformed(broken: dict[str, Any]) -> None:
    with pytest.raises(MalformedReply):
        parse_response(rsp.response() | broken)


def test_a_failed_or_cancelled_response_is_a_failure() -> None:
    failed = rsp.response([], status="failed", error={"code": "server_error", "message": "Boom"})
    with pytest.raises(ReplyFailed, match="server_error: Boom") as info:
        parse_response(failed)
    assert info.value.body == {"code": "server_error", "message": "Boom"}
    with pytest.raises(ReplyFailed, match="'cancelled'"):
        parse_response(rsp.response([], status="cancelled"))


def test_summary_parts_of_two_items_stream_apart() -> None:
    accumulator = EventAccumulator()
    built = [
        rsp.reasoning_events(0, "rs_1", [["One."]], "enc-1"),
        rsp.reasoning_events(1, "rs_2", [["Two."]], "enc-2"),
    ]
    for events, _ in built:
        for event in events:
            accumulator.feed(event)
    assert accumulator.take_reasoning() == "One.\n\nTwo."
    assert accumulator.take_reasoning() == ""
    with pytest.raises(IncompleteStream, match=r"before response\.completed"):
        accumulator.finish()
