"""An MCP tool result as the ``tool`` message answering the call (no I/O).

Text blocks are joined by newlines. An image, or a PDF or image sent as an embedded
resource, becomes an :class:`~aniki.Attachment` on the message when the server was made with
``attach_media=True`` (for providers whose APIs take them in a tool result: Anthropic, OpenAI
Responses), and is otherwise described in the text, as audio always is (no API takes audio in
a tool result). A text resource is included with its URI; a resource link is described. A
result with no content but structured content is sent as its JSON. An ``isError`` result
says the tool failed, with its text. A text cut while it was read (over ``max_result_bytes``)
ends with a note saying so; cut media are described as cut.
"""

from __future__ import annotations

import base64
import binascii
import json

from mcp import types

from .._secrets import Secrets, redact
from ..messages import MAX_ATTACHMENT_BYTES, MEDIA_TYPES, Attachment, Message, ToolCall
from ..tools import EMPTY_RESULT
from ._clip import CUT_MARK

__all__ = ["failed", "result_message", "safe_text"]


def safe_text(text: str) -> str:
    """``text`` as a message can hold it: lone surrogates (which JSON allows) replaced."""
    if text.isascii():
        return text
    return text.encode("utf-8", "replace").decode("utf-8")


def failed(call: ToolCall, text: str, secrets: Secrets) -> Message:
    """The ``tool`` message saying a call failed: ``text``, its secrets hidden."""
    return Message("tool", safe_text(redact(text, secrets)), tool_call_id=call.id)


def result_message(
    call: ToolCall,
    result: types.CallToolResult,
    *,
    tool: str,
    attach_media: bool,
    secrets: Secrets,
) -> Message:
    """The ``tool`` message answering ``call`` with ``result`` from the MCP tool ``tool``."""
    parts: list[str] = []
    attachments: list[Attachment] = []
    for block in result.content:
        parts.append(_block_text(block, attachments if attach_media else None))
    if not result.content and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(part for part in parts if part)
    if result.is_error:
        said = text or "it gave no details"
        return failed(call, f"Error: the MCP tool {tool!r} failed: {said}", secrets)
    return Message(
        "tool",
        safe_text(text) or EMPTY_RESULT,
        tool_call_id=call.id,
        attachments=tuple(attachments),
    )


def _block_text(block: object, attachments: list[Attachment] | None) -> str:
    """What one content block adds to the text; an attachment it adds to ``attachments``
    (``None``: describe media instead)."""
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent):
        return _media("image", block.mime_type, block.data, None, attachments)
    if isinstance(block, types.AudioContent):
        return _media("audio clip", block.mime_type, block.data, None, None)
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return f"[resource {resource.uri}]\n{resource.text}"
        mime = resource.mime_type or "application/octet-stream"
        return _media(f"resource {resource.uri}", mime, resource.blob, resource.uri, attachments)
    if isinstance(block, types.ResourceLink):
        about = f" ({block.mime_type})" if block.mime_type else ""
        said = f": {block.description}" if block.description else ""
        return f"[resource link {block.name} <{block.uri}>{about}{said}]"
    kind = getattr(block, "type", type(block).__name__)
    return f"[{kind} content, not shown]"


def _media(
    what: str,
    mime: str,
    data: str,
    name: str | None,
    attachments: list[Attachment] | None,
) -> str:
    if CUT_MARK in data:
        return f"[{what} ({mime}) over the max_result_bytes limit, not read]"
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return f"[{what} ({mime}) sent as invalid base64, not shown]"
    kind = MEDIA_TYPES.get(mime)
    takes = kind in ("image", "document") and 0 < len(raw) <= MAX_ATTACHMENT_BYTES
    if attachments is not None and takes:
        attachments.append(Attachment(mime, data=raw, name=_file_name(name)))
        return f"[{what} ({mime}, {len(raw):,} bytes) attached]"
    return f"[{what} ({mime}, {len(raw):,} bytes), not shown]"


def _file_name(uri: str | None) -> str | None:
    if not uri:
        return None
    tail = uri.rstrip("/").rsplit("/", 1)[-1]
    return safe_text(tail) or None
