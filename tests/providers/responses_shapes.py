"""OpenAI Responses API replies in the documented wire shapes, for the fake server.

A whole reply is a ``response`` object whose ``output`` lists items: ``reasoning``,
``message`` (``output_text`` parts) and ``function_call``. A stream is a sequence of named
server-sent events, each with a ``sequence_number``: ``response.created`` and
``response.in_progress``; per item ``response.output_item.added``, its deltas
(``response.output_text.delta``, ``response.function_call_arguments.delta``,
``response.reasoning_summary_text.delta``, each with its ``.done``) and
``response.output_item.done``; then one terminal event with the whole response
(``response.completed``, ``response.incomplete`` or ``response.failed``). There is no
``[DONE]``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .fake_server import sse

MODEL = "o4-mini-2025-04-16"
RESPONSE_ID = "resp_67ccd3a9da748190baa7f1570fe91ac604becb25c45c1d41"

Built = tuple[list[dict[str, Any]], dict[str, Any]]
"""The events of one output item, and the finished item."""


def usage(
    input_tokens: int = 36, output_tokens: int = 87, *, cached: int = 0, reasoning: int = 0
) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }


def message_item(text: str, item_id: str = "msg_67ccd3acc8d48190a77525dc6de64b4104becb25") -> Any:
    return {
        "type": "message",
        "id": item_id,
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def call_item(call_id: str, name: str, arguments: str, item_id: str | None = None) -> Any:
    return {
        "type": "function_call",
        "id": item_id or f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


def reasoning_item(item_id: str, summary: Sequence[str], encrypted: str | None) -> Any:
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": text} for text in summary],
    }
    if encrypted is not None:
        item["encrypted_content"] = encrypted
    return item


def response(
    output: Sequence[dict[str, Any]] = (),
    *,
    status: str = "completed",
    usage_tokens: dict[str, Any] | None = None,
    incomplete_reason: str | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A whole ``response`` object (``output`` defaults to one "Hello!" message)."""
    return {
        "id": RESPONSE_ID,
        "object": "response",
        "created_at": 1741476777,
        "status": status,
        "error": error,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "instructions": None,
        "max_output_tokens": None,
        "model": MODEL,
        "output": list(output) if output or status != "completed" else [message_item("Hello!")],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": "medium", "summary": None},
        "store": False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage_tokens if usage_tokens is not None else usage(),
        "user": None,
        "metadata": {},
    }


def error_body(message: str, *, type: str, code: str | None = None, param: Any = None) -> Any:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


# --- streams ----------------------------------------------------------------------------


def _added(item: dict[str, Any]) -> dict[str, Any]:
    """The item as ``response.output_item.added`` shows it: nothing produced yet."""
    shell = dict(item, status="in_progress")
    if item["type"] == "message":
        shell["content"] = []
    elif item["type"] == "function_call":
        shell["arguments"] = ""
    else:
        shell = {"type": "reasoning", "id": item["id"], "summary": []}
    return shell


def text_events(index: int, pieces: Sequence[str]) -> Built:
    item = message_item("".join(pieces))
    at = {"item_id": item["id"], "output_index": index, "content_index": 0}
    part = {"type": "output_text", "text": "", "annotations": []}
    events = [
        {"type": "response.output_item.added", "output_index": index, "item": _added(item)},
        {"type": "response.content_part.added", **at, "part": part},
        *({"type": "response.output_text.delta", **at, "delta": p, "logprobs": []} for p in pieces),
        {"type": "response.output_text.done", **at, "text": "".join(pieces), "logprobs": []},
        {"type": "response.content_part.done", **at, "part": item["content"][0]},
        {"type": "response.output_item.done", "output_index": index, "item": item},
    ]
    return events, item


def call_events(index: int, call_id: str, name: str, pieces: Sequence[str]) -> Built:
    item = call_item(call_id, name, "".join(pieces))
    at = {"item_id": item["id"], "output_index": index}
    events = [
        {"type": "response.output_item.added", "output_index": index, "item": _added(item)},
        *({"type": "response.function_call_arguments.delta", **at, "delta": p} for p in pieces),
        {"type": "response.function_call_arguments.done", **at, "arguments": "".join(pieces)},
        {"type": "response.output_item.done", "output_index": index, "item": item},
    ]
    return events, item


def reasoning_events(
    index: int, item_id: str, parts: Sequence[Sequence[str]], encrypted: str | None
) -> Built:
    """A reasoning item whose summary parts stream in ``parts`` (pieces of each)."""
    item = reasoning_item(item_id, ["".join(pieces) for pieces in parts], encrypted)
    events: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": index, "item": _added(item)}
    ]
    for number, pieces in enumerate(parts):
        at = {"item_id": item_id, "output_index": index, "summary_index": number}
        done = {"type": "summary_text", "text": "".join(pieces)}
        events += [
            {"type": "response.reasoning_summary_part.added", **at, "part": dict(done, text="")},
            *({"type": "response.reasoning_summary_text.delta", **at, "delta": p} for p in pieces),
            {"type": "response.reasoning_summary_text.done", **at, "text": done["text"]},
            {"type": "response.reasoning_summary_part.done", **at, "part": done},
        ]
    events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return events, item


def stream(
    *built: Built,
    terminal: str = "response.completed",
    usage_tokens: dict[str, Any] | None = None,
    **final: Any,
) -> list[str]:
    """Every event of a streamed reply made of ``built`` items, as server-sent events."""
    items = [item for _, item in built]
    status = {"response.completed": "completed", "response.incomplete": "incomplete"}
    start = dict(response(), status="in_progress", output=[], usage=None)
    end = response(items, status=status.get(terminal, "failed"), usage_tokens=usage_tokens, **final)
    events = [
        {"type": "response.created", "response": start},
        {"type": "response.in_progress", "response": start},
        *(event for item_events, _ in built for event in item_events),
        {"type": terminal, "response": end},
    ]
    return [
        sse(dict(event, sequence_number=n), event=event["type"]) for n, event in enumerate(events)
    ]


def text_stream(pieces: Sequence[str], **final: Any) -> list[str]:
    return stream(text_events(0, pieces), **final)


def tool_stream(calls: Sequence[tuple[str, str, dict[str, Any]]]) -> list[str]:
    """Calls whose JSON arguments stream in pieces of four characters."""
    built = []
    for index, (call_id, name, arguments) in enumerate(calls):
        raw = json.dumps(arguments)
        built.append(
            call_events(index, call_id, name, [raw[i : i + 4] for i in range(0, len(raw), 4)])
        )
    return stream(*built)
