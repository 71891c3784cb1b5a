"""An agent called as a tool (``Agent.as_tool()``): each call is a run of that agent on the
request, in the tool's session (a fresh in-memory one per call when it has none).

A run binds each agent tool it offers to itself (:func:`aniki._run.loop.prepare`), so a call
knows the run that made it: the sub-run's usage is added to that run's, and in a streamed
run the sub-run's events are streamed too, between two :class:`~aniki.AgentUpdated`. A tool
called outside any run just runs the agent.

:mod:`aniki.agent` sits below the run engine and cannot import it: :mod:`aniki.runner` hands
it :func:`ask`, the way every agent tool's call runs (``run_agent_tools_with``).
"""

from __future__ import annotations

from typing import Any

from ..agent import AgentTool
from ..events import AgentUpdated, RunCompleted
from ..messages import Message
from ..result import RunResult
from ..sessions.memory import InMemorySession
from . import runs
from .plan import RunPlan, check_max_turns, new_plan

__all__ = ["ask"]


async def ask(tool: AgentTool, request: str, caller: RunPlan | None) -> Any:
    """Run ``tool``'s agent on ``request`` for the run ``caller`` (``None``: no run), and
    answer with its reply (its output when it has an output schema)."""
    agent = tool.agent
    streamed = caller is not None and caller.emit is not None
    plan = new_plan(
        agent,
        tool.session if tool.session is not None else InMemorySession(),
        None,
        None,
        streaming=streamed,
        max_turns=check_max_turns(tool.max_turns),
    )
    user = Message("user", request)
    if caller is not None and streamed:
        result = await _streamed(plan, user, caller)
    else:
        result = await runs.run(plan, user, None)
    if caller is not None:
        caller.sub_usage += result.usage
    if result.pending_approvals:
        waiting = ", ".join(call.name for call in result.pending_approvals)
        return f"{agent.name} stopped before calling {waiting}: it awaits approval."
    return result.output if agent.output is not None else result.content


async def _streamed(plan: RunPlan, user: Message, caller: RunPlan) -> RunResult[Any]:
    emit = caller.emit
    assert emit is not None
    emit(AgentUpdated(plan.agent.name, "tool"))
    result: RunResult[Any] | None = None
    try:
        async for event in runs.stream(plan, user, None):
            if isinstance(event, RunCompleted):
                result = event.result
            else:
                emit(event)
    finally:
        emit(AgentUpdated(caller.agent.name, "return"))
    assert result is not None, "a stream that ends without raising ends with RunCompleted"
    return result
