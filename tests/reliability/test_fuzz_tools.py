"""Hostile tool-call arguments: always a tool message, never a crash, the raw text kept.

A scripted model calls a real ``@tool`` with random argument text: valid JSON of the wrong
shape or types, JSON cut short, text that is no JSON at all, nesting, hundreds of thousands
of characters. Every run goes on (a bad call becomes a tool message telling the model what
went wrong), the stored call keeps the arguments exactly as the model wrote them, and the
history can still be sent to either provider.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aniki import Agent, Message, Runner, SQLiteSession, ToolCall, tool
from aniki.providers import ModelRequest
from aniki.providers._anthropic_wire import build_params as anthropic_params
from aniki.providers._openai_wire import build_params as openai_params
from aniki.testing import MockProvider

from .histories import assert_valid_history
from .hostile import arguments_text

FUZZ = settings(
    deadline=timedelta(seconds=5),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def forecast_tool(calls: list[tuple[str, int]]) -> Any:
    @tool
    def forecast(city: str, days: int = 1) -> str:
        """Forecast the weather.

        Args:
            city: The city.
            days: How many days ahead.
        """
        calls.append((city, days))
        return f"Forecast for {city}: {days} day(s) of sun"

    return forecast


async def run_with_arguments(arguments: str, mode: str, path: Path) -> None:
    calls: list[tuple[str, int]] = []
    provider = MockProvider()
    provider.enqueue_response(tool_calls=[ToolCall("call_1", "forecast", arguments)])
    provider.enqueue_response(content="done")
    session = SQLiteSession(uuid.uuid4().hex, path)
    agent = Agent("A", "Be brief.", model="m", provider=provider, tools=[forecast_tool(calls)])
    if mode == "run":
        result = await Runner().run(agent, message="Weather?", session=session)
    else:
        result = await Runner().stream(agent, message="Weather?", session=session).wait()
    assert result.content == "done"

    # A fresh instance reads the history from the file: the raw arguments survived it.
    stored = list(SQLiteSession(session.id, path).get_messages())
    assert_valid_history(stored)
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[1].tool_calls == (ToolCall("call_1", "forecast", arguments),)
    answer = stored[2]
    assert answer.tool_call_id == "call_1"
    if calls:
        assert len(calls) == 1
        assert answer.content == f"Forecast for {calls[0][0]}: {calls[0][1]} day(s) of sun"
    else:
        assert answer.content.startswith("Error:"), answer.content
    assert provider.requests[1].messages[-1] == answer  # the model was told

    # The history stays sendable to both wire formats, the arguments as the model wrote them.
    request = ModelRequest(model="m", messages=tuple(stored))
    sent = openai_params(request, stream=False, max_tokens_param="max_tokens", stream_usage=False)
    assert sent["messages"][1]["tool_calls"][0]["function"]["arguments"] == arguments
    wire = anthropic_params(request, default_max_tokens=10)["messages"][1]["content"][0]
    try:
        decoded = json.loads(arguments)
    except (ValueError, RecursionError):
        decoded = None
    expected = decoded if isinstance(decoded, dict) else {"raw_arguments": arguments}
    assert wire["input"] == expected


def test_any_argument_text_ends_in_a_tool_message_and_is_kept_verbatim(tmp_path: Path) -> None:
    path = tmp_path / "tools.db"

    @settings(FUZZ, max_examples=150)
    @given(
        st.one_of(
            arguments_text,
            st.fixed_dictionaries(
                {"city": st.one_of(st.text(max_size=5), st.integers(), st.none())},
                optional={"days": st.one_of(st.integers(), st.text(max_size=3), st.floats())},
            ).map(json.dumps),
        ),
        st.sampled_from(["run", "stream"]),
    )
    def check(arguments: str, mode: str) -> None:
        asyncio.run(run_with_arguments(arguments, mode, path))

    check()


def test_well_formed_arguments_reach_the_tool(tmp_path: Path) -> None:
    # The property above must see both outcomes; this pins the successful one.
    asyncio.run(run_with_arguments('{"city": "Oslo", "days": 3}', "run", tmp_path / "t.db"))
    asyncio.run(run_with_arguments('{"city": 5}', "stream", tmp_path / "t.db"))


@pytest.mark.parametrize(
    "arguments",
    ["[" * 100_000 + "]" * 100_000, '{"city": "Oslo", "days": ' + "9" * 5000 + "}"],
    ids=["nested too deeply", "a number too long"],
)
def test_arguments_json_cannot_decode_end_in_a_tool_message(tmp_path: Path, arguments: str) -> None:
    asyncio.run(run_with_arguments(arguments, "run", tmp_path / "deep.db"))


def test_the_store_and_both_wire_formats_take_deeply_nested_arguments(tmp_path: Path) -> None:
    deep = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    session = SQLiteSession("deep", tmp_path / "deep.db")
    call = ToolCall("c", "f", deep)
    history = [
        Message("user", "hi"),
        Message("assistant", tool_calls=(call,)),
        Message("tool", "ok", tool_call_id="c"),
    ]
    session.add_messages(history)
    assert list(SQLiteSession("deep", tmp_path / "deep.db").get_messages()) == history
    request = ModelRequest(model="m", messages=tuple(history))
    sent = openai_params(request, stream=False, max_tokens_param="max_tokens", stream_usage=False)
    assert sent["messages"][1]["tool_calls"][0]["function"]["arguments"] == deep
    wire = anthropic_params(request, default_max_tokens=10)["messages"][1]["content"][0]
    assert wire["input"] == {"raw_arguments": deep}
