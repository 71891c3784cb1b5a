"""What the aniki command says a conversation cost: tokens sent, read from and written to the
provider's prompt cache, and the requests whose server reported nothing."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..providers import openai_shapes as oai
from ..providers.fake_server import FakeServer, RecordedRequest, Stream
from .test_cli import aniki


def reply_events(text: str, usage: dict[str, Any] | None) -> list[str]:
    """A streamed reply; ``usage=None`` ends it without a usage chunk, as llama.cpp does."""
    chunks = [
        oai.chunk({"role": "assistant", "content": ""}),
        oai.chunk({"content": text}),
        oai.chunk(finish_reason="stop"),
    ]
    if usage is not None:
        final = oai.chunk(with_usage=(0, 0))
        final["usage"] = usage
        chunks.append(final)
    return oai.events(*chunks)


def cached_usage(prompt: int, completion: int, cached: int) -> dict[str, Any]:
    usage = oai.usage(prompt, completion)
    usage["prompt_tokens_details"]["cached_tokens"] = cached
    return usage


def serving(replies: list[tuple[str, dict[str, Any] | None]]) -> FakeServer:
    def handle(request: RecordedRequest) -> Stream:
        text, usage = replies.pop(0)
        return Stream(reply_events(text, usage))

    return FakeServer(handle)


async def chat(home: Path, server: FakeServer, stdin: str) -> str:
    args = ["chat", "--session", "c", "--base-url", server.url + "/v1", "--model", "m"]
    code, out, err = await aniki(home, *args, stdin=stdin)
    assert code == 0, err
    assert "Traceback" not in out + err
    return out


async def test_tokens_shows_cache_reads_per_reply_and_for_the_chat(tmp_path: Path) -> None:
    replies = [("Hello.", cached_usage(1200, 5, 0)), ("Again.", cached_usage(1300, 6, 1152))]
    async with serving(replies) as server:
        out = await chat(tmp_path, server, "Hi\n/tokens\nAnd again\n/tokens\n")
    lines = [line.strip() for line in out.splitlines()]
    reports = [line for line in lines if line.startswith(("last reply:", "this chat:"))]
    assert reports == [
        "last reply: 1,200 tokens in (0 read from cache, 0 written), 5 out, 1 request",
        "this chat: 1,200 tokens in (0 read from cache, 0 written), 5 out, 1 request",
        "last reply: 1,300 tokens in (1,152 read from cache, 0 written), 6 out, 1 request",
        "this chat: 2,500 tokens in (1,152 read from cache, 0 written), 11 out, 2 requests",
    ]
    assert "not reported" not in out


async def test_tokens_says_when_the_server_reported_none(tmp_path: Path) -> None:
    replies = [("Hello.", None), ("Again.", cached_usage(900, 4, 0))]
    async with serving(replies) as server:
        out = await chat(tmp_path, server, "Hi\n/tokens\nAnd again\n/tokens\n")
    lines = [line.strip() for line in out.splitlines()]
    reports = [line for line in lines if line.startswith(("last reply:", "this chat:"))]
    assert reports == [
        "last reply: 1 request; tokens not reported",
        "this chat: 1 request; tokens not reported",
        "last reply: 900 tokens in (0 read from cache, 0 written), 4 out, 1 request",
        "this chat: 900 tokens in (0 read from cache, 0 written), 4 out, 2 requests; "
        "tokens not reported for 1 of 2 requests",
    ]
    assert "sent no token counts" in out
    assert not re.search(r"last reply: 0 tokens", out)  # never a zero that looks measured


async def test_demo_shows_tokens_read_from_and_written_to_the_cache(tmp_path: Path) -> None:
    code, out, err = await aniki(tmp_path, "demo")
    assert code == 0, err
    usage_lines = [line for line in out.splitlines() if "simulated prompt cache" in line]
    assert len(usage_lines) == 2  # the tool run and the streamed reply
    # The tool run's second request repeats the first one's messages: they are read back.
    tool_run = re.search(r"(\d[\d,]*) tokens in \((\d[\d,]*) read from cache", usage_lines[0])
    assert tool_run is not None and int(tool_run[2].replace(",", "")) > 0
    assert "from cache" in out and "written" in out
    totals = re.findall(r"all 30 turns: .*?\((\d[\d,]*) read from cache", out)
    assert len(totals) == 2
    assert all(int(total.replace(",", "")) > 0 for total in totals)
