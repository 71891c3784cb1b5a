"""Tool middleware (``Agent(tool_middleware=...)``, ``Runner(tool_middleware=...)``): the
chain around each tool call, as model middleware is around each model call.

Each middleware is ``async (ctx, call, call_next) -> Message | str``. It may pass ``call_next``
the call with other arguments, change or replace what it returns, or not call it at all and
return a refusal for the model. A ``str`` is the text of the tool message; a raised
:class:`~aniki.ToolError` is a refusal too (its text goes to the model). Any other exception
ends the run. The runner's middleware runs outside the agent's; the cap on a tool's output
(``max_tool_output``) applies to what the outermost returns.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ..agent import ToolMiddleware
from ..context import Context
from ..errors import ToolError, UserError
from ..messages import Message, ToolCall

__all__ = ["ToolNext", "through"]

ToolNext = Callable[[ToolCall], Awaitable[Message]]
"""What a tool middleware calls to go on: the rest of the chain, then the tool."""


async def through(
    middleware: tuple[ToolMiddleware, ...], context: Context, call: ToolCall, tool: ToolNext
) -> Message:
    """``call`` answered by ``tool`` through ``middleware`` (the first outermost)."""

    async def innermost(given: ToolCall) -> Message:
        if not isinstance(given, ToolCall) or given.id != call.id or given.name != call.name:
            raise UserError(
                f"a tool middleware passed call_next {_shown(given)} for the call {call.id!r} "
                f"of {call.name!r}; it may change a call's arguments "
                "(dataclasses.replace(call, arguments=...)), not its id or tool"
            )
        return await tool(given)

    handler: ToolNext = innermost
    for each in reversed(middleware):
        handler = _bind(each, context, call, handler)
    return await handler(call)


def _bind(middleware: ToolMiddleware, context: Context, call: ToolCall, rest: ToolNext) -> ToolNext:
    async def handle(given: ToolCall) -> Message:
        try:
            returned = await middleware(context, given, rest)
        except ToolError as refused:
            return Message(
                "tool",
                str(refused) or f"Error: the call of {call.name!r} was refused",
                tool_call_id=call.id,
            )
        return _answer(middleware, call, returned)

    return handle


def _answer(middleware: ToolMiddleware, call: ToolCall, returned: object) -> Message:
    """What ``middleware`` returned for ``call``, as the tool message answering it."""
    if isinstance(returned, str):
        return Message("tool", returned, tool_call_id=call.id)
    if isinstance(returned, Message) and returned.role == "tool":
        if returned.tool_call_id == call.id:
            return returned
        raise UserError(
            f"tool middleware {_name(middleware)} returned the answer to call "
            f"{returned.tool_call_id!r} for call {call.id!r}; return what call_next returned, "
            "a changed copy of it, or a string"
        )
    raise UserError(
        f"tool middleware {_name(middleware)} returned {type(returned).__name__} for the call "
        f"of {call.name!r}; return what call_next returned (a tool Message) or a string"
    )


def _name(middleware: object) -> str:
    return repr(getattr(middleware, "__qualname__", None) or type(middleware).__name__)


def _shown(given: object) -> str:
    if isinstance(given, ToolCall):
        return f"the call {given.id!r} of {given.name!r}"
    return f"a {type(given).__name__}"
