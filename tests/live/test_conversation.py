"""aniki's OpenAI provider against a real model server: memory, restarts, streaming, usage.

SmolLM2-135M is a tiny model: nothing here looks at what it says, only at what was sent,
stored and counted, checked against what the server itself logged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aniki import RunCompleted, Runner, SQLiteSession, TextDelta
from aniki.providers import OpenAIProvider

from .helpers import Recorder, converse, describe, make_agent, question

pytestmark = pytest.mark.live


async def test_second_turn_sends_the_first(llama: Any, provider: Any, tmp_path: Path) -> None:
    session = SQLiteSession("memory", tmp_path / "chat.db")
    recorder = Recorder()
    first, second = await converse(
        llama, make_agent(provider, session, recorder), range(1, 3), recorder
    )

    stored = session.get_messages()
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]
    assert [m.content for m in stored[:3]] == [question(1), first.result.content, question(2)]
    assert list(second.history) == list(stored[:3])
    # The server's own count: the second prompt holds the whole first turn, reply included.
    grown = first.prompt_tokens + first.result.usage.output_tokens
    assert second.prompt_tokens >= grown, describe([first, second])
    # And it found the first prompt in its KV cache: the history was sent unchanged.
    assert second.reused_tokens >= first.prompt_tokens, describe([first, second])


async def test_conversation_continues_after_a_restart(llama: Any, tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    recorder = Recorder()
    before = OpenAIProvider(base_url=llama.base_url, api_key="none", max_retries=0)
    try:
        agent = make_agent(before, SQLiteSession("restart", path), recorder)
        [first] = await converse(llama, agent, range(1, 2), recorder)
    finally:
        await before.aclose()

    # A new process would build everything again: a new store object and a new provider.
    after = OpenAIProvider(base_url=llama.base_url, api_key="none", max_retries=0)
    try:
        session = SQLiteSession("restart", path)
        agent = make_agent(after, session, recorder)
        [second] = await converse(llama, agent, range(2, 3), recorder)
    finally:
        await after.aclose()

    assert len(session.get_messages()) == 4
    assert [m.content for m in second.history] == [
        question(1),
        first.result.content,
        question(2),
    ]
    assert second.prompt_tokens >= first.prompt_tokens + first.result.usage.output_tokens
    assert second.reused_tokens >= first.prompt_tokens, describe([first, second])


async def test_non_streamed_usage_is_the_servers_count(
    llama: Any, provider: Any, tmp_path: Path
) -> None:
    recorder = Recorder()
    agent = make_agent(provider, SQLiteSession("usage", tmp_path / "chat.db"), recorder)
    [turn] = await converse(llama, agent, range(1, 2), recorder)

    usage = turn.result.usage
    assert usage.requests == 1
    assert usage.input_tokens == turn.prompt_tokens > 0
    assert 0 < usage.output_tokens <= 16
    assert usage.unreported_requests == 0


async def test_stream_delivers_and_stores_the_reply(
    llama: Any, provider: Any, tmp_path: Path
) -> None:
    session = SQLiteSession("stream", tmp_path / "chat.db")
    agent = make_agent(provider, session)
    logged = len(llama.prompt_evals())

    deltas: list[str] = []
    events: list[Any] = []
    async with Runner().stream(agent, message=question(1)) as stream:
        async for event in stream:
            events.append(event)
            if isinstance(event, TextDelta):
                deltas.append(event.text)
    result = stream.result

    assert isinstance(events[-1], RunCompleted)
    assert len(deltas) > 1, "the reply should arrive in pieces"
    assert result.content
    assert "".join(deltas) == result.content
    stored = session.get_messages()
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[-1].content == result.content
    assert llama.wait_prompt_evals(logged + 1)[logged].evaluated_tokens > 0

    # llama-cpp-python's server sends no usage in a stream, even when asked for it.
    usage = result.usage
    assert usage.requests == 1
    assert (usage.input_tokens, usage.output_tokens) == (0, 0)
    assert usage.unreported_requests == 1
