"""Anthropic Messages replies in the documented wire shapes, for the fake server.

A whole reply is a ``message`` object. A stream is a sequence of named server-sent events:
``message_start``, then per content block ``content_block_start`` / ``content_block_delta``
(``text_delta`` or ``input_json_delta``) / ``content_block_stop``, with ``ping`` events
anywhere, then ``message_delta`` (stop reason, output usage) and ``message_stop``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .fake_server import sse

MODEL = "claude-sonnet-4-5-20250929"


def usage(input_tokens: int = 21, output_tokens: int = 9, **extra: int) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": extra.get("cache_creation_input_tokens", 0),
        "cache_read_input_tokens": extra.get("cache_read_input_tokens", 0),
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_use_block(block_id: str, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": block_id, "name": name, "input": tool_input}


def message(
    content: Sequence[dict[str, Any]] = (),
    *,
    stop_reason: str | None = None,
    usage_tokens: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A whole ``message`` object."""
    has_tools = any(block["type"] == "tool_use" for block in content)
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": list(content) or [text_block("Hello!")],
        "stop_reason": stop_reason or ("tool_use" if has_tools else "end_turn"),
        "stop_sequence": None,
        "usage": usage_tokens or usage(),
    }


def event(data: dict[str, Any]) -> str:
    """One stream event, named after its ``type`` as the API does."""
    return sse(data, event=data["type"])


def message_start(input_tokens: int = 25) -> str:
    start = message([text_block("")], usage_tokens=usage(input_tokens, 1))
    start.update(content=[], stop_reason=None)
    return event({"type": "message_start", "message": start})


def block_start(index: int, block: dict[str, Any]) -> str:
    return event({"type": "content_block_start", "index": index, "content_block": block})


def text_delta(index: int, text: str) -> str:
    return event(
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "text_delta", "text": text},
        }
    )


def json_delta(index: int, partial: str) -> str:
    delta = {"type": "input_json_delta", "partial_json": partial}
    return event({"type": "content_block_delta", "index": index, "delta": delta})


def thinking_delta(index: int, thinking: str) -> str:
    delta = {"type": "thinking_delta", "thinking": thinking}
    return event({"type": "content_block_delta", "index": index, "delta": delta})


def signature_delta(index: int, signature: str) -> str:
    delta = {"type": "signature_delta", "signature": signature}
    return event({"type": "content_block_delta", "index": index, "delta": delta})


def block_stop(index: int) -> str:
    return event({"type": "content_block_stop", "index": index})


def ping() -> str:
    return event({"type": "ping"})


def message_delta(stop_reason: str = "end_turn", output_tokens: int = 12) -> str:
    return event(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        }
    )


def message_stop() -> str:
    return event({"type": "message_stop"})


def text_stream(
    pieces: Sequence[str], *, input_tokens: int = 25, output_tokens: int = 12
) -> list[str]:
    """A streamed text reply, complete."""
    return [
        message_start(input_tokens),
        block_start(0, text_block("")),
        ping(),
        *(text_delta(0, piece) for piece in pieces),
        block_stop(0),
        message_delta("end_turn", output_tokens),
        message_stop(),
    ]


def tool_stream(calls: Sequence[tuple[str, str, dict[str, Any]]], *, text: str = "") -> list[str]:
    """A streamed reply asking for tools, each input sent in small ``input_json_delta`` pieces."""
    out = [message_start()]
    index = 0
    if text:
        out += [block_start(0, text_block("")), text_delta(0, text), block_stop(0)]
        index = 1
    for block_id, name, tool_input in calls:
        raw = json.dumps(tool_input)
        out.append(block_start(index, tool_use_block(block_id, name, {})))
        out += [json_delta(index, raw[i : i + 5]) for i in range(0, len(raw), 5)]
        out.append(block_stop(index))
        index += 1
    return [*out, message_delta("tool_use", 30), message_stop()]


def error_body(message_text: str, *, type: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": type, "message": message_text}}
