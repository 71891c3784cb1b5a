"""Log messages and progress from our own SDK server (sent during a call, on the 2026-07-28
protocol), and the options and inputs the feature methods refuse."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from aniki import Agent, Runner, ServerLog, ToolProgress, UserError
from aniki.mcp import MCPServerHTTP, MCPServerStdio
from aniki.testing import MockProvider

FEATURES = Path(__file__).with_name("features_server.py")
SECRET = "sk-test-0123456789"


def _chatty_agent(server: MCPServerStdio) -> Agent:
    provider = MockProvider()
    provider.enqueue_response(tool_calls=[{"id": "c1", "name": "chatty", "arguments": {}}])
    provider.enqueue_response(content="done")
    return Agent("A", model="m", provider=provider, mcp_servers=[server])


async def test_logs_and_progress_reach_the_stream_and_the_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = MCPServerStdio(sys.executable, [str(FEATURES)], name="f", env={"KEY": SECRET})
    try:
        with caplog.at_level(logging.WARNING, logger="aniki.mcp"):
            stream = Runner().stream(_chatty_agent(server), message="go")
            events = [event async for event in stream]
    finally:
        await server.close()
    logs = [event for event in events if isinstance(event, ServerLog)]
    assert logs == [ServerLog("f", "warning", "halfway there, token=***", "worker")]
    progress = [(e.progress, e.total, e.message) for e in events if isinstance(e, ToolProgress)]
    assert progress == [(1, 2, "first half"), (2, 2, "second half")]
    said = [r.getMessage() for r in caplog.records if r.name == "aniki.mcp"]
    assert said == ["f (worker): halfway there, token=***"]
    assert SECRET not in caplog.text


async def test_a_run_that_is_not_streamed_still_logs(caplog: pytest.LogCaptureFixture) -> None:
    server = MCPServerStdio(sys.executable, [str(FEATURES)], name="f")
    try:
        with caplog.at_level(logging.DEBUG, logger="aniki.mcp"):
            result = await Runner().run(_chatty_agent(server), message="go")
    finally:
        await server.close()
    assert result.new_messages[2].content == "talked"
    said = [r.getMessage() for r in caplog.records if r.name == "aniki.mcp"]
    assert "f: chatty progress 1/2 (first half)" in said


async def test_a_server_with_no_resources_or_prompts_lists_none() -> None:
    server = MCPServerStdio(sys.executable, [str(FEATURES)], name="f")
    try:
        assert await server.list_prompts() == []
        assert await server.list_resources() == []
    finally:
        await server.close()


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"sampling": "model"}, "sampling must be 'agent', a Provider or a function"),
        ({"sampling": 3}, "sampling must be 'agent', a Provider, or a function"),
        ({"sampling": "agent", "sampling_model": ""}, "sampling_model must be a model name"),
        ({"approve_sampling": lambda r: True}, "pass sampling= too"),
        ({"elicitation": "yes"}, "elicitation must be a function"),
        ({"roots": "."}, "roots must be a list of paths or file:// URIs"),
        ({"roots": ["https://example.com"]}, "a root must be a path or a file:// URI"),
    ],
)
def test_bad_feature_options_are_refused(options: dict[str, Any], problem: str) -> None:
    with pytest.raises(UserError, match=problem):
        MCPServerStdio("python", ["server.py"], **options)
    with pytest.raises(UserError, match=problem):
        MCPServerHTTP("http://127.0.0.1:1/mcp", **options)


async def test_bad_inputs_are_refused_before_connecting() -> None:
    server = MCPServerHTTP("http://127.0.0.1:1/mcp")
    with pytest.raises(UserError, match="uri must be a non-empty string"):
        await server.read_resource("")
    with pytest.raises(UserError, match="arguments must map argument names to strings"):
        await server.get_prompt("p", {"n": 1})  # type: ignore[dict-item]
    with pytest.raises(UserError, match="a prompt's name must be a non-empty string"):
        await server.get_prompt(None)  # type: ignore[arg-type]
