"""An image sent with a question, and a model's thinking streamed and kept
(docs/attachments.md). The conversation is stored in SQLite, attachments and reasoning
included, and read back by a new session object as a restarted process would."""

from __future__ import annotations

import asyncio
import sys
import zlib
from pathlib import Path

from _model import model_and_provider

from aniki import (
    Agent,
    Attachment,
    Message,
    ModelRequest,
    Reasoning,
    ReasoningDelta,
    Runner,
    TextDelta,
)
from aniki.sessions import SQLiteSession
from aniki.testing import MockReply


def tiny_png() -> bytes:
    """A valid 1 x 1 red PNG, made here so that the example needs no file."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = (1).to_bytes(4, "big") * 2 + bytes([8, 2, 0, 0, 0])
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def script(request: ModelRequest) -> MockReply:
    image = request.messages[-1].attachments[0]
    return MockReply(
        content=f"It is a single red pixel ({len(image.data or b'')} bytes of PNG).",
        reasoning=(Reasoning("The image is 1 x 1; its only pixel is pure red."),),
    )


async def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("attachments.db")
    model, provider = model_and_provider(script)
    session = SQLiteSession("pixel-question", path=path)
    session.clear()
    agent = Agent("Looker", "Describe images in one sentence.", model=model, provider=provider)
    question = Message(
        "user",
        "What is in this image?",
        attachments=(Attachment("image/png", data=tiny_png(), name="pixel.png"),),
    )
    async with Runner().stream(agent, message=question, session=session) as stream:
        async for event in stream:
            if isinstance(event, ReasoningDelta):
                print(f"(thinking) {event.text}")
            elif isinstance(event, TextDelta):
                print(event.text, end="", flush=True)
    print()

    again = SQLiteSession("pixel-question", path=path).get_messages()  # read from the file
    sent, reply = again[0], again[-1]
    print(f"stored: {sent.attachments[0]}")
    print(f"stored reasoning: {[part.text for part in reply.reasoning]}")


if __name__ == "__main__":
    asyncio.run(main())
