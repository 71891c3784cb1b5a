"""Agents working with agents: one agent called by another as a tool, and handoffs.

* ``agent.as_tool()`` wraps a run of the agent in a :class:`~aniki.Tool`. The run that calls
  it is found through :data:`CURRENT_PLAN` (a context variable the turn loop sets), so the
  sub-run's usage is added to the caller's and, in a streamed run, its events are streamed
  after an :class:`~aniki.AgentUpdated`.
* ``Agent(handoffs=[...])`` offers one ``transfer_to_<name>`` tool per target. The turn loop
  answers the call, stores the turn, and lets the target answer from then on.
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from ..errors import UserError
from ..events import AgentUpdated, RunCompleted
from ..messages import Message, ToolCall
from ..providers.base import ToolDefinition
from ..tools import Tool, tool

if TYPE_CHECKING:
    from ..agent import Agent
    from ..result import RunResult
    from ..sessions.base import AsyncSession, Session
    from .loop import RunPlan

__all__ = [
    "CURRENT_PLAN",
    "agent_tool",
    "find_agent",
    "handed_off",
    "handoff_answer",
    "handoff_definition",
    "handoff_targets",
    "slug",
]

CURRENT_PLAN: ContextVar[RunPlan | None] = ContextVar("aniki_current_plan", default=None)
"""The run whose tools are running (set by the turn loop; read by agent tools)."""

_NO_ARGUMENTS: dict[str, Any] = {
    "type": "object",
    "properties": {},
    "required": [],
    "additionalProperties": False,
}


def slug(name: str) -> str:
    """``name`` as a tool name: lower case, runs of other characters as ``_`` (64 at most)."""
    text = re.sub(r"[^a-z0-9_-]+", "_", name.lower()).strip("_")
    return text[:64] or "agent"


def agent_tool(
    agent: Agent[Any],
    *,
    name: str | None,
    description: str | None,
    session: Session | AsyncSession | None,
    max_turns: int,
) -> Tool:
    """The tool :meth:`Agent.as_tool <aniki.Agent.as_tool>` returns."""
    tool_name = name if name is not None else slug(agent.name)
    said = description if description is not None else _described(agent)

    async def ask(request: str) -> Any:
        """Ask the agent.

        Args:
            request: What to ask or tell the agent, in words, with everything it needs.
        """
        from ..runner import Runner
        from ..sessions.memory import InMemorySession

        parent = CURRENT_PLAN.get()
        runner = Runner(max_turns=max_turns)
        where = session if session is not None else InMemorySession()
        if parent is not None and parent.emit is not None:
            result = await _streamed(runner, agent, request, where, parent)
        else:
            result = await runner.run(agent, message=request, session=where)
        if parent is not None:
            parent.sub_usage += result.usage
        if result.pending_approvals:
            waiting = ", ".join(call.name for call in result.pending_approvals)
            return f"{agent.name} stopped before calling {waiting}: it awaits approval."
        return result.output if agent.output is not None else result.content

    return tool(name=tool_name, description=said)(ask)


async def _streamed(
    runner: Any, agent: Agent[Any], request: str, where: Any, parent: RunPlan
) -> RunResult[Any]:
    assert parent.emit is not None
    parent.emit(AgentUpdated(agent.name, "tool"))
    result: RunResult[Any] | None = None
    try:
        async for event in runner.stream(agent, message=request, session=where):
            if isinstance(event, RunCompleted):
                result = event.result
            else:
                parent.emit(event)
    finally:
        parent.emit(AgentUpdated(parent.agent.name, "return"))
    assert result is not None, "a stream that ends without raising ends with RunCompleted"
    return result


def _described(agent: Agent[Any]) -> str:
    what = agent.description.rstrip(".")
    return f"Ask {agent.name}" + (f": {what}" if what else "") + "."


def handoff_targets(agent: Agent[Any]) -> dict[str, Agent[Any]]:
    """The agents ``agent`` may hand off to, by the name of the tool that does it."""
    targets: dict[str, Agent[Any]] = {}
    for target in agent.handoffs:
        name = f"transfer_to_{slug(target.name)}"
        if name in targets or name in agent.tools:
            raise UserError(
                f"agent {agent.name!r} has two tools named {name!r}; give its handoff targets "
                "distinct names"
            )
        targets[name] = target
    return targets


def handoff_definition(name: str, target: Agent[Any]) -> ToolDefinition:
    """The tool the model calls to hand the conversation to ``target``."""
    what = f": {target.description.rstrip('.')}" if target.description else ""
    return ToolDefinition(
        name,
        f"Hand the conversation over to {target.name}{what}. It answers the user from then "
        "on; call this alone, with no other tool.",
        _NO_ARGUMENTS,
    )


def handed_off(calls: tuple[ToolCall, ...], targets: dict[str, Agent[Any]]) -> ToolCall | None:
    """The first call in ``calls`` that hands off, if any."""
    return next((call for call in calls if call.name in targets), None)


def handoff_answer(call: ToolCall, chosen: ToolCall, targets: dict[str, Agent[Any]]) -> Message:
    """The tool message answering a handoff call (the one taken, or one left aside)."""
    target = targets[call.name]
    if call is chosen:
        text = f"Transferred to {target.name}; {target.name} answers from here."
    else:
        text = f"Not transferred to {target.name}: another transfer in the same turn was taken."
    return Message("tool", text, tool_call_id=call.id)


def find_agent(start: Agent[Any], name: str) -> Agent[Any] | None:
    """The agent named ``name`` among ``start`` and those it can hand off to, at any depth."""
    seen: set[int] = set()
    pending = [start]
    while pending:
        agent = pending.pop(0)
        if id(agent) in seen:
            continue
        seen.add(id(agent))
        if agent.name == name:
            return agent
        pending.extend(agent.handoffs)
    return None
