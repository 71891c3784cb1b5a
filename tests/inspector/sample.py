"""A conversation worth inspecting, made by real runs: a summarizing policy over the store,
tool calls, an image, reasoning, hostile text, and a provider that bills like a prompt cache.

The mock provider's usage is computed from each request, the way a caching provider bills:
``input_tokens`` are the request's tokens (4 characters a token), ``cache_read_tokens`` the
part that repeats the previous request's prefix.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

from aniki import Agent, Attachment, Message, Reasoning, Runner, ToolCall, Usage, tool
from aniki.providers.base import ModelRequest, ModelResponse
from aniki.sessions import SummarizingSession
from aniki.testing import MockProvider

HOSTILE = (
    "<script>document.title='pwned'</script>"
    "<img src=x onerror=\"document.title='pwned'\">"
    "{{ 7*7 }} {% raw %} [bold]not bold[/bold] &amp; \u202eevil"
)
"""Text that would run, render or reorder if the page treated data as markup."""

SUMMARY_TEXT = "The user asked about the weather in <b>Paris</b> and liked it."
TURNS = 14


def png(width: int = 8, height: int = 8) -> bytes:
    """A small valid PNG: a red square."""
    row = b"\x00" + b"\xff\x00\x00" * width
    raw = row * height

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}. {HOSTILE}"


class CachingModel:
    """Replies like a model behind a prompt cache, and bills like one."""

    def __init__(self) -> None:
        self.previous: list[str] = []
        self.calls = 0

    def __call__(self, request: ModelRequest) -> ModelResponse:
        texts = [m.role + m.content for m in request.messages]
        tokens = sum(len(t) // 4 + 4 for t in texts)
        shared = 0
        for old, new in zip(self.previous, texts, strict=False):
            if old != new:
                break
            shared += len(new) // 4 + 4
        self.previous = texts
        self.calls += 1
        usage = Usage(
            input_tokens=tokens,
            output_tokens=12,
            requests=1,
            cache_read_tokens=shared,
        )
        last = request.messages[-1]
        if last.role == "user" and "weather" in last.content:
            call = ToolCall(f"call_{self.calls}", "weather", '{"city": "Paris"}')
            return ModelResponse(tool_calls=(call,), usage=usage, model="mock-cache-1")
        reasoning = (Reasoning("The user wants an answer; keep it short.", signature="sig"),)
        return ModelResponse(
            content=f"Answer {self.calls}: {HOSTILE}",
            usage=usage,
            model="mock-cache-1",
            reasoning=reasoning,
        )


def converse(store_session: Any, turns: int = TURNS) -> list[Any]:
    """Run ``turns`` turns into ``store_session`` through a summarizing policy; the results."""
    summarizer = Agent(
        name="summarizer", model="mock", provider=MockProvider(handler=lambda r: SUMMARY_TEXT)
    )
    session = SummarizingSession(store_session, summarizer, max_tokens=900, keep_recent=300)
    agent = Agent(
        name="helper",
        instructions="Answer briefly.",
        model="mock-cache-1",
        provider=MockProvider(handler=CachingModel()),
        tools=[weather],
    )
    runner = Runner()
    results = []
    for turn in range(turns):
        if turn == 1:
            message: Any = Message(
                "user",
                "What is in this picture?",
                attachments=(Attachment("image/png", data=png()),),
            )
        elif turn % 3 == 0:
            message = f"What is the weather like? (turn {turn})"
        else:
            message = f"Turn {turn}: {HOSTILE} " + "tell me more " * 20
        results.append(runner.run_sync(agent, message=message, session=session))
    return results
