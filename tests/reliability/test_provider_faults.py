"""Provider faults injected over HTTP, through whole agent runs, for both wire formats.

The fake server of the provider tests plays OpenAI's and Anthropic's APIs and misbehaves on
cue. Under every fault, a run (``Runner.run`` and ``Runner.stream``) either succeeds after a
bounded number of attempts, counted on the server, or fails with the specific aniki error
for the cause, never a dependency's exception. Afterwards the session holds a history a
provider accepts: ``run`` keeps every turn that completed, ``stream`` only the user message.

Most faults hit the second model call of a run, after a tool turn completed, so that the
persistence rules are tested where they matter.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from aniki import (
    Agent,
    AnikiError,
    AuthenticationError,
    Message,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    RunCompleted,
    Runner,
    RunResult,
    RunTimeoutError,
    StreamInterruptedError,
    StreamRestarted,
    TextDelta,
    ToolCallCompleted,
    ToolCallStarted,
    tool,
)

from ..providers.fake_server import Drop, FakeServer, Reply, Respond, Stall, Stream, sse
from ..providers.vendors import API_KEY, Vendor
from .histories import assert_valid_history

MODES = ["run", "stream"]
QUESTION = "Weather in Oslo?"
ANSWER = "It is sunny."
CALL = ("call_w1", "get_weather", {"city": "Oslo"})
FAST = {"retry-after-ms": "10"}
"""Keeps the client's retries quick where the delay is not what a test is about."""


def make_agent(server: FakeServer, vendor: Vendor, ran: list[str], **options: Any) -> Agent:
    """An agent with one tool, which records every call it really runs in ``ran``."""

    @tool
    def get_weather(city: str) -> str:
        """Look up the current weather.

        Args:
            city: The city to look up.
        """
        ran.append(city)
        return f"Sunny, 18C in {city}"

    options.setdefault("timeout", 5.0)
    return Agent(
        "Forecaster",
        "Answer with the weather.",
        model="test-model",
        provider=vendor.provider(server.url, **options),
        tools=[get_weather],
    )


def tool_turn(vendor: Vendor, mode: str) -> Reply:
    if mode == "stream":
        return Stream(vendor.tool_events([CALL]))
    return Respond(200, vendor.tool_reply([CALL]))


def answer(vendor: Vendor, mode: str) -> Reply:
    if mode == "stream":
        return Stream(vendor.text_events(["It is ", "sunny."]))
    return vendor.ok(ANSWER)


async def go(
    mode: str,
    agent: Agent,
    events: list[Any],
    *,
    runner: Runner | None = None,
    timeout: float | None = None,
) -> RunResult:
    """Run ``agent`` on the question; stream events are collected in ``events``."""
    runner = runner or Runner(retry_backoff=0.01)
    if mode == "run":
        return await runner.run(agent, message=QUESTION, timeout=timeout)
    async for event in runner.stream(agent, message=QUESTION, timeout=timeout):
        events.append(event)
    assert isinstance(events[-1], RunCompleted)
    return events[-1].result


async def fails(
    mode: str, agent: Agent, expected: type[AnikiError], events: list[Any], **options: Any
) -> Any:
    """Run and expect exactly ``expected`` (not a parent class, not a dependency's error)."""
    with pytest.raises(AnikiError) as info:
        await go(mode, agent, events, **options)
    error = info.value
    assert type(error) is expected, f"{type(error).__name__}: {error}"
    assert type(error).__module__ == "aniki.errors"
    return error


async def in_both_modes(check: Callable[[str, FakeServer], Awaitable[None]]) -> None:
    """``check`` for ``run`` and for ``stream`` at once, each with a server of its own.

    For faults whose cost is waiting (the client's backoff, a stall, a deadline): the two
    waits overlap instead of adding up.
    """
    async with FakeServer() as first, FakeServer() as second:
        await asyncio.gather(check("run", first), check("stream", second))


def stored(agent: Agent) -> list[Message]:
    messages = list(agent.session.get_messages())  # type: ignore[arg-type]
    assert_valid_history(messages)
    return messages


def roles(agent: Agent) -> list[str]:
    return [message.role for message in stored(agent)]


def read_timeout(fault: str) -> float:
    """The provider's timeout: short where the fault is a stall, generous everywhere else."""
    return 0.3 if "stall" in fault else 5.0


