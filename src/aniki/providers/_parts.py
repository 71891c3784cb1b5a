"""Attachments and reasoning in each wire format (pure, no I/O): Chat Completions content
parts, Responses API input content, Messages API blocks, and the thinking blocks the
Messages API takes back.

What an API cannot take is a :class:`~aniki.UserError` naming what to do instead, raised
while the request is built, before anything is sent.
"""

from __future__ import annotations

import base64
from typing import Any

from ..errors import UserError
from ..messages import Attachment, Reasoning

__all__ = ["anthropic_block", "anthropic_thinking", "kinds", "openai_part", "responses_part"]


def kinds(attachments: tuple[Attachment, ...]) -> str:
    """The kinds and media types of ``attachments``, for an error message."""
    return " and ".join(sorted({f"{part.kind} ({part.media_type})" for part in attachments}))


def openai_part(part: Attachment) -> dict[str, Any]:
    """One attachment as a Chat Completions content part."""
    if part.kind == "image":
        url = part.url if part.url is not None else _data_url(part)
        return {"type": "image_url", "image_url": {"url": url}}
    data = _inline(part, "the Chat Completions API")
    if part.media_type == "text/plain":
        heading = f"[{part.name}]\n" if part.name else ""
        return {"type": "text", "text": heading + _text(part, data)}
    if part.kind == "audio":
        audio_format = "wav" if part.media_type == "audio/wav" else "mp3"
        return {
            "type": "input_audio",
            "input_audio": {"data": _base64(data), "format": audio_format},
        }
    return {
        "type": "file",
        "file": {"filename": part.name or "document.pdf", "file_data": _data_url(part)},
    }


def responses_part(part: Attachment) -> dict[str, Any]:
    """One attachment as Responses API input content (in a message or a tool's output)."""
    if part.kind == "audio":
        raise UserError(
            f"the OpenAI Responses API takes no audio ({part.media_type}) in its input; "
            "transcribe it first, or use the Chat Completions provider (openai)"
        )
    if part.kind == "image":
        url = part.url if part.url is not None else _data_url(part)
        return {"type": "input_image", "image_url": url, "detail": "auto"}
    if part.media_type == "text/plain":
        heading = f"[{part.name}]\n" if part.name else ""
        return {"type": "input_text", "text": heading + _text(part, _inline(part, _RESPONSES))}
    if part.url is not None:  # a PDF the API fetches itself
        by_url = {"type": "input_file", "file_url": part.url}
        return by_url | ({"filename": part.name} if part.name else {})
    filename = part.name or "document.pdf"  # the API wants a name with inline data
    return {"type": "input_file", "filename": filename, "file_data": _data_url(part)}


def anthropic_block(part: Attachment) -> dict[str, Any]:
    """One attachment as a Messages API content block."""
    if part.kind == "audio":
        raise UserError(
            f"the Anthropic Messages API does not take audio ({part.media_type}); "
            "transcribe it first, or use a provider that takes audio (openai)"
        )
    source: dict[str, Any]
    if part.media_type == "text/plain":
        text = _text(part, _inline(part, "the Anthropic Messages API"))
        source = {"type": "text", "media_type": "text/plain", "data": text}
    elif part.data is not None:
        source = {"type": "base64", "media_type": part.media_type, "data": _base64(part.data)}
    else:
        source = {"type": "url", "url": part.url}
    block = {"type": "image" if part.kind == "image" else "document", "source": source}
    if part.kind == "document" and part.name:
        block["title"] = part.name
    return block


def anthropic_thinking(part: Reasoning) -> dict[str, Any] | None:
    """The thinking block to send back, or ``None`` for reasoning the API would refuse:
    another provider's (its ``provider`` says so), or an unsigned one (reasoning stored
    without a ``provider``, written by another provider into the same history)."""
    if part.provider not in (None, "anthropic"):
        return None
    if part.redacted is not None:
        return {"type": "redacted_thinking", "data": part.redacted}
    if part.signature is None:
        return None
    return {"type": "thinking", "thinking": part.text, "signature": part.signature}


_RESPONSES = "the OpenAI Responses API"


def _inline(part: Attachment, api: str) -> bytes:
    if part.data is None:
        raise UserError(
            f"{api} takes a {part.kind} ({part.media_type}) only inline, not by URL "
            f"({part.url}); pass its bytes with data="
        )
    return part.data


def _text(part: Attachment, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(
            f"the text/plain attachment {part.name or ''!r} is not UTF-8 text"
        ) from None


def _base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _data_url(part: Attachment) -> str:
    return f"data:{part.media_type};base64,{_base64(_inline(part, 'a data URL'))}"
