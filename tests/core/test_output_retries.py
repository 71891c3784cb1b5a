"""A final reply that does not fit the output schema goes back to the model with the errors,
``output_retries`` times; only a reply that fits is stored."""

from __future__ import annotations

import pydantic
import pytest

from aniki import Agent, OutputValidationError, Runner, StreamRestarted, Usage
from aniki.testing import MockProvider

from .helpers import MODES, drive


class City(pydantic.BaseModel):
    name: str
    population: int


@pytest.mark.parametrize("mode", MODES)
async def test_a_reply_that_does_not_fit_is_sent_back_and_the_retry_is_kept(mode: str) -> None:
    provider = MockProvider()
    provider.enqueue_response(content='{"name": "Oslo"}', usage=Usage(input_tokens=10, requests=1))
    provider.enqueue_response(
        content='{"name": "Oslo", "population": 700000}', usage=Usage(input_tokens=30, requests=1)
    )
    agent = Agent("A", model="m", provider=provider, output_schema=City)
    result = await drive(mode, Runner(), agent, message="biggest city in Norway?")
    assert result.output == City(name="Oslo", population=700000)
    assert result.usage.requests == 2 and result.usage.input_tokens == 40

    retry = provider.requests[1].messages
    assert [m.role for m in retry] == ["user", "assistant", "user"]
    assert retry[1].content == '{"name": "Oslo"}'
    assert "population" in retry[2].content and "schema" in retry[2].content
    stored = agent.session.get_messages()  # type: ignore[union-attr]
    assert [(m.role, m.content) for m in stored] == [
        ("user", "biggest city in Norway?"),
        ("assistant", '{"name": "Oslo", "population": 700000}'),
    ]  # the slip and the note about it were never stored
    assert [(m.role, m.content) for m in result.new_messages] == [
        (m.role, m.content) for m in stored
    ]


async def test_a_stream_says_the_text_of_the_slip_is_void() -> None:
    provider = MockProvider()
    provider.enqueue_response(content="not json")
    provider.enqueue_response(content='{"name": "Oslo", "population": 1}')
    agent = Agent("A", model="m", provider=provider, output_schema=City)
    events = [event async for event in Runner().stream(agent, message="go")]
    restarts = [e for e in events if isinstance(e, StreamRestarted)]
    assert len(restarts) == 1 and "schema" in restarts[0].reason


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("retries", [0, 1, 3])
async def test_retries_are_counted_then_the_run_raises(mode: str, retries: int) -> None:
    provider = MockProvider(handler=lambda request: '{"name": "Oslo"}')
    agent = Agent("A", model="m", provider=provider, output_schema=City, output_retries=retries)
    with pytest.raises(OutputValidationError, match="population"):
        await drive(mode, Runner(), agent, message="go")
    assert len(provider.requests) == retries + 1
    roles = [m.role for m in agent.session.get_messages()]  # type: ignore[union-attr]
    assert roles == (["user"] if mode == "stream" else ["user", "assistant"])


async def test_a_retry_needs_a_turn_left() -> None:
    provider = MockProvider(handler=lambda request: '{"name": "Oslo"}')
    agent = Agent("A", model="m", provider=provider, output_schema=City, output_retries=5)
    with pytest.raises(OutputValidationError):
        await Runner(max_turns=2).run(agent, message="go")
    assert len(provider.requests) == 2


def test_output_retries_must_be_a_count() -> None:
    from aniki import UserError

    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(UserError, match="output_retries"):
            Agent("A", model="m", provider=MockProvider(), output_retries=bad)  # type: ignore[arg-type]
