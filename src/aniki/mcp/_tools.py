"""The tools an MCP server lists, as aniki :class:`~aniki.Tool` objects whose calls go to the
server."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pydantic

from mcp import types

from ..context import Context
from ..messages import Message, ToolCall
from ..tools import BadArguments, Tool, json_arguments
from ._errors import MCPServerError

__all__ = ["MCPTool", "build_tools"]

logger = logging.getLogger("aniki.mcp")

_NOT_IN_A_NAME = re.compile(r"[^A-Za-z0-9_-]")
"""What a tool name may not hold at OpenAI or Anthropic (MCP also allows ``.`` and ``/``)."""


class _Arguments(pydantic.BaseModel):
    """Stands in for ``Tool.arguments_model``: the server validates against its own schema."""

    model_config = pydantic.ConfigDict(extra="allow")


class Caller(Protocol):
    """What calls an :class:`MCPTool` on its server (the server object)."""

    async def _reply(self, call: ToolCall, remote_name: str, arguments: dict[str, Any]) -> Message:
        """The ``tool`` message answering ``call`` (to the tool the server names
        ``remote_name``); never raises (but cancels)."""
        ...


@dataclass(frozen=True, slots=True)
class MCPTool(Tool):
    """A tool of an MCP server: invoking it calls the server, which validates the arguments
    against the schema it listed. Calling it directly (``await tool(a=1)``) returns the text
    the model would read."""

    remote_name: str = field(default="", kw_only=True)
    """The tool's name on the server (``name`` adds the server's ``tool_prefix``)."""
    server: Caller = field(repr=False, compare=False, kw_only=True)
    """The server that runs it."""

    async def invoke(self, call: ToolCall, context: Context) -> Message:
        """Call the server and return the ``tool`` message answering ``call``; never raises
        (but cancels)."""
        try:
            arguments = json_arguments(self.name, call.arguments)
        except BadArguments as bad:
            return Message("tool", str(bad), tool_call_id=call.id)
        return await self.server._reply(call, self.remote_name, arguments)


def build_tools(
    server: Caller, listed: Sequence[types.Tool], *, prefix: str, server_name: str
) -> tuple[MCPTool, ...]:
    """``listed`` as aniki tools, named ``prefix`` + their name (characters a model API does
    not take in a name become ``_``). A tool that can only be called as a task
    (``execution.taskSupport: "required"``) is left out, with a log line saying why: aniki
    calls tools directly."""
    made: dict[str, MCPTool] = {}
    for remote in listed:
        if remote.execution is not None and remote.execution.task_support == "required":
            logger.info(
                "MCP server %s: tool %r is left out: it can only be called as a task "
                "(execution.taskSupport is 'required'), which aniki does not do",
                server_name,
                remote.name,
            )
            continue
        name = _NOT_IN_A_NAME.sub("_", prefix + remote.name)
        if name in made:
            raise MCPServerError(
                f"MCP server {server_name!r} lists two tools named {name!r} (as a model API "
                f"must see them: {made[name].remote_name!r} and {remote.name!r})",
                server=server_name,
            )
        schema = dict(remote.input_schema)
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        made[name] = MCPTool(
            name=name,
            description=remote.description or remote.title or "",
            parameters=schema,
            function=_direct(server, name, remote.name),
            arguments_model=_Arguments,
            remote_name=remote.name,
            server=server,
        )
    return tuple(made.values())


def _direct(server: Caller, name: str, remote_name: str) -> Any:
    async def call(**arguments: Any) -> str:
        return (await server._reply(ToolCall("direct", name), remote_name, arguments)).content

    call.__name__ = name
    return call
