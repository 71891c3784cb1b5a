"""Attachments and reasoning: the message types, and what each wire format sends and reads,
asserted on the request bodies the fake server receives over real HTTP."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from aniki import (
    Attachment,
    Message,
    ModelRequest,
    ModelResponse,
    Reasoning,
    ReasoningDelta,
    ToolCall,
    UserError,
    ValidationError,
)
from aniki.messages import MAX_ATTACHMENT_BYTES
from aniki.providers import OpenAIProvider
from aniki.providers.anthropic import AnthropicProvider
from aniki.tokens import IMAGE_TOKENS, EstimatingCounter

from . import anthropic_shapes as anth
from . import openai_shapes as oai
from .fake_server import FakeServer, Respond, Stream
from .vendors import API_KEY

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001")
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF"
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt "
B64 = {name: base64.b64encode(data).decode() for name, data in (("png", PNG), ("pdf", PDF))}


# --- the types -------------------------------------------------------------------------


def test_an_attachment_round_trips_through_a_dict_and_json_safe_text() -> None:
    message = Message(
        "user",
        "",
        attachments=(
            Attachment("image/png", data=PNG, name="dot.png"),
            Attachment("application/pdf", url="https://example.com/a.pdf"),
        ),
    )
    data = message.to_dict()
    assert data["attachments"][0] == {
        "media_type": "image/png",
        "data": B64["png"],
        "name": "dot.png",
    }
    assert Message.from_dict(data) == message
    assert "data=<20 bytes>" in repr(message.attachments[0])  # never the bytes themselves
    assert [part.kind for part in message.attachments] == ["image", "document"]


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: Attachment("image/tiff", data=PNG), "media_type must be one of"),
        (lambda: Attachment("image/png"), "exactly one of data="),
        (lambda: Attachment("image/png", data=PNG, url="https://x.io/a.png"), "exactly one"),
        (lambda: Attachment("image/png", data=b""), "empty"),
        (lambda: Attachment("image/png", data="iVBOR"), "must be bytes"),
        (lambda: Attachment("image/png", url="file:///etc/passwd"), "http:// or https://"),
        (
            lambda: Attachment("image/png", data=bytes(MAX_ATTACHMENT_BYTES + 1)),
            "over the limit",
        ),
        (lambda: Attachment.from_dict({"media_type": "image/png", "data": "@@"}), "base64"),
        (lambda: Attachment.from_dict({"media_type": "image/png", "bytes": "x"}), "unknown key"),
        (lambda: Reasoning(), "needs text, a signature or a redacted payload"),
        (
            lambda: Message("assistant", "x", attachments=(Attachment("image/png", data=PNG),)),
            "only allowed on user and tool",
        ),
        (lambda: Message("user", "x", reasoning=(Reasoning("t"),)), "only allowed on assistant"),
        (lambda: Message("assistant", "", reasoning=(Reasoning("t"),)), "content is empty"),
    ],
)
def test_bad_attachments_and_reasoning_are_refused_saying_what_to_fix(
    make: Any, words: str
) -> None:
    with pytest.raises(ValidationError, match=words):
        make()


def test_reasoning_records_the_provider_that_wrote_it_only_when_known() -> None:
    mine = Reasoning("Add.", signature="rs_1", redacted="gAAAA", provider="openai-responses")
    assert mine.to_dict() == {
        "text": "Add.",
        "signature": "rs_1",
        "redacted": "gAAAA",
        "provider": "openai-responses",
    }
    assert Reasoning.from_dict(mine.to_dict()) == mine
    old = Reasoning("Add.", signature="sig")  # as stored before providers were recorded
    assert "provider" not in old.to_dict()
    assert Reasoning.from_dict({"text": "Add.", "signature": "sig"}) == old
    with pytest.raises(ValidationError, match="provider must be a provider's name"):
        Reasoning("Add.", provider="")


def test_a_user_or_tool_message_may_be_attachments_only() -> None:
    image = Attachment("image/png", data=PNG)
    assert Message("user", "", attachments=(image,)).content == ""
    assert Message("tool", "", tool_call_id="c1", attachments=[image.to_dict()]).attachments == (
        image,
    )
    with pytest.raises(ValidationError, match="needs non-empty content or attachments"):
        Message("user", "")


def test_equality_and_budgets_count_what_a_message_carries() -> None:
    with_image = Message("user", "look", attachments=(Attachment("image/png", data=PNG),))
    assert with_image != Message("user", "look")
    counter = EstimatingCounter()
    plain = counter.count_message(Message("user", "look"))
    assert counter.count_message(with_image) == plain + IMAGE_TOKENS
    thought = Message("assistant", "ok", reasoning=(Reasoning("x" * 400),))
    assert counter.count_message(thought) == counter.count_message(Message("assistant", "ok")) + 100


# --- Chat Completions ------------------------------------------------------------------


def openai(server: FakeServer) -> OpenAIProvider:
    return OpenAIProvider(api_key=API_KEY, base_url=server.url + "/v1", max_retries=0)


async def test_chat_completions_sends_attachments_as_content_parts(server: FakeServer) -> None:
    server.enqueue(Respond(200, oai.completion("Seen.")))
    user = Message(
        "user",
        "What are these?",
        attachments=(
            Attachment("image/png", data=PNG),
            Attachment("image/jpeg", url="https://example.com/cat.jpg"),
            Attachment("application/pdf", data=PDF, name="report.pdf"),
            Attachment("text/plain", data="notes ✓".encode(), name="notes.txt"),
            Attachment("audio/wav", data=WAV),
        ),
    )
    earlier = Message("assistant", "Hm.", reasoning=(Reasoning("private", signature="s"),))
    await openai(server).complete(ModelRequest(model="m", messages=(earlier, user)))
    sent = server.requests[0].json()["messages"]
    assert sent[0] == {"role": "assistant", "content": "Hm."}  # reasoning is not sent back
    assert sent[1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "What are these?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64['png']}"}},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
            {
                "type": "file",
                "file": {
                    "filename": "report.pdf",
                    "file_data": f"data:application/pdf;base64,{B64['pdf']}",
                },
            },
            {"type": "text", "text": "[notes.txt]\nnotes ✓"},
            {
                "type": "input_audio",
                "input_audio": {"data": base64.b64encode(WAV).decode(), "format": "wav"},
            },
        ],
    }


@pytest.mark.parametrize(
    ("message", "words"),
    [
        (
            Message(
                "tool", "", tool_call_id="c1", attachments=(Attachment("image/png", data=PNG),)
            ),
            "takes only text in a tool result",
        ),
        (
            Message(
                "user", "x", attachments=(Attachment("application/pdf", url="https://a.io/r.pdf"),)
            ),
            "only inline, not by URL",
        ),
    ],
)
async def test_chat_completions_refuses_what_it_cannot_take_before_sending(
    server: FakeServer, message: Message, words: str
) -> None:
    calls = (ToolCall("c1", "shot", "{}"),)
    history = (Message("user", "go"), Message("assistant", tool_calls=calls), message)
    if message.role == "user":
        history = (message,)
    with pytest.raises(UserError, match=words):
        await openai(server).complete(ModelRequest(model="m", messages=history))
    assert server.requests == []


async def test_reasoning_content_of_a_compatible_server_is_kept(server: FakeServer) -> None:
    reply = oai.completion("4")
    reply["choices"][0]["message"]["reasoning_content"] = "2 + 2 is 4."
    server.enqueue(Respond(200, reply))
    server.enqueue(
        Stream(
            oai.events(
                oai.chunk({"role": "assistant", "reasoning_content": "Two "}),
                oai.chunk({"reasoning_content": "and two."}),
                oai.chunk({"content": "4"}),
                oai.chunk(finish_reason="stop"),
            )
        )
    )
    request = ModelRequest(model="m", messages=(Message("user", "2 + 2?"),))
    whole = await openai(server).complete(request)
    assert whole.to_message().reasoning == (Reasoning("2 + 2 is 4.", provider="openai"),)
    items = [item async for item in openai(server).stream(request)]
    assert [i.text for i in items if isinstance(i, ReasoningDelta)] == ["Two ", "and two."]
    streamed = items[-1]
    assert isinstance(streamed, ModelResponse)
    assert streamed.reasoning == (Reasoning("Two and two.", provider="openai"),)
    assert streamed.content == "4"


# --- Anthropic Messages ----------------------------------------------------------------


def anthropic(server: FakeServer) -> AnthropicProvider:
    return AnthropicProvider(api_key=API_KEY, base_url=server.url, max_retries=0)


async def test_messages_api_sends_blocks_and_signed_thinking_back(server: FakeServer) -> None:
    server.enqueue(Respond(200, anth.message([anth.text_block("Done.")])))
    history = (
        Message(
            "user",
            "Summarise.",
            attachments=(
                Attachment("application/pdf", data=PDF, name="report.pdf"),
                Attachment("image/png", url="https://example.com/chart.png"),
                Attachment("text/plain", data=b"plain notes"),
            ),
        ),
        Message(
            "assistant",
            tool_calls=(ToolCall("toolu_1", "screenshot", "{}"),),
            reasoning=(
                Reasoning("I need a screenshot.", signature="sig-A"),
                Reasoning(redacted="opaque-B"),
                Reasoning("from another provider"),  # unsigned: not Anthropic's to check
            ),
        ),
        Message(
            "tool",
            "the screen:",
            tool_call_id="toolu_1",
            attachments=(Attachment("image/png", data=PNG),),
        ),
    )
    request = ModelRequest(model="m", messages=history, settings={"prompt_cache": False})
    await anthropic(server).complete(request)
    sent = server.requests[0].json()["messages"]
    assert sent[0]["content"] == [
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": B64["pdf"]},
            "title": "report.pdf",
        },
        {"type": "image", "source": {"type": "url", "url": "https://example.com/chart.png"}},
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "plain notes"},
        },
        {"type": "text", "text": "Summarise."},
    ]
    assert sent[1]["content"] == [
        {"type": "thinking", "thinking": "I need a screenshot.", "signature": "sig-A"},
        {"type": "redacted_thinking", "data": "opaque-B"},
        {"type": "tool_use", "id": "toolu_1", "name": "screenshot", "input": {}},
    ]
    assert sent[2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": [
                {"type": "text", "text": "the screen:"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": B64["png"]},
                },
            ],
        }
    ]


async def test_messages_api_refuses_audio_before_sending(server: FakeServer) -> None:
    message = Message("user", "x", attachments=(Attachment("audio/mpeg", data=b"ID3..."),))
    with pytest.raises(UserError, match="does not take audio"):
        await anthropic(server).complete(ModelRequest(model="m", messages=(message,)))
    assert server.requests == []


def thinking_stream(pieces: tuple[str, ...], *, signature: str | None) -> Stream:
    """A streamed reply: thinking in ``pieces`` (signed when ``signature``), a redacted
    thinking block when signed, then the text "5"."""
    thinking = [anth.thinking_delta(0, piece) for piece in pieces]
    if signature is not None:
        thinking.append(anth.signature_delta(0, signature))
    redacted = [
        anth.block_start(1, {"type": "redacted_thinking", "data": "enc-2"}),
        anth.block_stop(1),
    ]
    text = 2 if signature is not None else 1
    return Stream(
        [
            anth.message_start(),
            anth.block_start(0, {"type": "thinking", "thinking": ""}),
            *thinking,
            anth.block_stop(0),
            *(redacted if signature is not None else []),
            anth.block_start(text, anth.text_block("")),
            anth.text_delta(text, "5"),
            anth.block_stop(text),
            anth.message_delta(),
            anth.message_stop(),
        ]
    )


async def test_thinking_in_a_reply_is_kept_verbatim_whole_or_streamed(server: FakeServer) -> None:
    thinking = {"type": "thinking", "thinking": "Let me add.", "signature": "sig-1"}
    redacted = {"type": "redacted_thinking", "data": "enc-2"}
    server.enqueue(Respond(200, anth.message([thinking, redacted, anth.text_block("5")])))
    server.enqueue(thinking_stream(("Let me ", "add."), signature="sig-1"))
    server.enqueue(thinking_stream(("Let ", "me add."), signature=None))
    request = ModelRequest(model="m", messages=(Message("user", "2 + 3?"),))
    expected = (
        Reasoning("Let me add.", signature="sig-1", provider="anthropic"),
        Reasoning(redacted="enc-2", provider="anthropic"),
    )
    whole = await anthropic(server).complete(request)
    assert (whole.content, whole.to_message().reasoning) == ("5", expected)
    items = [item async for item in anthropic(server).stream(request)]
    assert [i.text for i in items if isinstance(i, ReasoningDelta)] == ["Let me ", "add."]
    streamed = items[-1]
    assert isinstance(streamed, ModelResponse)
    assert (streamed.content, streamed.reasoning) == ("5", expected)
    items = [item async for item in anthropic(server).stream(request)]
    assert [i.text for i in items if isinstance(i, ReasoningDelta)] == ["Let ", "me add."]
    unsigned = items[-1]
    assert isinstance(unsigned, ModelResponse)
    assert unsigned.reasoning == (Reasoning("Let me add.", provider="anthropic"),)


# --- streamed reasoning ----------------------------------------------------------------


async def test_a_streamed_run_sends_reasoning_deltas_first_and_stores_the_reasoning() -> None:
    from aniki import Agent, InMemorySession, Runner, TextDelta
    from aniki.testing import MockProvider

    provider = MockProvider()
    provider.enqueue_response("5", reasoning=[Reasoning("2 + 3 ", signature="s1"), "is 5."])
    session = InMemorySession()
    agent = Agent("Adder", "Add.", model="m", provider=provider)
    events = [event async for event in Runner().stream(agent, message="2 + 3?", session=session)]
    shown = [
        (type(e).__name__, e.text) for e in events if isinstance(e, (TextDelta, ReasoningDelta))
    ]
    assert shown == [
        ("ReasoningDelta", "2 + 3 "),
        ("ReasoningDelta", "is 5."),
        ("TextDelta", "5"),
    ]
    stored = session.get_messages()[-1]
    assert stored.reasoning == (Reasoning("2 + 3 ", signature="s1"), Reasoning("is 5."))


def test_a_counter_does_not_keep_attachments_alive() -> None:
    counter = EstimatingCounter()
    data = bytes(1000) + b"unique to this test"
    message = Message("user", "look", attachments=(Attachment("image/png", data=data),))
    first = counter.count_message(message)
    assert counter.count_message(message) == first
    assert counter.count_message(Message("user", "text only")) > 0
    # Only the text-only message's count is kept: a kept message would keep its bytes alive.
    assert len(counter._cache) == 1


def test_thinking_only_opens_an_assistant_turn_when_two_replies_share_one() -> None:
    from aniki.providers._anthropic_wire import messages_to_wire

    first = Message("assistant", "One.", reasoning=(Reasoning("a", signature="s1"),))
    second = Message("assistant", "Two.", reasoning=(Reasoning("b", signature="s2"),))
    _, wire = messages_to_wire((Message("user", "Go"), first, second))
    assert [block["type"] for block in wire[1]["content"]] == ["thinking", "text", "text"]
