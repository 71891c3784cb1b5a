"""``MCPServerStdio``: an MCP server run as a subprocess, spoken to over its stdin and stdout."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters, stdio_client

from .._secrets import Secrets
from ..errors import UserError
from ._base import MAX_RESULT_BYTES, MCPServerBase
from ._features_config import ApproveSampling, ElicitationHandler, Sampling, client_features
from ._transports import under_watchdog

__all__ = ["MCPServerStdio"]


class MCPServerStdio(MCPServerBase):
    """An MCP server aniki starts as a subprocess on first use, and ends on ``close()``.

    The process is started when a run first needs the server's tools (or on ``connect()``
    or ``async with``), kept across runs, and ended by ``close()`` or at interpreter exit:
    its stdin is closed, then it is sent SIGTERM and SIGKILL (with its process group) if it
    does not exit. If it dies, the next call starts it again.

    Example::

        from aniki import Agent, Runner
        from aniki.mcp import MCPServerStdio

        files = MCPServerStdio("npx", ["-y", "@modelcontextprotocol/server-filesystem", "."])
        agent = Agent("Clerk", "Answer from the files.", model="gpt-4o", mcp_servers=[files])
        async with files:
            result = await Runner().run(agent, message="What is in README.md?")

    Args:
        command: the program to run (``"npx"``, ``"uvx"``, ``sys.executable``, ...).
        args: its arguments.
        env: environment variables for the server, over the few it inherits (``HOME``,
            ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``, ``USER``; on Windows their
            equivalents). Their values never appear in errors, logs or the repr.
        cwd: the server's working directory (default: this process's).
        name: the server's name in errors and logs (default: from the command).
        timeout: seconds a tool call, or the listing of the tools, may take; a call that
            takes longer is answered with an error the model reads.
        connect_timeout: seconds starting the server and the MCP handshake may take.
        tool_prefix: put before each tool's name as the model sees it (``"files_"``), to
            keep two servers' tools apart.
        cache_tools: keep the tool list across runs until the server says it changed
            (``False``: ask the server at the start of every run).
        attach_media: put images and PDFs that tools return on the tool message as
            attachments, for providers that take them in a tool result (Anthropic,
            OpenAI Responses); by default they are described in the text.
        max_result_bytes: how much text (and base64 media) one message from the
            server, such as a tool's result, keeps (default 1 MiB); the rest is cut
            while it is read, never held in memory, and a note says so.
        sampling: who answers when the server asks for a model reply: ``"agent"`` (the
            model of the agent whose run calls the server's tool), a provider (with
            ``sampling_model=``, or the calling agent's model), or a function taking a
            :class:`~aniki.mcp.SamplingRequest` and returning the text. ``None``: the
            client does not offer sampling.
        sampling_model: the model a provider given as ``sampling=`` is asked with.
        approve_sampling: called with each :class:`~aniki.mcp.SamplingRequest` before it
            is answered: ``True`` lets it go ahead, ``False`` or a reason refuses it.
        elicitation: answers the server's questions to the user: called with an
            :class:`~aniki.mcp.ElicitationRequest`, it returns an
            :class:`~aniki.mcp.ElicitationReply`, a dict (accept with these values) or
            ``None`` (decline). Without it every question is declined.
        roots: the directories (paths or ``file://`` URIs) the server is told it may
            work in, when it asks. ``None``: the client does not offer roots.
    """

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        name: str | None = None,
        timeout: float = 30.0,
        connect_timeout: float = 30.0,
        tool_prefix: str = "",
        cache_tools: bool = True,
        attach_media: bool = False,
        max_result_bytes: int = MAX_RESULT_BYTES,
        sampling: Sampling | None = None,
        sampling_model: str | None = None,
        approve_sampling: ApproveSampling | None = None,
        elicitation: ElicitationHandler | None = None,
        roots: Sequence[str | os.PathLike[str]] | None = None,
    ) -> None:
        _check_process(command, args, env, cwd)
        self.command = command
        """The program run."""
        self.args = tuple(args)
        """Its arguments."""
        self.cwd = cwd
        """Its working directory (``None``: this process's)."""
        self._env = dict(env) if env is not None else None
        super().__init__(
            name=name if name is not None else _default_name(command, self.args),
            timeout=timeout,
            connect_timeout=connect_timeout,
            tool_prefix=tool_prefix,
            cache_tools=cache_tools,
            attach_media=attach_media,
            max_result_bytes=max_result_bytes,
            secrets=Secrets((self._env or {}).values()),
            features=client_features(
                sampling=sampling,
                sampling_model=sampling_model,
                approve_sampling=approve_sampling,
                elicitation=elicitation,
                roots=roots,
            ),
        )

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        parameters = StdioServerParameters(
            command=self.command,
            args=list(self.args),
            env=self._env,
            cwd=os.fspath(self.cwd) if self.cwd is not None else None,
        )
        return stdio_client(under_watchdog(parameters, self.max_result_bytes), errlog=sys.stderr)

    def _shown(self) -> str:
        env = f", env=<{len(self._env)} variables>" if self._env else ""
        return f"{self.command!r}, args={list(self.args)!r}{env}"


def _check_process(command: object, args: Sequence[str], env: object, cwd: object) -> None:
    """Refuse a server process described with the wrong types, saying what to pass."""
    if not isinstance(command, str) or not command:
        raise UserError(f"command must be a non-empty string, got {command!r}")
    if isinstance(args, str) or not all(isinstance(arg, str) for arg in args):
        raise UserError("args must be a list of strings, e.g. ['server.py', '--verbose']")
    if env is not None and not (
        isinstance(env, Mapping)
        and all(isinstance(key, str) and isinstance(value, str) for key, value in env.items())
    ):
        raise UserError("env must map names to string values")
    if cwd is not None and not isinstance(cwd, (str, os.PathLike)):
        raise UserError(f"cwd must be a path, got {type(cwd).__name__}")


def _default_name(command: str, args: tuple[str, ...]) -> str:
    """``"python server.py"`` for ``python /path/to/server.py --flag``."""
    words = [Path(command).name]
    script = next((arg for arg in args if not arg.startswith("-")), None)
    if script is not None:
        words.append(Path(script).name)
    return " ".join(words)