def kept_after_failure(mode: str) -> list[str]:
    """What a run that failed in its second model call leaves stored."""
    return ["user"] if mode == "stream" else ["user", "assistant", "tool"]


# --- faults before any reply: the vendor client retries them ---------------------------------

TRANSIENT: dict[str, Callable[[Vendor], Reply]] = {
    "429 with Retry-After": lambda v: Respond(429, v.rate_limit_error, {"Retry-After": "0.05"}),
    "500": lambda v: Respond(500, v.server_error, FAST),
    "502 with a body that is not JSON": lambda v: Respond(502, "<html>Bad gateway</html>", FAST),
    "503": lambda v: Respond(503, v.server_error, FAST),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fault", list(TRANSIENT))
async def test_a_burst_of_transient_errors_is_retried_and_the_run_succeeds(
    server: FakeServer, vendor: Vendor, mode: str, fault: str
) -> None:
    ran: list[str] = []
    agent = make_agent(server, vendor, ran, max_retries=2)
    burst = TRANSIENT[fault](vendor)
    server.enqueue(tool_turn(vendor, mode), burst, burst, answer(vendor, mode))
    events: list[Any] = []
    result = await go(mode, agent, events)

    assert result.content == ANSWER
    assert len(server.requests) == 4  # the tool turn, then max_retries + 1 for the answer
    first, *_, last = server.requests[1:]
    assert last.body == first.body  # the same request, sent again
    assert last.headers.get("x-stainless-retry-count") == "2"
    assert not any(isinstance(event, StreamRestarted) for event in events)
    assert roles(agent) == ["user", "assistant", "tool", "assistant"]
    assert ran == ["Oslo"]


EXHAUSTING: dict[str, tuple[Callable[[Vendor], Reply], type[AnikiError], int]] = {
    # fault, the error it ends in, the client's max_retries (1 where the client's own backoff
    # of about half a second applies, to keep the suite quick)
    "429 with Retry-After": (
        lambda v: Respond(429, v.rate_limit_error, {"Retry-After": "0.02"}),
        RateLimitError,
        3,
    ),
    "429 without Retry-After": (lambda v: Respond(429, v.rate_limit_error), RateLimitError, 1),
    "500": (lambda v: Respond(500, v.server_error, FAST), ProviderError, 3),
    "502": (lambda v: Respond(502, v.server_error, FAST), ProviderError, 3),
    "503": (lambda v: Respond(503, v.server_error, FAST), ProviderError, 3),
    "500 with a body that is not JSON": (
        lambda v: Respond(500, "<html>oops</html>", FAST),
        ProviderError,
        2,
    ),
    "a stall past the timeout": (lambda v: Stall(), ProviderTimeoutError, 1),
    "the connection dropped before a reply": (lambda v: Drop(), ProviderConnectionError, 1),
}


@pytest.mark.parametrize("fault", list(EXHAUSTING))
async def test_when_retries_run_out_the_run_fails_with_the_specific_error(
    vendor: Vendor, fault: str
) -> None:
    make_fault, expected, retries = EXHAUSTING[fault]

    async def check(mode: str, server: FakeServer) -> None:
        ran: list[str] = []
        agent = make_agent(server, vendor, ran, max_retries=retries, timeout=read_timeout(fault))
        server.enqueue(tool_turn(vendor, mode), *[make_fault(vendor)] * (retries + 1))
        events: list[Any] = []
        error = await fails(mode, agent, expected, events)

        assert len(server.requests) == 1 + retries + 1, mode  # bounded: no retry storm
        assert server.pending == 0
        assert error.provider == vendor.name
        if isinstance(error, RateLimitError):
            assert error.retry_after == (0.02 if fault.split()[1] == "with" else None)
        if expected is ProviderError:
            assert error.status_code == int(fault[:3])
            assert "try again later" in str(error)
        # A failure before any reply began is the client's to retry, never restarted on top.
        assert not any(isinstance(event, StreamRestarted) for event in events)
        assert roles(agent) == kept_after_failure(mode), mode
        assert ran == ["Oslo"]

    await in_both_modes(check)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("body", ["json", "html"])
async def test_401_is_never_retried_and_names_the_key_variable(
    server: FakeServer, vendor: Vendor, mode: str, body: str
) -> None:
    agent = make_agent(server, vendor, [], max_retries=3)
    server.enqueue(Respond(401, vendor.auth_error if body == "json" else "<h1>401</h1>"))
    error = await fails(mode, agent, AuthenticationError, [])
    assert len(server.requests) == 1
    assert error.status_code == 401
    assert vendor.env_var in str(error)
    assert API_KEY not in str(error) and API_KEY not in repr(error.body)
    assert roles(agent) == ["user"]


# --- a whole reply that is broken (run) ---------------------------------------------------------

BROKEN_BODIES: dict[str, tuple[Callable[[Vendor], Reply], type[AnikiError], str, bool]] = {
    # fault, error, words in the message, whether the client retries it
    "a body that is not JSON": (
        lambda v: Respond(200, "<html>gateway says hi</html>"),
        ProviderError,
        "not valid JSON",
        False,
    ),
    "an empty body": (lambda v: Respond(200, b""), ProviderError, "not valid JSON", False),
    "JSON nested too deeply to decode": (
        lambda v: Respond(200, '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"),
        ProviderError,
        "not valid JSON",
        False,
    ),
    "a number too long to convert": (
        lambda v: Respond(200, '{"id": ' + "7" * 5000 + "}"),
        ProviderError,
        "not valid JSON",
        False,
    ),
    "JSON of another shape": (
        lambda v: Respond(200, {"result": "hello"}),
        ProviderError,
        "documented shape",
        False,
    ),
    "a body cut off part-way": (
        lambda v: Stream(
            [json.dumps(v.text_reply(ANSWER))[:30]],
            end="drop",
            headers={"content-type": "application/json"},
        ),
        ProviderConnectionError,
        "peer closed connection",
        True,
    ),
}


@pytest.mark.parametrize("fault", list(BROKEN_BODIES))
async def test_a_broken_reply_body_fails_the_run_after_the_completed_turns(
    server: FakeServer, vendor: Vendor, fault: str
) -> None:
    make_fault, expected, words, retried = BROKEN_BODIES[fault]
    ran: list[str] = []
    agent = make_agent(server, vendor, ran, max_retries=1)
    server.enqueue(tool_turn(vendor, "run"), make_fault(vendor), make_fault(vendor))
    error = await fails("run", agent, expected, [])
    assert words in str(error)
    assert len(server.requests) == (3 if retried else 2)
    assert roles(agent) == ["user", "assistant", "tool"]
    assert ran == ["Oslo"]


# --- a stream that breaks part-way: restarted by the Runner -----------------------------------


def broken_streams(vendor: Vendor) -> dict[str, tuple[Stream, str]]:
    """Each way a stream can break after its first text delta, and a word of its reason."""
    partial = vendor.first_events(["It is rai", "ny"], 1)
    digits = "7" * 5000
    if vendor.name == "anthropic":
        too_long = f'event: content_block_delta\ndata: {{"type": "ping", "n": {digits}}}\n\n'
    else:
        too_long = f'data: {{"choices": [], "n": {digits}}}\n\n'
    if vendor.name == "anthropic":
        not_json = "event: content_block_delta\ndata: {oops\n\n"
        wrong_shape = sse(
            {"type": "content_block_delta", "index": 0, "delta": 5}, event="content_block_delta"
        )
        error_event = sse(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            event="error",
        )
    else:
        not_json = "data: {oops\n\n"
        wrong_shape = sse({"choices": "nope"})
        error_event = sse({"error": {"message": "Overloaded", "type": "server_error"}})
    return {
        "dropped": (Stream(partial, end="drop"), "connection dropped"),
        "no end marker": (Stream(vendor.unfinished_events(["It is rai"])), "ended"),
        "malformed event": (Stream([*partial, not_json]), "malformed"),
        "event of another shape": (Stream([*partial, wrong_shape]), "malformed"),
        "stalled": (Stream(partial, end="stall"), "timeout"),
        "error event": (Stream([*partial, error_event]), "Overloaded"),
        "a JSON body instead of events": (Stream([json.dumps(vendor.text_reply("x"))]), "ended"),
        "a number too long to convert": (Stream([*partial, too_long]), "malformed"),
    }


STREAM_FAULTS = [
    "dropped",
    "no end marker",
    "malformed event",
    "event of another shape",
    "stalled",
    "error event",
    "a JSON body instead of events",
    "a number too long to convert",
]


@pytest.mark.parametrize("fault", STREAM_FAULTS)
async def test_a_stream_broken_part_way_is_restarted_afresh(
    server: FakeServer, vendor: Vendor, fault: str
) -> None:
    broken, reason = broken_streams(vendor)[fault]
    ran: list[str] = []
    agent = make_agent(server, vendor, ran, max_retries=2, timeout=read_timeout(fault))
    server.enqueue(tool_turn(vendor, "stream"), broken, answer(vendor, "stream"))
    events: list[Any] = []
    result = await go("stream", agent, events)

    restarts = [i for i, event in enumerate(events) if isinstance(event, StreamRestarted)]
    assert len(restarts) == 1
    assert reason in events[restarts[0]].reason
    kinds = [type(event) for event in events[: restarts[0]]]
    assert kinds[:2] == [ToolCallStarted, ToolCallCompleted]
    assert set(kinds[2:]) <= {TextDelta}  # the void partial text, if any arrived
    fresh = "".join(e.text for e in events[restarts[0] + 1 :] if isinstance(e, TextDelta))
    assert fresh == ANSWER
    assert result.content == ANSWER  # the partial text is not part of it
    assert len(server.requests) == 3
    assert server.requests[1].body == server.requests[2].body
    assert stored(agent)[-1] == Message("assistant", ANSWER)
    assert roles(agent) == ["user", "assistant", "tool", "assistant"]
    assert ran == ["Oslo"]


@pytest.mark.parametrize("fault", STREAM_FAULTS)
async def test_a_stream_that_keeps_breaking_fails_after_bounded_restarts(
    server: FakeServer, vendor: Vendor, fault: str
) -> None:
    broken, reason = broken_streams(vendor)[fault]
    agent = make_agent(server, vendor, [], max_retries=2, timeout=read_timeout(fault))
    server.enqueue(tool_turn(vendor, "stream"), *[broken] * 3)
    events: list[Any] = []
    error = await fails(
        "stream",
        agent,
        StreamInterruptedError,
        events,
        runner=Runner(stream_retries=2, retry_backoff=0.01),
    )
    assert reason in str(error)
    assert sum(isinstance(event, StreamRestarted) for event in events) == 2
    assert not any(isinstance(event, RunCompleted) for event in events)
    assert len(server.requests) == 1 + 3  # stream_retries + 1 attempts, none by the client
    assert roles(agent) == ["user"]


async def test_a_tool_call_stream_broken_part_way_runs_the_tool_once_with_whole_arguments(
    server: FakeServer, vendor: Vendor
) -> None:
    whole = vendor.tool_events([CALL])
    ran: list[str] = []
    agent = make_agent(server, vendor, ran)
    server.enqueue(
        Stream(whole[: len(whole) // 2], end="drop"),
        Stream(whole),
        answer(vendor, "stream"),
    )
    events: list[Any] = []
    result = await go("stream", agent, events)
    assert result.content == ANSWER
    assert ran == ["Oslo"]
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    assert len(started) == 1
    assert json.loads(started[0].tool_call.arguments) == {"city": "Oslo"}
    assert events.index(started[0]) > next(
        i for i, e in enumerate(events) if isinstance(e, StreamRestarted)
    )
    assert roles(agent) == ["user", "assistant", "tool", "assistant"]


# --- a deadline for the whole run --------------------------------------------------------------

SLOW = {
    # The deadline outlasts the client's own first backoff (at most 0.5 s): only a client
    # that honours the 30 s it was asked to wait is still waiting when it hits.
    "a long Retry-After the client honours": (
        lambda v: Respond(429, v.rate_limit_error, {"Retry-After": "30"}),
        0.8,
    ),
    # Long enough for the first request and its tool under a loaded machine; the stall
    # outlasts any deadline.
    "a server that never answers": (lambda v: Stall(), 1.0),
}


@pytest.mark.parametrize("fault", list(SLOW))
async def test_a_run_deadline_bounds_a_slow_provider(vendor: Vendor, fault: str) -> None:
    make_fault, deadline = SLOW[fault]

    async def check(mode: str, server: FakeServer) -> None:
        # No client timeout (its default is 10 minutes) and retries left: only the deadline
        # ends the run.
        agent = make_agent(server, vendor, [], max_retries=3, timeout=None)
        server.enqueue(tool_turn(vendor, mode), make_fault(vendor), answer(vendor, mode))
        error = await fails(mode, agent, RunTimeoutError, [], timeout=deadline)
        assert error.timeout == deadline
        assert len(server.requests) == 2, mode  # the client was still waiting at the deadline
        assert server.pending == 1
        assert roles(agent) == kept_after_failure(mode), mode

    await in_both_modes(check)
