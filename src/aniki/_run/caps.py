"""A tool's result, cut to the characters the agent lets a model be sent
(``Agent(max_tool_output=...)``): whatever the tool (local, MCP, another agent), a result
longer than that is cut, with a note saying how much was cut and how to get the rest, so
that one result of megabytes is neither stored nor sent whole."""

from __future__ import annotations

import dataclasses

from ..messages import Message

__all__ = ["capped"]


def capped(message: Message, cap: int | None, tool: str) -> Message:
    """``message`` (a tool's result) with its text cut to ``cap`` characters, and a note."""
    text = message.content
    if cap is None or len(text) <= cap:
        return message
    note = (
        f"\n\n[Output cut: the result of {tool} was {len(text):,} characters; the first "
        f"{cap:,} are shown. Call {tool} again for the part you need (a page, a range or a "
        "narrower query).]"
    )
    return dataclasses.replace(message, content=text[:cap] + note)
