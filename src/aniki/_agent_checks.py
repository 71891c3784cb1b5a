"""The checks ``Agent(...)`` makes of its arguments, each failing with a ``UserError`` that
says what to pass instead."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .errors import UserError
from .providers.base import Provider

__all__ = [
    "check_identity",
    "checked_cap",
    "checked_middleware",
    "checked_retries",
    "checked_servers",
    "described",
]


def check_identity(name: object, instructions: object, model: object, provider: object) -> None:
    if not isinstance(name, str) or not name:
        raise UserError("an agent needs a non-empty name")
    if not isinstance(model, str) or not model:
        raise UserError(f"agent {name!r} needs a model name, e.g. model='gpt-4o-mini'")
    if not (isinstance(instructions, str) or callable(instructions)):
        raise UserError("instructions must be a string or a function of the run's Context")
    if not isinstance(provider, str) and not isinstance(provider, Provider):
        raise UserError(
            f"provider must be a Provider object or a registered name, got {provider!r}"
        )


def checked_cap(cap: object) -> int | None:
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
        raise UserError(
            f"max_tool_output must be a number of characters of at least 1, or None for no "
            f"cap, got {cap!r}"
        )
    return cap


def checked_retries(output_retries: object) -> int:
    if (
        isinstance(output_retries, bool)
        or not isinstance(output_retries, int)
        or output_retries < 0
    ):
        raise UserError(f"output_retries must be 0 or more, got {output_retries!r}")
    return output_retries


def described(description: object, instructions: object) -> str:
    """``description``, or by default the first line of string ``instructions``."""
    if not isinstance(description, str):
        raise UserError(f"description must be a string, got {type(description).__name__}")
    if description or not isinstance(instructions, str) or not instructions.strip():
        return description
    return instructions.strip().splitlines()[0]


def checked_servers(mcp_servers: Sequence[Any]) -> tuple[Any, ...]:
    servers = tuple(mcp_servers)
    for server in servers:
        if not callable(getattr(server, "list_tools", None)):
            raise UserError(
                f"mcp_servers takes MCP servers (aniki.mcp.MCPServerStdio or MCPServerHTTP), "
                f"got {type(server).__name__}"
            )
    return servers


def checked_middleware(given: Sequence[Any], option: str) -> tuple[Any, ...]:
    """``given`` as a tuple, when it is a sequence of callables."""
    if isinstance(given, (str, bytes)) or not isinstance(given, Sequence):
        raise UserError(f"{option} takes a list of async functions, got {type(given).__name__}")
    for each in given:
        if not callable(each):
            raise UserError(f"{option} takes async functions, got {type(each).__name__}")
    return tuple(given)
