"""What the windowed and budget policies are as sessions: kinds, pass-through, misuse, runs."""

from __future__ import annotations

import inspect
import itertools
from typing import Any

import pytest

from aniki import (
    Agent,
    AsyncSession,
    Message,
    Runner,
    Session,
    ToolCall,
    UserError,
    ValidationError,
    tool,
)
from aniki.providers.base import ModelRequest, ModelResponse
from aniki.sessions import InMemorySession
from aniki.sessions.policies import TokenBudgetSession, WindowedSession
from aniki.testing import MockProvider
from aniki.tokens import EstimatingCounter

from .histories import assert_provider_valid, user
from .stores import AsyncMemorySession, PlainSession


def test_over_a_sync_store_the_policy_is_sync() -> None:
    policy = WindowedSession(InMemorySession(), 2)
    assert isinstance(policy, Session)
    assert policy.add_message(user("a")) is None
    assert policy.add_messages([user("b"), user("c")]) is None
    assert policy.get_messages() == (user("c"),)  # over the limit: the cut leaves trim_to = 1
    assert policy.clear() is None
    assert policy.get_messages() == ()


async def test_over_an_async_store_the_policy_is_async() -> None:
    policy = TokenBudgetSession(AsyncMemorySession("x"), 100, counter=EstimatingCounter())
    assert isinstance(policy, AsyncSession)
    pending = policy.get_messages()
    assert inspect.isawaitable(pending)
    assert await pending == ()
    await policy.add_messages([user("a"), user("b")])
    assert await policy.get_messages() == (user("a"), user("b"))


@pytest.mark.parametrize("store", [PlainSession("p"), AsyncMemorySession("a")])
async def test_a_batch_is_validated_whole_before_anything_is_stored(store: Any) -> None:
    policy: Any = WindowedSession(store, 5)
    with pytest.raises(ValidationError):
        result = policy.add_messages([user("fine"), {"role": "user", "content": ""}])
        if inspect.isawaitable(result):
            await result
    stored = store.get_messages()
    assert (await stored if inspect.isawaitable(stored) else stored) == ()


async def test_a_batch_without_add_messages_in_the_store_is_added_in_order() -> None:
    plain = PlainSession("p")
    WindowedSession(plain, 5).add_messages([user("a"), user("b")])
    assert plain.get_messages() == (user("a"), user("b"))


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, None])
def test_limits_must_be_whole_positive_numbers(bad: object) -> None:
    with pytest.raises(UserError, match="max_messages"):
        WindowedSession(InMemorySession(), bad)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="max_tokens"):
        TokenBudgetSession(InMemorySession(), bad)  # type: ignore[arg-type]


def test_only_sessions_can_be_wrapped() -> None:
    with pytest.raises(UserError, match="has no add_message"):
        WindowedSession(["not", "a", "session"], 3)  # type: ignore[type-var]


def test_repr_names_the_store_and_the_limit() -> None:
    assert "max_messages=3" in repr(WindowedSession(InMemorySession("s"), 3))
    assert "max_tokens=9" in repr(TokenBudgetSession(InMemorySession("s"), 9))


@tool
def lookup(topic: str) -> str:
    """Look something up.

    Args:
        topic: what to look up.
    """
    return f"notes on {topic} " * 5


async def test_no_request_of_a_run_ever_starts_inside_a_tool_exchange() -> None:
    calls = itertools.count()

    def reply(request: ModelRequest) -> ModelResponse | str:
        if request.messages[-1].role != "user":
            return "done"
        made = tuple(
            ToolCall(id=f"c{next(calls)}", name="lookup", arguments=f'{{"topic": "{topic}"}}')
            for topic in "ab"
        )
        return ModelResponse(tool_calls=made, finish_reason="tool_calls")

    provider = MockProvider(handler=reply)
    store = InMemorySession()
    for session in (WindowedSession(store, 2), TokenBudgetSession(store, 30)):
        agent = Agent("A", "Be brief.", model="m", provider=provider, tools=[lookup])
        for turn in range(4):
            await Runner().run(agent, message=f"turn {turn}", session=session)
    for request in provider.requests:
        history = request.messages[1:]
        assert history, "the history is never empty"
        assert_provider_valid(history)
    assert len(store.get_messages()) == 8 * 5  # everything stored


def test_messages_are_plain_messages() -> None:
    policy = WindowedSession(InMemorySession(), 1)
    policy.add_message({"role": "user", "content": "hi"})
    assert isinstance(policy.get_messages()[0], Message)
