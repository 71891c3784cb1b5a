"""What each kind of MCP content becomes in the tool message (no server needed)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from aniki import Message, ToolCall
from aniki._secrets import Secrets
from aniki.mcp._results import result_message
from mcp import types

CALL = ToolCall("call_1", "look")
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
PDF = b"%PDF-1.7 fake"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def answer(*content: Any, attach: bool = False, **fields: Any) -> Message:
    result = types.CallToolResult(content=list(content), **fields)
    return result_message(CALL, result, tool="look", attach_media=attach, secrets=Secrets([]))


def test_text_blocks_are_joined() -> None:
    message = answer(types.TextContent(text="one"), types.TextContent(text="two"))
    assert (message.role, message.tool_call_id, message.content) == ("tool", "call_1", "one\ntwo")


def test_an_empty_result_says_so() -> None:
    assert answer().content == "(no output)"


def test_structured_content_alone_is_sent_as_json() -> None:
    assert answer(structured_content={"n": 1, "é": True}).content == '{"n": 1, "é": true}'


def test_an_error_result_says_the_tool_failed() -> None:
    failed = answer(types.TextContent(text="disk full"), is_error=True)
    assert failed.content == "Error: the MCP tool 'look' failed: disk full"
    assert answer(is_error=True).content == "Error: the MCP tool 'look' failed: it gave no details"


@pytest.mark.parametrize("attach", [False, True])
def test_an_image_is_attached_only_when_asked(attach: bool) -> None:
    message = answer(types.ImageContent(data=b64(PNG), mime_type="image/png"), attach=attach)
    said = "attached" if attach else "not shown"
    assert message.content == f"[image (image/png, 24 bytes) {said}]".replace(") n", "), n")
    assert [a.data for a in message.attachments] == ([PNG] if attach else [])


def test_audio_and_unknown_media_are_described() -> None:
    message = answer(
        types.AudioContent(data=b64(b"RIFF...."), mime_type="audio/wav"),
        types.ImageContent(data=b64(b"BM.."), mime_type="image/bmp"),
        types.ImageContent(data="%%% not base64", mime_type="image/png"),
        attach=True,
    )
    assert message.content.splitlines() == [
        "[audio clip (audio/wav, 8 bytes), not shown]",
        "[image (image/bmp, 4 bytes), not shown]",
        "[image (image/png) sent as invalid base64, not shown]",
    ]
    assert message.attachments == ()


def test_resources_are_included_attached_or_linked() -> None:
    message = answer(
        types.EmbeddedResource(
            resource=types.TextResourceContents(uri="file:///notes.txt", text="hello")
        ),
        types.EmbeddedResource(
            resource=types.BlobResourceContents(
                uri="file:///docs/q3.pdf", mime_type="application/pdf", blob=b64(PDF)
            )
        ),
        types.ResourceLink(
            name="report", uri="https://example.com/r", mime_type="text/html", description="Q3"
        ),
        attach=True,
    )
    assert message.content.splitlines() == [
        "[resource file:///notes.txt]",
        "hello",
        "[resource file:///docs/q3.pdf (application/pdf, 13 bytes) attached]",
        "[resource link report <https://example.com/r> (text/html): Q3]",
    ]
    (pdf,) = message.attachments
    assert (pdf.media_type, pdf.data, pdf.name) == ("application/pdf", PDF, "q3.pdf")


def test_text_with_a_lone_surrogate_is_still_a_message() -> None:
    assert answer(types.TextContent(text="a\ud800b")).content == "a?b"
