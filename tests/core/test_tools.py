"""@tool schemas, the tool loop, and every bad-tool-call path."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Literal

import pydantic
import pytest

from aniki import Agent, Context, Message, Runner, ToolError, UserError, tool
from aniki.testing import MockProvider

from .helpers import MODES, drive


def test_schema_from_hints_and_google_docstring() -> None:
    @tool
    def get_weather(city: str, unit: Literal["c", "f"] = "c", days: int = 1) -> str:
        """Look up the weather.

        Args:
            city: The city to look up.
            unit: Celsius or Fahrenheit.
            days (int): How many days
                to forecast.
        """
        return ""

    assert get_weather.name == "get_weather"
    assert get_weather.description == "Look up the weather."
    schema = get_weather.parameters
    assert schema["required"] == ["city"]
    assert schema["properties"]["city"]["description"] == "The city to look up."
    assert schema["properties"]["unit"]["enum"] == ["c", "f"]
    assert schema["properties"]["days"]["default"] == 1
    assert schema["properties"]["days"]["description"] == "How many days to forecast."
    assert schema["additionalProperties"] is False


def test_numpy_and_rest_docstrings() -> None:
    @tool
    def numpy_style(x: int, y: str) -> str:
        """Do a thing.

        Parameters
        ----------
        x : int
            The x value.
        y : str
            The y value.
        """
        return ""

    @tool
    def rest_style(x: int, y: str) -> str:
        """Do another thing.

        :param x: The x value.
        :param str y: The y value.
        :returns: nothing
        """
        return ""

    for made in (numpy_style, rest_style):
        props = made.parameters["properties"]
        assert props["x"]["description"] == "The x value."
        assert props["y"]["description"] == "The y value."
    assert numpy_style.description == "Do a thing."
    assert rest_style.description == "Do another thing."


def test_context_parameter_is_hidden_from_the_schema() -> None:
    @tool
    def whoami(ctx: Context, greeting: str = "hi") -> str:
        return ""

    assert set(whoami.parameters["properties"]) == {"greeting"}
    assert whoami.context_parameter == "ctx"


class Point(pydantic.BaseModel):
    x: int
    y: int


def test_name_and_description_overrides_and_nested_models() -> None:
    @tool(name="plot", description="Plot points.")
    def draw(points: list[Point]) -> str:
        return ""

    assert (draw.name, draw.description) == ("plot", "Plot points.")
    assert "$defs" in draw.parameters


def test_local_types_in_parameters_give_a_clear_error() -> None:
    class Local(pydantic.BaseModel):
        x: int

    def uses_local(value: Local) -> str:
        return ""

    with pytest.raises(UserError, match="importable from its module"):
        tool(uses_local)


def test_bad_tool_definitions_are_clear_user_errors() -> None:
    def variadic(*args: int) -> int:
        return 0

    with pytest.raises(UserError, match=r"\*args"):
        tool(variadic)

    def same() -> str:
        return ""

    with pytest.raises(UserError, match="unique"):
        Agent("A", model="m", provider=MockProvider(), tools=[same, tool(name="same")(same)])


@pytest.mark.parametrize("mode", MODES)
async def test_tool_loop_with_sync_async_and_context_tools(mode: str) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @tool
    async def shout(text: str, ctx: Context) -> str:
        ctx.set("shouted", True)
        return text.upper()

    provider = MockProvider()
    provider.enqueue_response(
        tool_calls=[
            {"id": "c1", "name": "add", "arguments": {"a": 2, "b": 3}},
            {"id": "c2", "name": "shout", "arguments": {"text": "hey"}},
        ]
    )
    provider.enqueue_response(content="5 and HEY")
    agent = Agent("A", model="m", provider=provider, tools=[add, shout])
    result = await drive(mode, Runner(), agent, message="go")

    assert result.content == "5 and HEY"
    assert result.context.get("shouted") is True
    roles = [(m.role, m.tool_call_id, m.content) for m in result.messages]
    assert roles == [
        ("user", None, "go"),
        ("assistant", None, ""),
        ("tool", "c1", "5"),
        ("tool", "c2", "HEY"),
        ("assistant", None, "5 and HEY"),
    ]
    second = provider.requests[1]
    assert [t.name for t in second.tools] == ["add", "shout"]
    assert second.messages[-1] == Message(role="tool", content="HEY", tool_call_id="c2")


BAD_CALLS = [
    ("nope", "{}", "unknown tool 'nope'. Available tools: divide"),
    ("divide", "{not json", "not valid JSON"),
    ("divide", "[1, 2]", "must be a JSON object"),
    ("divide", '{"a": "ten", "b": 2}', "invalid arguments for 'divide': a:"),
    ("divide", '{"a": 1}', "b: Field required"),
    ("divide", '{"a": 1, "b": 2, "c": 3}', "c: Extra inputs are not permitted"),
    ("divide", '{"a": 1, "b": 0}', "raised ZeroDivisionError"),
    ("divide", '{"a": 1, "b": -1}', "negative divisors are not supported"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("name", "arguments", "expected"), BAD_CALLS)
async def test_bad_tool_calls_become_tool_messages_and_the_run_goes_on(
    mode: str, name: str, arguments: str, expected: str
) -> None:
    @tool
    def divide(a: float, b: float) -> float:
        if b < 0:
            raise ToolError("negative divisors are not supported")
        return a / b

    provider = MockProvider()
    provider.enqueue_response(tool_calls=[{"id": "bad", "name": name, "arguments": arguments}])
    provider.enqueue_response(content="sorry")
    agent = Agent("A", model="m", provider=provider, tools=[divide])
    result = await drive(mode, Runner(), agent, message="go")

    assert result.content == "sorry"
    call_message, tool_message = result.messages[1], result.messages[2]
    assert call_message.tool_calls[0].arguments == arguments  # kept verbatim
    assert tool_message.role == "tool" and tool_message.tool_call_id == "bad"
    assert expected in tool_message.content
    assert provider.requests[1].messages[-1] == tool_message


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (5, "5"),
        ("plain text", "plain text"),
        ({"a": [1, 2]}, '{"a":[1,2]}'),
        (None, "(no output)"),
        ("", "(no output)"),
    ],
)
async def test_tool_results_become_text(value: Any, text: str) -> None:
    @tool
    def give() -> Any:
        return value

    provider = MockProvider()
    provider.enqueue_response(tool_calls=[{"id": "c", "name": "give"}])
    provider.enqueue_response(content="ok")
    result = await Runner().run(
        Agent("A", model="m", provider=provider, tools=[give]), message="go"
    )
    assert result.messages[2].content == text


async def test_pydantic_and_dataclass_results_are_json() -> None:
    class Weather(pydantic.BaseModel):
        city: str
        degrees: int

    @dataclass
    class Pair:
        left: int
        right: int

    @tool
    def weather() -> Weather:
        return Weather(city="Oslo", degrees=4)

    @tool
    def pair() -> Pair:
        return Pair(1, 2)

    provider = MockProvider()
    provider.enqueue_response(
        tool_calls=[{"id": "w", "name": "weather"}, {"id": "p", "name": "pair"}]
    )
    provider.enqueue_response(content="ok")
    agent = Agent("A", model="m", provider=provider, tools=[weather, pair])
    result = await Runner().run(agent, message="go")
    assert json.loads(result.messages[2].content) == {"city": "Oslo", "degrees": 4}
    assert json.loads(result.messages[3].content) == {"left": 1, "right": 2}


async def test_parallel_calls_run_concurrently_and_keep_call_order() -> None:
    both_running = threading.Barrier(2, timeout=5)
    started: list[str] = []

    @tool
    def slow_sync(name: str) -> str:
        started.append(name)
        both_running.wait()  # deadlocks (times out) unless the two run at the same time
        return f"sync {name}"

    gate = asyncio.Event()

    @tool
    async def slow_async(name: str) -> str:
        await asyncio.wait_for(gate.wait(), 5)
        return f"async {name}"

    @tool
    async def opener() -> str:
        gate.set()
        return "opened"

    provider = MockProvider()
    provider.enqueue_response(
        tool_calls=[
            {"id": "1", "name": "slow_async", "arguments": {"name": "a"}},
            {"id": "2", "name": "slow_sync", "arguments": {"name": "b"}},
            {"id": "3", "name": "slow_sync", "arguments": {"name": "c"}},
            {"id": "4", "name": "opener"},
        ]
    )
    provider.enqueue_response(content="done")
    agent = Agent("A", model="m", provider=provider, tools=[slow_sync, slow_async, opener])
    start = time.monotonic()
    result = await Runner().run(agent, message="go")
    assert time.monotonic() - start < 5
    assert [m.content for m in result.messages[2:6]] == ["async a", "sync b", "sync c", "opened"]
    assert [m.tool_call_id for m in result.messages[2:6]] == ["1", "2", "3", "4"]


async def test_sync_tools_do_not_block_the_event_loop() -> None:
    loop_thread = threading.get_ident()
    seen: list[int] = []

    @tool
    def where() -> str:
        seen.append(threading.get_ident())
        return "here"

    provider = MockProvider()
    provider.enqueue_response(tool_calls=[{"id": "1", "name": "where"}])
    provider.enqueue_response(content="ok")
    await Runner().run(Agent("A", model="m", provider=provider, tools=[where]), message="go")
    assert seen and seen[0] != loop_thread


def test_plain_functions_are_wrapped_as_tools() -> None:
    def lookup(term: str) -> str:
        """Find a term."""
        return term

    agent = Agent("A", model="m", provider=MockProvider(), tools=[lookup])
    assert agent.tools["lookup"].description == "Find a term."
    assert agent.tools["lookup"]("x") == "x"


def test_an_untyped_parameter_is_refused_naming_it_and_any_accepts_any_json() -> None:
    def lookup(order_id, verbose: bool = False) -> str:  # type: ignore[no-untyped-def]
        return str(order_id)

    with pytest.raises(UserError) as raised:
        tool(lookup)
    message = str(raised.value)
    assert "tool 'lookup': parameter 'order_id' has no type annotation" in message
    assert "typing.Any" in message
    with pytest.raises(UserError, match="parameter 'order_id'"):  # a plain function in tools=
        Runner().run_sync(
            Agent("A", model="m", provider=MockProvider(), tools=[lookup]), message="x"
        )

    @tool
    def keep(key: str, value: Any) -> str:
        """Keep a value."""
        return f"{key}={value!r}"

    assert keep.parameters["properties"]["value"] == {"title": "Value"}
    assert keep.parameters["required"] == ["key", "value"]


def test_a_partial_is_read_through_to_its_functions_annotations() -> None:
    import functools

    def send(to: str, subject: str, urgent: bool) -> str:
        """Send a note."""
        return f"{to}:{subject}:{urgent}"

    made = tool(functools.partial(send, urgent=True), name="send")
    assert made.parameters["properties"]["to"]["type"] == "string"
    assert made.parameters["properties"]["urgent"] == {
        "default": True,
        "title": "Urgent",
        "type": "boolean",
    }
    reply = MockProvider()
    reply.enqueue_response(
        tool_calls=[{"name": "send", "arguments": {"to": "ann", "subject": "hi"}}]
    )
    reply.enqueue_response("sent")
    result = Runner().run_sync(Agent("A", model="m", provider=reply, tools=[made]), message="go")
    assert result.new_messages[2].content == "ann:hi:True"


def test_a_result_over_max_tool_output_is_cut_with_a_note_and_stored_cut() -> None:
    def dump(part: int) -> str:
        """Dump the log."""
        return "x" * 250_000

    for cap, kept in ((None, 250_000), (100_000, 100_000), (1_000, 1_000)):
        reply = MockProvider()
        reply.enqueue_response(tool_calls=[{"name": "dump", "arguments": {"part": 1}}])
        reply.enqueue_response("done")
        options = {} if cap == 100_000 else {"max_tool_output": cap}  # 100,000: the default
        agent = Agent("A", model="m", provider=reply, tools=[dump], **options)  # type: ignore[arg-type]
        result = Runner().run_sync(agent, message="go")
        stored = agent.session.get_messages()[2].content  # type: ignore[union-attr]
        assert stored == result.new_messages[2].content
        assert stored.startswith("x" * kept) and stored[kept : kept + 1] != "x"
        sent = reply.requests[1].messages[-1].content
        assert sent == stored
        if cap is None:
            assert len(stored) == 250_000
        else:
            assert (
                f"the result of dump was 250,000 characters; the first {cap:,} are shown" in stored
            )
            assert "Call dump again for the part you need" in stored


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "100k"])
def test_a_max_tool_output_that_is_no_count_is_refused(bad: Any) -> None:
    with pytest.raises(UserError, match="max_tool_output must be a number of characters"):
        Agent("A", model="m", max_tool_output=bad)
