"""What a model call's span says of the provider's reply, against a real HTTP server per wire
format: the reply's id, how long a stream took to deliver text, and the cache figures the
provider actually reports."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pytest

from aniki import Agent, InMemorySession, Runner, tool
from tests.core.helpers import MODES, drive
from tests.providers import anthropic_shapes as anth
from tests.providers import responses_shapes as rsp
from tests.providers.fake_server import FakeServer, Respond, Stream
from tests.providers.vendors import ALL_VENDORS, ANTHROPIC, OPENAI, RESPONSES, Vendor

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from .spans import Spans

IDS = {
    OPENAI.name: "chatcmpl-AbC123",
    ANTHROPIC.name: "msg_01XFDUDYJgAACzvnptvVoYEL",
    RESPONSES.name: rsp.RESPONSE_ID,
}
"""The reply id each wire format's scripted replies carry."""

TTFC = "gen_ai.response.time_to_first_chunk"
CACHE_WRITE = "gen_ai.usage.cache_creation.input_tokens"
CACHE_READ = "gen_ai.usage.cache_read.input_tokens"
CALL = ("call_1", "lookup", {"city": "Oslo"})
PAUSE = 0.4
"""Seconds the slow server waits after the first text delta."""


@tool
def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: The city.
    """
    return f"4 degrees in {city}"


def agent_for(vendor: Vendor, url: str) -> Agent:
    return Agent(
        "Forecaster",
        "Answer.",
        model="some-model",
        provider=vendor.provider(url),
        tools=[lookup],
        session=InMemorySession("chat-7"),
    )


def tool_then_text(vendor: Vendor, mode: str) -> list[Respond | Stream]:
    if mode == "stream":
        return [
            Stream(vendor.tool_events([CALL])),
            Stream(vendor.text_events(["Four ", "degrees."])),
        ]
    return [Respond(200, vendor.tool_reply([CALL])), vendor.ok("Four degrees.")]


async def traced_run(vendor: Vendor, mode: str, replies: Sequence[Respond | Stream]) -> None:
    async with FakeServer() as server:
        server.enqueue(*replies)
        await drive(mode, Runner(), agent_for(vendor, server.url), message="Weather in Oslo?")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("vendor", ALL_VENDORS, ids=lambda vendor: vendor.name)
async def test_each_chat_span_has_the_reply_s_id(vendor: Vendor, mode: str, spans: Spans) -> None:
    await traced_run(vendor, mode, tool_then_text(vendor, mode))

    chats = spans.named("chat ")
    assert len(chats) == 2
    assert [chat.attributes["gen_ai.response.id"] for chat in chats] == [IDS[vendor.name]] * 2
    assert "gen_ai.response.id" not in spans.one("invoke_agent ").attributes


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("vendor", [OPENAI, RESPONSES], ids=lambda vendor: vendor.name)
async def test_openai_calls_leave_the_cache_writes_they_do_not_report_out(
    vendor: Vendor, mode: str, spans: Spans
) -> None:
    await traced_run(vendor, mode, tool_then_text(vendor, mode))

    for span in [*spans.named("chat "), spans.one("invoke_agent ")]:
        assert CACHE_WRITE not in span.attributes, span.name
        assert span.attributes[CACHE_READ] == 0  # reported: cached_tokens is 0


@pytest.mark.parametrize("mode", MODES)
async def test_anthropic_calls_keep_the_cache_writes_they_report(mode: str, spans: Spans) -> None:
    written = anth.usage(20, 5, cache_creation_input_tokens=1800)
    replies = (
        [Stream(anth.text_stream(["Hi."])), Stream(anth.text_stream(["Again."]))]
        if mode == "stream"
        else [
            Respond(200, anth.message([anth.text_block("Hi.")], usage_tokens=written)),
            ANTHROPIC.ok("Again."),
        ]
    )
    async with FakeServer() as server:
        server.enqueue(*replies)
        agent = agent_for(ANTHROPIC, server.url)
        await drive(mode, Runner(), agent, message="Hello")
        await drive(mode, Runner(), agent, message="Hello again")

    chats = spans.named("chat ")
    first = 1800 if mode != "stream" else 0
    assert [chat.attributes[CACHE_WRITE] for chat in chats] == [first, 0]  # a zero is a figure
    assert [run.attributes[CACHE_WRITE] for run in spans.named("invoke_agent ")] == [first, 0]


@pytest.mark.parametrize("vendor", ALL_VENDORS, ids=lambda vendor: vendor.name)
async def test_a_stream_records_when_its_first_text_arrived(vendor: Vendor, spans: Spans) -> None:
    events = vendor.text_events(["Four ", "degrees ", "in Oslo."])
    first = vendor.text_prefix + 1  # up to and including the first text delta
    async with SlowStream(events[:first], events[first:]) as server:
        agent = Agent("Forecaster", model="some-model", provider=vendor.provider(server.url))
        result = await drive("stream", Runner(), agent, message="Weather?")
    assert result.output == "Four degrees in Oslo."

    chat = spans.one("chat ")
    took = seconds(chat)
    assert took >= PAUSE
    assert 0 < chat.attributes[TTFC] < PAUSE <= took - chat.attributes[TTFC] + 0.05


@pytest.mark.parametrize("vendor", ALL_VENDORS, ids=lambda vendor: vendor.name)
async def test_only_streamed_text_has_a_time_to_first_chunk(vendor: Vendor, spans: Spans) -> None:
    await traced_run(vendor, "stream", tool_then_text(vendor, "stream"))
    await traced_run(vendor, "run", tool_then_text(vendor, "run"))

    streamed = [chat.attributes.get(TTFC) for chat in spans.named("chat ")[:2]]
    assert streamed[0] is None  # tool calls alone: no text ever came before the whole reply
    assert isinstance(streamed[1], float)
    assert all(TTFC not in chat.attributes for chat in spans.named("chat ")[2:])


def seconds(span: ReadableSpan) -> float:
    assert span.start_time is not None and span.end_time is not None
    return (span.end_time - span.start_time) / 1e9


class SlowStream:
    """A loopback server that answers each request with an event stream sent in two parts,
    :data:`PAUSE` seconds apart."""

    def __init__(self, head: Sequence[str], tail: Sequence[str]) -> None:
        self._parts = (head, tail)
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def __aenter__(self) -> SlowStream:
        self._server = await asyncio.start_server(self._answer, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        await asyncio.wait_for(reader.readexactly(length), 10)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        )
        for index, part in enumerate(self._parts):
            if index:
                await asyncio.sleep(PAUSE)
            body = "".join(part).encode()
            writer.write(f"{len(body):x}\r\n".encode() + body + b"\r\n")
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()
