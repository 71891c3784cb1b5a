"""Resources, prompts, sampling, elicitation, roots and progress against the official
reference server, ``@modelcontextprotocol/server-everything`` (over stdio and streamable HTTP),
installed under ``~/.cache/aniki/mcp/npm``."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from aniki import Agent, Runner, ToolProgress
from aniki.mcp import (
    ElicitationReply,
    ElicitationRequest,
    MCPServerError,
    MCPServerHTTP,
    MCPServerStdio,
    SamplingRequest,
)
from aniki.testing import MockProvider
from tests.core.helpers import MODES, drive
from tests.mcp.conftest import free_port

ENTRY = Path.home() / ".cache/aniki/mcp/npm/node_modules/.bin/mcp-server-everything"
INSTALL = "npm install --prefix ~/.cache/aniki/mcp/npm @modelcontextprotocol/server-everything"

if not ENTRY.exists():
    if os.environ.get("CI") == "true":
        raise AssertionError(f"the reference MCP server is missing: {INSTALL}")
    pytest.skip(f"the reference MCP server is not installed: {INSTALL}", allow_module_level=True)

ALWAYS = 12
"""The reference server's tools any client is offered (the one that needs tasks is left out)."""


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [str(ENTRY), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        assert process.poll() is None, "the reference HTTP server exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "the reference HTTP server did not start"
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp"
    process.kill()
    process.wait(10)


@pytest.fixture(params=["stdio", "http"])
async def make(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """Makes reference servers of one kind (closed after the test)."""
    made: list[MCPServerStdio | MCPServerHTTP] = []

    def factory(**options: Any) -> MCPServerStdio | MCPServerHTTP:
        options.setdefault("name", "everything")
        if request.param == "stdio":
            server: MCPServerStdio | MCPServerHTTP = MCPServerStdio(str(ENTRY), **options)
        else:
            server = MCPServerHTTP(request.getfixturevalue("http_url"), **options)
        made.append(server)
        return server

    yield factory
    for server in made:
        await server.close()


async def test_resources_and_templates(make: Any) -> None:
    server = make()
    resources = await server.list_resources()
    assert len(resources) == 7
    assert all(resource.uri.startswith("demo://resource/static/") for resource in resources)
    templates = await server.list_resource_templates()
    assert [t.uri_template for t in templates] == [
        "demo://resource/dynamic/text/{resourceId}",
        "demo://resource/dynamic/blob/{resourceId}",
    ]
    (text,) = await server.read_resource("demo://resource/dynamic/text/3")
    assert text.mime_type == "text/plain" and text.text is not None and "Resource 3" in text.text
    (blob,) = await server.read_resource("demo://resource/dynamic/blob/3")
    assert blob.text is None and blob.data and b"Resource 3" in blob.data
    static = await server.read_resource(resources[0].uri)
    assert static[0].text


async def test_prompts(make: Any) -> None:
    server = make()
    prompts = {prompt.name: prompt for prompt in await server.list_prompts()}
    assert sorted(prompts) == [
        "args-prompt",
        "completable-prompt",
        "resource-prompt",
        "simple-prompt",
    ]
    arguments = {a.name: a.required for a in prompts["args-prompt"].arguments}
    assert arguments == {"city": True, "state": False}
    result = await server.get_prompt("args-prompt", {"city": "Oslo"})
    assert [(m.role, m.content) for m in result.messages] == [("user", "What's weather in Oslo?")]
    embedded = await server.get_prompt(
        "resource-prompt", {"resourceType": "Text", "resourceId": "2"}
    )
    assert "[resource demo://resource/dynamic/text/2]" in embedded.messages[1].content


async def test_what_cannot_be_done_is_a_clear_error(make: Any) -> None:
    server = make()
    with pytest.raises(MCPServerError, match="could not give the prompt 'nope'"):
        await server.get_prompt("nope")
    with pytest.raises(MCPServerError, match="could not read demo://nothing/here"):
        await server.read_resource("demo://nothing/here")


async def test_the_tools_each_capability_brings(make: Any) -> None:
    plain = {tool.name for tool in await make().list_tools()}
    assert len(plain) == ALWAYS + 2  # elicitation is always answered (declined by default)
    assert {"trigger-elicitation-request", "trigger-url-elicitation"} <= plain
    full = make(sampling="agent", roots=["."])
    every = {tool.name for tool in await full.list_tools()}
    assert every - plain == {"trigger-sampling-request", "get-roots-list"}
    assert len(every) == 16  # all 17 but simulate-research-query, which requires tasks
    assert "simulate-research-query" not in every


def _sampling_agent(server: Any, provider: MockProvider) -> Agent:
    provider.enqueue_response(
        tool_calls=[
            {"id": "c1", "name": "trigger-sampling-request", "arguments": {"prompt": "Hi?"}}
        ]
    )
    return Agent("A", model="small-model", provider=provider, mcp_servers=[server])


@pytest.mark.parametrize("mode", MODES)
async def test_sampling_goes_to_the_agents_provider(make: Any, mode: str) -> None:
    server = make(sampling="agent")
    provider = MockProvider()
    agent = _sampling_agent(server, provider)
    provider.enqueue_response(content="Sampled hello.")  # the server's sampling request
    provider.enqueue_response(content="done")
    result = await drive(mode, Runner(), agent, message="go")
    asked = provider.requests[1]
    assert asked.model == "small-model"
    assert asked.messages[0].content == "You are a helpful test server."
    assert "Hi?" in asked.messages[1].content
    assert asked.settings["max_tokens"] == 100
    assert "Sampled hello." in result.new_messages[2].content
    assert result.usage.requests == 3  # the sampling call is the run's cost too


async def test_a_refused_sampling_request_tells_the_server_why(make: Any) -> None:
    seen: list[SamplingRequest] = []

    def approve(request: SamplingRequest) -> bool | str:
        seen.append(request)
        return "sampling is not allowed today"

    server = make(sampling="agent", approve_sampling=approve)
    provider = MockProvider()
    agent = _sampling_agent(server, provider)
    provider.enqueue_response(content="done")
    result = await Runner().run(agent, message="go")
    assert "sampling is not allowed today" in result.new_messages[2].content
    assert len(provider.requests) == 2  # the model was never asked for the server
    assert seen[0].server == "everything" and seen[0].max_tokens == 100
    assert seen[0].tool_call is not None and seen[0].tool_call.id == "c1"


async def test_sampling_outside_a_run_needs_a_model_of_its_own(make: Any) -> None:
    server = make(sampling="agent")
    tools = {tool.name: tool for tool in await server.list_tools()}
    said = await tools["trigger-sampling-request"](prompt="Hi?")
    assert "no run of an agent is calling this server's tools now" in said
    provider = MockProvider()
    provider.enqueue_response(content="From the given provider.")
    own = make(sampling=provider, sampling_model="tiny")
    tools = {tool.name: tool for tool in await own.list_tools()}
    said = await tools["trigger-sampling-request"](prompt="Hi?")
    assert "From the given provider." in said and provider.requests[0].model == "tiny"


async def test_elicitation_is_declined_without_a_handler(make: Any) -> None:
    tools = {tool.name: tool for tool in await make().list_tools()}
    said = await tools["trigger-elicitation-request"]()
    assert '"action": "decline"' in said


async def test_elicitation_goes_to_the_apps_handler(make: Any) -> None:
    asked: list[ElicitationRequest] = []

    async def answer(request: ElicitationRequest) -> ElicitationReply | dict[str, Any] | None:
        asked.append(request)
        if request.mode == "url":
            return ElicitationReply("cancel")
        return {"name": "Ada", "check": True}

    tools = {tool.name: tool for tool in await make(elicitation=answer).list_tools()}
    said = await tools["trigger-elicitation-request"]()
    assert '"action": "accept"' in said and "Ada" in said
    assert asked[0].mode == "form" and asked[0].schema is not None
    assert "name" in asked[0].schema["properties"]
    said = await tools["trigger-url-elicitation"](url="https://example.com/auth")
    assert asked[1].mode == "url" and asked[1].url == "https://example.com/auth"
    assert "cancel" in said


async def test_roots_are_what_the_app_gave(make: Any, tmp_path: Path) -> None:
    server = make(roots=[tmp_path, "file:///srv/data"])
    tools = {tool.name: tool for tool in await server.list_tools()}
    said = await tools["get-roots-list"]()
    assert tmp_path.as_uri() in said and "file:///srv/data" in said


async def test_progress_is_streamed(make: Any) -> None:
    server = make()
    provider = MockProvider()
    provider.enqueue_response(
        tool_calls=[
            {
                "id": "c1",
                "name": "trigger-long-running-operation",
                "arguments": {"duration": 0.3, "steps": 3},
            }
        ]
    )
    provider.enqueue_response(content="done")
    agent = Agent("A", model="m", provider=provider, mcp_servers=[server])
    events = [event async for event in Runner().stream(agent, message="go")]
    progress = [event for event in events if isinstance(event, ToolProgress)]
    assert [(p.progress, p.total) for p in progress] == [(1, 3), (2, 3), (3, 3)]
    assert all(p.tool_call.id == "c1" for p in progress)


async def test_calls_from_another_loop_still_reach_the_run(make: Any) -> None:
    server = make(sampling="agent")
    await server.connect()  # on this loop; the run below works on run_sync's own loop
    provider = MockProvider()
    agent = _sampling_agent(server, provider)
    provider.enqueue_response(content="Sampled on the run's loop.")
    provider.enqueue_response(content="done")
    result = await asyncio.to_thread(Runner().run_sync, agent, message="go")
    assert "Sampled on the run's loop." in result.new_messages[2].content
