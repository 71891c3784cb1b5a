"""A finished run leaves no reference cycle: its plan is freed as soon as nothing refers to it,
without waiting for the garbage collector (whose passes over the survivors of many runs in
flight cost a server's event loop time)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from aniki import Agent, Runner, tool
from aniki import runner as runner_module
from aniki.sessions import InMemorySession
from aniki.testing import MockProvider

from .helpers import MODES, drive


@tool
def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: What to look up.
    """
    return f"{topic}: found"


@pytest.fixture
def plans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The run id of every run's plan made while the test runs."""
    made: list[str] = []
    new_plan = runner_module.new_plan

    def recorded(*args: Any, **kwargs: Any) -> Any:
        plan = new_plan(*args, **kwargs)
        made.append(plan.context.run_id)
        return plan

    monkeypatch.setattr(runner_module, "new_plan", recorded)
    return made


def unreachable_plans() -> list[Any]:
    """The run plans only a reference cycle kept (the collector finds them now)."""
    gc.set_debug(gc.DEBUG_SAVEALL)  # what it finds is kept in gc.garbage, to be looked at
    try:
        gc.collect()
        return [found for found in gc.garbage if type(found).__name__ == "RunPlan"]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.usefixtures("no_collector")
async def test_a_finished_run_frees_its_plan_without_the_collector(
    mode: str, plans: list[str]
) -> None:
    provider = MockProvider()
    provider.enqueue_response(
        tool_calls=[{"id": "c1", "name": "lookup", "arguments": {"topic": "tides"}}]
    )
    provider.enqueue_response("high at noon")
    provider.enqueue_response("low at six")
    session = InMemorySession("s")
    agent = Agent("Helper", "Answer briefly.", model="mock", provider=provider, tools=[lookup])
    runner = Runner()
    for question in ("tides?", "and then?"):
        await drive(mode, runner, agent, message=question, session=session)
    assert len(plans) == 2
    assert unreachable_plans() == []
    assert [m.content for m in session.get_messages()][-1] == "low at six"
