"""Chat Completions replies in the documented wire shapes, for the fake server.

The shapes follow the API reference: a ``chat.completion`` object for whole replies, and
``chat.completion.chunk`` objects sent as server-sent events, ended by ``data: [DONE]``.
With ``stream_options.include_usage`` the last chunk has empty ``choices`` and the usage.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .fake_server import sse

MODEL = "gpt-4o-mini-2024-07-18"
CREATED = 1_726_000_000


def usage(prompt: int = 11, completion: int = 7) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def completion(
    content: str | None = "Hello!",
    *,
    tool_calls: Sequence[dict[str, Any]] = (),
    finish_reason: str | None = None,
    prompt_tokens: int = 11,
    completion_tokens: int = 7,
) -> dict[str, Any]:
    """A whole ``chat.completion`` object."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if tool_calls:
        message["tool_calls"] = list(tool_calls)
    return {
        "id": "chatcmpl-AbC123",
        "object": "chat.completion",
        "created": CREATED,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
        "usage": usage(prompt_tokens, completion_tokens),
        "service_tier": "default",
        "system_fingerprint": "fp_0ba0d124f1",
    }


def chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    with_usage: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """One ``chat.completion.chunk``; ``with_usage`` makes it the final usage chunk."""
    body: dict[str, Any] = {
        "id": "chatcmpl-AbC123",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": MODEL,
        "system_fingerprint": "fp_0ba0d124f1",
    }
    if with_usage is not None:
        body["choices"] = []
        body["usage"] = usage(*with_usage)
    else:
        body["choices"] = [
            {"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish_reason}
        ]
        body["usage"] = None
    return body


def fragment(
    index: int, *, call_id: str | None = None, name: str | None = None, arguments: str = ""
) -> dict[str, Any]:
    """A tool-call delta: the first one of a call carries id and name, later ones only text."""
    function: dict[str, Any] = {"arguments": arguments}
    item: dict[str, Any] = {"index": index, "function": function}
    if call_id is not None:
        item["id"] = call_id
        item["type"] = "function"
        function["name"] = name
    return {"tool_calls": [item]}


def events(*chunks: dict[str, Any], done: bool = True) -> list[str]:
    """Chunks as server-sent events, with the closing ``[DONE]``."""
    return [sse(c) for c in chunks] + ([sse("[DONE]")] if done else [])


def text_stream(
    pieces: Sequence[str], *, finish_reason: str = "stop", usage_tokens: tuple[int, int] = (9, 4)
) -> list[str]:
    """A streamed text reply: role chunk, content chunks, finish chunk, usage, ``[DONE]``."""
    return events(
        chunk({"role": "assistant", "content": "", "refusal": None}),
        *(chunk({"content": piece}) for piece in pieces),
        chunk(finish_reason=finish_reason),
        chunk(with_usage=usage_tokens),
    )


def error_body(
    message: str, *, type: str, code: str | None = None, param: Any = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}
