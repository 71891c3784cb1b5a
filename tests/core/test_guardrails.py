"""Input and output guardrails: checks beside the model that can stop a run.

Input guardrails run concurrently with the first model call and, when one trips, the run
stops with ``GuardrailTripped`` having stored only the user message; output guardrails check
the final reply before it is stored, which a trip keeps out of the session (or replaces).
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pydantic
import pytest

from aniki import (
    Agent,
    Context,
    Guardrail,
    GuardrailTripped,
    Message,
    ModelRequest,
    ModelResponse,
    Provider,
    RunError,
    Runner,
    RunTimeoutError,
    SQLiteSession,
    StreamRestarted,
    TextDelta,
    ToolCall,
    Usage,
    UserError,
    tool,
)
from aniki.testing import MockProvider, MockReply

from .helpers import MODES, drive


def roles(session: SQLiteSession) -> list[str]:
    return [m.role for m in session.get_messages()]


def no_secrets(ctx: Context, message: Message) -> str | None:
    return "the message names a password" if "password" in message.content else None


async def async_no_secrets(ctx: Context, message: Message) -> str | None:
    await asyncio.sleep(0)
    return no_secrets(ctx, message)


ran: list[str] = []


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    ran.append(order)
    return f"order {order}: shipped"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("check", [no_secrets, async_no_secrets])
async def test_an_input_guardrail_that_trips_stops_the_run_with_only_the_user_message_stored(
    mode: str, check: Any, tmp_path: Path
) -> None:
    provider = MockProvider([MockReply(tool_calls=(ToolCall("c1", "lookup", '{"order": "7"}'),))])
    session = SQLiteSession("in", tmp_path / "in.db")
    agent = Agent("A", model="m", provider=provider, tools=[lookup], input_guardrails=[check])
    with pytest.raises(GuardrailTripped) as tripped:
        await drive(mode, Runner(), agent, message="my password is hunter2", session=session)
    assert isinstance(tripped.value, RunError)
    assert (tripped.value.stage, tripped.value.guardrail) == ("input", check.__name__)
    assert tripped.value.reason == "the message names a password"
    assert tripped.value.message.content == "my password is hunter2"
    assert str(tripped.value) == (
        f"input guardrail {check.__name__!r} tripped: the message names a password"
    )
    assert roles(session) == ["user"]
    assert ran == []  # the model asked for a tool; the trip came first


@pytest.mark.parametrize("mode", MODES)
async def test_input_guardrails_that_pass_let_the_run_answer(mode: str, tmp_path: Path) -> None:
    checked: list[str] = []

    def record(ctx: Context, message: Message) -> bool:
        checked.append(message.content)
        return True

    provider = MockProvider([MockReply(content="hello")])
    session = SQLiteSession("ok", tmp_path / "ok.db")
    agent = Agent(
        "A", model="m", provider=provider, input_guardrails=[no_secrets, async_no_secrets, record]
    )
    result = await drive(mode, Runner(), agent, message="hi", session=session)
    assert result.content == "hello"
    assert checked == ["hi"]
    assert roles(session) == ["user", "assistant"]


async def test_the_input_check_runs_while_the_model_is_called() -> None:
    model_called = asyncio.Event()

    def reply(request: ModelRequest) -> str:
        model_called.set()
        return "hello"

    async def waits_for_the_model(ctx: Context, message: Message) -> None:
        await asyncio.wait_for(model_called.wait(), 5)  # would time out if run first

    agent = Agent(
        "A",
        model="m",
        provider=MockProvider(handler=reply),
        input_guardrails=[waits_for_the_model],
    )
    assert (await Runner().run(agent, message="hi")).content == "hello"


class Hanging(Provider):
    """A model that never answers, and notes when its call is cancelled."""

    name = "hanging"

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        raise AssertionError("unreachable")

    async def stream(self, request: ModelRequest) -> Any:  # pragma: no cover - not streamed
        raise NotImplementedError
        yield


async def test_a_trip_cancels_the_model_call_under_way(tmp_path: Path) -> None:
    provider = Hanging()
    session = SQLiteSession("hang", tmp_path / "h.db")
    agent = Agent("A", model="m", provider=provider, input_guardrails=[no_secrets])
    with pytest.raises(GuardrailTripped):
        await asyncio.wait_for(Runner().run(agent, message="password?", session=session), 10)
    assert provider.cancelled.is_set()
    assert roles(session) == ["user"]


async def test_the_first_guardrail_to_trip_decides_and_the_others_are_cancelled() -> None:
    slow_cancelled = asyncio.Event()

    async def slow(ctx: Context, message: Message) -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            slow_cancelled.set()
            raise

    async def quick(ctx: Context, message: Message) -> str:
        return "too quick"

    agent = Agent(
        "A",
        model="m",
        provider=MockProvider([MockReply(content="x")]),
        input_guardrails=[slow, Guardrail(quick, name="speed")],
    )
    with pytest.raises(GuardrailTripped, match="'speed' tripped: too quick"):
        await asyncio.wait_for(Runner().run(agent, message="hi"), 10)
    assert slow_cancelled.is_set()


@pytest.mark.parametrize("mode", MODES)
async def test_an_output_guardrail_that_trips_keeps_the_reply_out_of_the_session(
    mode: str, tmp_path: Path
) -> None:
    seen: list[Any] = []

    def no_refunds(ctx: Context, output: str) -> str | None:
        seen.append(output)
        return "promised a refund" if "refund" in output else None

    provider = MockProvider(
        [
            MockReply(tool_calls=(ToolCall("c1", "lookup", '{"order": "7"}'),)),
            MockReply(content="You get a full refund."),
        ]
    )
    session = SQLiteSession("out", tmp_path / "out.db")
    agent = Agent("A", model="m", provider=provider, tools=[lookup], output_guardrails=[no_refunds])
    with pytest.raises(GuardrailTripped) as tripped:
        await drive(mode, Runner(), agent, message="order 7?", session=session)
    assert (tripped.value.stage, tripped.value.reason) == ("output", "promised a refund")
    assert tripped.value.message.content == "You get a full refund."
    assert seen == ["You get a full refund."]
    # A run keeps the tool turn that completed; a stream stores nothing after the question.
    expected = ["user"] if mode == "stream" else ["user", "assistant", "tool"]
    assert roles(session) == expected
    assert "refund" not in " ".join(m.content for m in session.get_messages())


@pytest.mark.parametrize("mode", MODES)
async def test_an_output_guardrail_with_a_replacement_stores_and_returns_it(
    mode: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def no_refunds(ctx: Context, output: str) -> str | None:
        return "promised a refund" if "refund" in output else None

    provider = MockProvider([MockReply(content="You get a full refund.", usage=Usage(requests=1))])
    session = SQLiteSession("rep", tmp_path / "rep.db")
    agent = Agent(
        "A",
        model="m",
        provider=provider,
        output_guardrails=[Guardrail(no_refunds, replacement="A colleague will contact you.")],
    )
    with caplog.at_level(logging.WARNING, logger="aniki"):
        result = await drive(mode, Runner(), agent, message="refund?", session=session)
    assert result.content == result.output == "A colleague will contact you."
    assert [(m.role, m.content) for m in session.get_messages()] == [
        ("user", "refund?"),
        ("assistant", "A colleague will contact you."),
    ]
    assert session.get_messages()[1].context is not None  # its call's report is kept
    assert "no_refunds" in caplog.text and "promised a refund" in caplog.text


async def test_a_stream_says_the_reply_was_replaced() -> None:
    agent = Agent(
        "A",
        model="m",
        provider=MockProvider([MockReply(content="bad words here")]),
        output_guardrails=[Guardrail(lambda ctx, out: "bad" not in out, replacement="Sorry.")],
    )
    events = [event async for event in Runner().stream(agent, message="hi")]
    restarted = [i for i, e in enumerate(events) if isinstance(e, StreamRestarted)]
    assert len(restarted) == 1 and "replaced the reply" in events[restarted[0]].reason
    after = [e.text for e in events[restarted[0] :] if isinstance(e, TextDelta)]
    assert "".join(after) == "Sorry."


class Answer(pydantic.BaseModel):
    amount: int


async def test_an_output_guardrail_sees_the_validated_output() -> None:
    seen: list[Any] = []

    def small(ctx: Context, output: Answer) -> str | None:
        seen.append(output)
        return None if output.amount < 100 else "too large"

    agent = Agent(
        "A",
        model="m",
        output_schema=Answer,
        output_guardrails=[small],
        provider=MockProvider([MockReply(content=json.dumps({"amount": 500}))]),
    )
    with pytest.raises(GuardrailTripped, match="too large"):
        await Runner().run(agent, message="how much?")
    assert seen == [Answer(amount=500)]


async def test_a_guardrail_that_asks_another_agent_is_charged_to_the_run() -> None:
    judge = Agent(
        "Judge",
        model="judge",
        provider=MockProvider(handler=lambda request: "safe"),
    )

    async def judged(ctx: Context, message: Message) -> str | None:
        verdict = await Runner().run(judge, message=message.content)
        return None if verdict.content == "safe" else "the judge said no"

    provider = MockProvider(
        [MockReply(content="hello", usage=Usage(requests=1, input_tokens=10, output_tokens=2))]
    )
    agent = Agent("A", model="m", provider=provider, input_guardrails=[judged])
    result = await Runner().run(agent, message="hi")
    assert result.content == "hello"
    assert result.usage.requests == 2  # the agent's call and the judge's
    assert result.usage.input_tokens == 10


async def test_a_guardrail_that_raises_ends_the_run_with_its_error() -> None:
    def broken(ctx: Context, message: Message) -> None:
        raise RuntimeError("moderation service down")

    agent = Agent(
        "A", model="m", provider=MockProvider([MockReply(content="x")]), input_guardrails=[broken]
    )
    with pytest.raises(RuntimeError, match="moderation service down"):
        await Runner().run(agent, message="hi")


@pytest.mark.parametrize(
    ("returned", "tripped"),
    [(None, None), (True, None), (False, "(no reason given)"), ("", "(no reason given)")],
)
async def test_what_a_check_returns(returned: Any, tripped: str | None) -> None:
    agent = Agent(
        "A",
        model="m",
        provider=MockProvider([MockReply(content="x")]),
        input_guardrails=[lambda ctx, message: returned],
    )
    if tripped is None:
        assert (await Runner().run(agent, message="hi")).content == "x"
        return
    with pytest.raises(GuardrailTripped) as caught:
        await Runner().run(agent, message="hi")
    assert caught.value.reason == tripped


async def test_a_check_returning_something_else_is_a_user_error() -> None:
    agent = Agent(
        "A",
        model="m",
        provider=MockProvider([MockReply(content="x")]),
        input_guardrails=[lambda ctx, message: 42],
    )
    with pytest.raises(UserError, match="returned int; return None"):
        await Runner().run(agent, message="hi")


def test_misplaced_guardrail_options_are_user_errors() -> None:
    provider = MockProvider()
    with pytest.raises(UserError, match="only an output guardrail can replace"):
        Agent(
            "A",
            model="m",
            provider=provider,
            input_guardrails=[Guardrail(no_secrets, replacement="no")],
        )
    with pytest.raises(UserError, match="must fit its output_schema"):
        Agent(
            "A",
            model="m",
            provider=provider,
            output_schema=Answer,
            output_guardrails=[Guardrail(no_secrets, replacement="no")],
        )
    with pytest.raises(UserError, match="must be a function"):
        Agent("A", model="m", provider=provider, input_guardrails=["strict"])  # type: ignore[list-item]
    with pytest.raises(UserError, match="takes a list"):
        Agent("A", model="m", provider=provider, output_guardrails=no_secrets)  # type: ignore[arg-type]
    assert Guardrail(no_secrets).name == "no_secrets"


async def test_a_run_timeout_covers_a_check_that_never_ends(tmp_path: Path) -> None:
    ended = asyncio.Event()

    async def stuck(ctx: Context, message: Message) -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            ended.set()

    session = SQLiteSession("stuck", tmp_path / "s.db")
    agent = Agent(
        "A",
        model="m",
        provider=MockProvider([MockReply(content="x")]),
        input_guardrails=[stuck],
    )
    with pytest.raises(RunTimeoutError):
        await Runner().run(agent, message="hi", session=session, timeout=0.3)
    assert ended.is_set()  # the check was cancelled, not left running
    assert roles(session) == ["user"]
