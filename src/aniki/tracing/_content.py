"""Messages as the GenAI conventions record them: JSON text of ``{"role", "parts"}`` objects
(``gen_ai.input.messages``, ``gen_ai.output.messages``).

Pure functions, no OpenTelemetry: the observer calls them only with ``include_content=True``.
The agent's instructions are the leading ``system`` message of what a model call is sent, so
they are recorded there, as sent. An attachment is described (media type, name, size or URL),
never copied: a span is no place for an image's bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..messages import Message, ToolCall
from ..parts import Attachment, Reasoning
from ..providers.base import ModelResponse

__all__ = ["messages_json", "reply_json"]

Part = dict[str, Any]


def messages_json(messages: Iterable[Message]) -> str:
    """``messages`` as a ``gen_ai.input.messages`` value."""
    return _dumps([{"role": m.role, "parts": _message_parts(m)} for m in messages])


def reply_json(reply: ModelResponse | Message) -> str:
    """The model's reply as a ``gen_ai.output.messages`` value."""
    if isinstance(reply, Message):
        parts = _message_parts(reply)
        finish = None
    else:
        parts = _parts(reply.reasoning, reply.content, reply.tool_calls)
        finish = reply.finish_reason
    said = {
        "role": "assistant",
        "parts": parts,
        "finish_reason": finish or ("tool_calls" if reply.tool_calls else "stop"),
    }
    return _dumps([said])


def _message_parts(message: Message) -> list[Part]:
    if message.role == "tool":
        parts: list[Part] = [
            {"type": "tool_call_response", "id": message.tool_call_id, "response": message.content}
        ]
    else:
        parts = _parts(message.reasoning, message.content, message.tool_calls)
    parts.extend(_attachment(a) for a in message.attachments)
    return parts


def _parts(
    reasoning: Iterable[Reasoning], content: str, tool_calls: Iterable[ToolCall]
) -> list[Part]:
    parts: list[Part] = [{"type": "reasoning", "content": r.text} for r in reasoning if r.text]
    if content:
        parts.append({"type": "text", "content": content})
    parts.extend(_call(call) for call in tool_calls)
    return parts


def _call(call: ToolCall) -> Part:
    try:
        arguments: Any = json.loads(call.arguments) if call.arguments.strip() else {}
    except (ValueError, RecursionError):  # recorded as the model sent it
        arguments = call.arguments
    return {"type": "tool_call", "id": call.id, "name": call.name, "arguments": arguments}


def _attachment(attachment: Attachment) -> Part:
    if attachment.url is not None:
        part: Part = {"type": "uri", "uri": attachment.url}
    else:
        # Not the conventions' "blob", whose bytes are required: see above.
        part = {"type": "attachment", "size": len(attachment.data or b"")}
    part["mime_type"] = attachment.media_type
    modality = attachment.media_type.partition("/")[0]
    if modality in ("image", "video", "audio"):
        part["modality"] = modality
    if attachment.name:
        part["name"] = attachment.name
    return part


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
