"""Drive one behaviour through every way of running an agent."""

from __future__ import annotations

import asyncio
from typing import Any

from aniki import Agent, RunCompleted, Runner, RunResult

MODES = ["run", "run_sync", "stream"]


async def drive(mode: str, runner: Runner, agent: Agent, **kwargs: Any) -> RunResult:
    """Run ``agent`` with ``runner`` the way ``mode`` names, returning the result."""
    if mode == "run":
        return await runner.run(agent, **kwargs)
    if mode == "run_sync":
        return await asyncio.to_thread(runner.run_sync, agent, **kwargs)
    assert mode == "stream"
    stream = runner.stream(agent, **kwargs)
    events = [event async for event in stream]
    assert isinstance(events[-1], RunCompleted)
    assert stream.result is events[-1].result
    return events[-1].result
