"""``OpenAIProvider(compat="auto")`` against the real llama-cpp-python server: it is told
apart from OpenAI, and what that server refuses in OpenAI's own shape now goes through: a
whole tool loop, structured output, a text attachment, and an over-long prompt streamed.

The model is tiny: what it says is never checked, only that the server took every request
and that the tool calls, outputs and errors arrived as aniki promises. A middleware names
the tool the first call of a run must use and then forbids tools, so that each run is one
tool call and one answer, whatever the model would have chosen.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from aniki import (
    Agent,
    Attachment,
    ContextWindowExceededError,
    InMemorySession,
    Message,
    ModelRequest,
    ModelResponse,
    Runner,
    ToolCallCompleted,
    tool,
)
from aniki.providers import OpenAIProvider

from .helpers import live_server

pytestmark = pytest.mark.live

CITIES: list[str] = []


@tool
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city's name.
    """
    CITIES.append(city)
    return f"18C and sunny in {city}"


async def one_call_then_answer(
    ctx: Any, request: ModelRequest, call_next: Callable[[ModelRequest], Awaitable[ModelResponse]]
) -> ModelResponse:
    """The first call of a run must call the tool; the one after its result must answer."""
    first = request.messages[-1].role == "user"
    settings = {
        **request.settings,
        "tool_choice": "get_weather" if first else "none",
        "max_tokens": 32 if first else 8,
    }
    return await call_next(dataclasses.replace(request, settings=settings))  # type: ignore[arg-type]


async def _provider(server: Any) -> AsyncIterator[OpenAIProvider]:
    made = OpenAIProvider(
        base_url=server.base_url, api_key="none", max_retries=0, timeout=120, compat="auto"
    )
    yield made
    await made.aclose()


@pytest.fixture
async def tools_provider(llama_tools: Any) -> AsyncIterator[OpenAIProvider]:
    async for made in _provider(llama_tools):
        yield made


@pytest.fixture
async def auto_provider(llama: Any) -> AsyncIterator[OpenAIProvider]:
    async for made in _provider(llama):
        yield made


def _agent(provider: OpenAIProvider, max_tokens: int = 8, **options: Any) -> Agent:
    return Agent(
        "Live",
        "You are a terse assistant.",
        model=live_server.MODEL_NAME,
        provider=provider,
        settings={"temperature": 0, "max_tokens": max_tokens},
        **options,
    )


async def _run(agent: Agent, message: str, *, streamed: bool) -> Any:
    runner = Runner(max_turns=4)
    if not streamed:
        return await runner.run(agent, message=message)
    completed = []
    async with runner.stream(agent, message=message) as stream:
        async for event in stream:
            completed += [event] if isinstance(event, ToolCallCompleted) else []
    assert completed, "the streamed run reported no finished tool call"
    return stream.result


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "stream"])
async def test_two_turns_with_tool_calls(tools_provider: OpenAIProvider, streamed: bool) -> None:
    CITIES.clear()
    session = InMemorySession()
    agent = _agent(
        tools_provider, session=session, tools=[get_weather], middleware=[one_call_then_answer]
    )
    for question in ("Weather in Oslo?", "And in Paris?"):
        result = await _run(agent, question, streamed=streamed)
        assert result.usage.requests == 2

    assert tools_provider.profile is not None and tools_provider.profile.name == "llama.cpp"
    roles = [m.role for m in session.get_messages()]
    assert roles == ["user", "assistant", "tool", "assistant"] * 2
    calls = [m for m in session.get_messages() if m.tool_calls]
    assert [c.tool_calls[0].name for c in calls] == ["get_weather", "get_weather"]
    for call in calls:  # the server's grammar kept the arguments to the tool's schema
        assert isinstance(json.loads(call.tool_calls[0].arguments)["city"], str)
    assert len(CITIES) == 2


async def test_structured_output(auto_provider: OpenAIProvider) -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
    }
    agent = _agent(auto_provider, max_tokens=24, output_schema=schema)
    result = await Runner().run(agent, message="What is 2 + 2? Answer in JSON.")
    assert isinstance(result.output, dict) and isinstance(result.output["answer"], int)
    assert auto_provider.profile is not None and auto_provider.profile.name == "llama.cpp"


async def test_text_attachment(auto_provider: OpenAIProvider) -> None:
    notes = Attachment("text/plain", data=b"milk, eggs, bread", name="list.txt")
    request = ModelRequest(
        model=live_server.MODEL_NAME,
        messages=(Message("user", "What is on the list?", attachments=(notes,)),),
        settings={"max_tokens": 4, "temperature": 0},
    )
    reply = await auto_provider.complete(request)
    assert reply.finish_reason in ("stop", "length")


@pytest.mark.parametrize("streamed", [False, True], ids=["complete", "stream"])
async def test_prompt_over_the_context_window(
    auto_provider: OpenAIProvider, streamed: bool
) -> None:
    request = ModelRequest(
        model=live_server.MODEL_NAME,
        messages=(Message("user", "word " * 3000),),
        settings={"max_tokens": 4},
    )
    with pytest.raises(ContextWindowExceededError, match="maximum context length is 2048"):
        if streamed:
            [item async for item in auto_provider.stream(request)]
        else:
            await auto_provider.complete(request)
