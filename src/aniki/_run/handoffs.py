"""Handoffs: ``Agent(handoffs=[...])`` offers one ``transfer_to_<name>`` tool per target.

The turn loop (:mod:`aniki._run.loop`) offers the tools, answers a call with the messages
made here, stores the turn, and lets the target answer from then on, over the same session.
A resumed run finds the agent that held its calls among the agents handed off to.
"""

from __future__ import annotations

from typing import Any

from ..agent import Agent, handoff_tool_name
from ..errors import UserError
from ..messages import Message, ToolCall
from ..providers.base import ToolDefinition

__all__ = ["find_agent", "handed_off", "handoff_answer", "handoff_definition", "handoff_targets"]

_NO_ARGUMENTS: dict[str, Any] = {
    "type": "object",
    "properties": {},
    "required": [],
    "additionalProperties": False,
}


def handoff_targets(agent: Agent[Any]) -> dict[str, Agent[Any]]:
    """The agents ``agent`` may hand off to, by the name of the tool that does it."""
    targets: dict[str, Agent[Any]] = {}
    for target in agent.handoffs:
        name = handoff_tool_name(target)
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


def misplaced_answer(call: ToolCall) -> Message:
    """The tool message answering a handoff asked for beside a call held for approval."""
    return Message(
        "tool",
        f"Not transferred: {call.name} must be called alone; call it again.",
        tool_call_id=call.id,
    )


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
