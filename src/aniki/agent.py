"""``Agent``: instructions, a model and provider, tools, and a session to remember in.

An agent is data the run engine (:mod:`aniki._run`, above this module) reads; this module
imports none of it. ``Agent.as_tool()`` returns an :class:`AgentTool`: the engine binds it
to the run that offers it, and runs each call as a run of the agent; it hands down how it
does that (:func:`run_agent_tools_with`) when it loads, so even a tool called outside any
run works.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeAlias, TypedDict, overload

from typing_extensions import TypeVar, Unpack

from ._agent_checks import (
    check_identity,
    checked_cap,
    checked_middleware,
    checked_retries,
    checked_servers,
    described,
)
from .context import Context
from .errors import UserError
from .guardrails import Guardrail, GuardrailCheck, guardrails_of
from .output import OutputSpec, output_spec
from .providers.base import ModelSettings, Provider
from .providers.registry import get_provider
from .sessions.base import AsyncSession, Session, require_session
from .sessions.memory import InMemorySession
from .tools import Tool, tool, tools_by_name

__all__ = ["Agent", "Instructions", "MCPServer", "Middleware", "OutputT", "ToolMiddleware"]

OutputT = TypeVar("OutputT", default=str)
"""The type of a run's ``output``: ``str`` without an output schema, else the schema's type
(``Any`` for a JSON schema given as a dict)."""

Instructions: TypeAlias = "str | Callable[[Context], str | Awaitable[str]]"
"""An agent's system prompt, or a function of the run's context that returns it."""

Middleware: TypeAlias = Callable[..., Awaitable[Any]]
"""``async (ctx, request, call_next) -> ModelResponse``, wrapped around every model call."""

ToolMiddleware: TypeAlias = Callable[..., Awaitable[Any]]
"""``async (ctx, call, call_next) -> Message | str``, wrapped around every tool call: it may
change the call's arguments, what the tool returned, or refuse (return a string for the
model without calling ``call_next``, or raise ``ToolError``). See the "Tool middleware" section
of the tools page."""


class MCPServer(Protocol):
    """What ``Agent(mcp_servers=...)`` takes: a source of tools, such as
    :class:`aniki.mcp.MCPServerStdio` and :class:`aniki.mcp.MCPServerHTTP`."""

    @property
    def name(self) -> str:
        """The server's name, for errors and traces."""
        ...

    async def list_tools(self) -> Sequence[Tool]:
        """The tools the server offers now, each calling the server when invoked."""
        ...


class _Options(TypedDict, total=False):
    """The options every form of ``Agent(...)`` takes alike (see ``Agent.__init__``)."""

    provider: Provider | str
    session: Session | AsyncSession | None
    tools: Sequence[Tool | Callable[..., Any]]
    output_retries: int
    middleware: Sequence[Middleware]
    settings: ModelSettings | None
    mcp_servers: Sequence[MCPServer]
    handoffs: Sequence[Agent[Any]]
    description: str
    max_tool_output: int | None
    tool_middleware: Sequence[ToolMiddleware]
    input_guardrails: Sequence[Guardrail | GuardrailCheck]
    output_guardrails: Sequence[Guardrail | GuardrailCheck]


class Agent(Generic[OutputT]):
    """An LLM with instructions, tools and a conversation history.

    The agent's ``session`` is where its history lives: a fresh :class:`~aniki.InMemorySession`
    unless one is given. Pass ``session=`` to ``Runner.run`` to use one agent for many
    conversations.

    Example::

        from aniki import Agent, Runner
        from aniki.testing import MockProvider

        provider = MockProvider()
        provider.enqueue_response(content="Hello!")
        agent = Agent("Assistant", "You are helpful.", model="gpt-4o-mini", provider=provider)
        result = Runner().run_sync(agent, message="Hi")
        result.content  # "Hello!"
    """

    @overload
    def __init__(
        self: Agent[str],
        name: str,
        instructions: Instructions = "",
        *,
        model: str,
        output_schema: None = None,
        **options: Unpack[_Options],
    ) -> None: ...
    @overload
    def __init__(
        self: Agent[OutputT],
        name: str,
        instructions: Instructions = "",
        *,
        model: str,
        output_schema: type[OutputT],
        **options: Unpack[_Options],
    ) -> None: ...
    @overload
    def __init__(
        self: Agent[Any],
        name: str,
        instructions: Instructions = "",
        *,
        model: str,
        output_schema: dict[str, Any] | Any,
        **options: Unpack[_Options],
    ) -> None: ...
    def __init__(
        self,
        name: str,
        instructions: Instructions = "",
        *,
        model: str,
        provider: Provider | str = "openai",
        session: Session | AsyncSession | None = None,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        output_schema: Any = None,
        output_retries: int = 1,
        middleware: Sequence[Middleware] = (),
        settings: ModelSettings | None = None,
        mcp_servers: Sequence[MCPServer] = (),
        handoffs: Sequence[Agent[Any]] = (),
        description: str = "",
        max_tool_output: int | None = 100_000,
        tool_middleware: Sequence[ToolMiddleware] = (),
        input_guardrails: Sequence[Guardrail | GuardrailCheck] = (),
        output_guardrails: Sequence[Guardrail | GuardrailCheck] = (),
    ) -> None:
        """
        Args:
            name: the agent's name (in errors, traces and handoffs).
            instructions: the system prompt, or a function of the run's ``Context``
                returning it (it may be async).
            model: the model name the provider is asked for.
            provider: a ``Provider`` object or a registered name ("openai", "anthropic",
                "openai-responses", ...).
            session: where the history lives (a fresh ``InMemorySession`` by default).
            tools: ``@tool`` functions (plain functions are wrapped).
            output_schema: the type the final reply must be (a pydantic model, a dataclass,
                a TypedDict, ...) or a JSON schema dict; ``result.output`` is then that type.
            output_retries: how many times a final reply that does not fit
                ``output_schema`` is sent back to the model with the errors, before the run
                raises :class:`~aniki.OutputValidationError`.
            middleware: wrapped around every model call of the agent's runs.
            settings: sampling and request options for every call.
            mcp_servers: MCP servers whose tools the agent may call.
            handoffs: agents the model may pass the conversation to (each is offered as a
                ``transfer_to_<name>`` tool); the chosen one answers from then on, over the
                same session.
            description: what the agent does, for the model of another agent that hands
                off to it or calls it as a tool (default: the first line of its
                instructions, when they are a string).
            max_tool_output: the most characters of a tool's result the model is sent
                (every tool: local, MCP, another agent); a longer result is cut there,
                with a note saying how much was cut and to ask the tool for a smaller part.
                ``None``: no cap.
            tool_middleware: wrapped around every tool call of the agent's runs (local, MCP,
                another agent), inside the runner's; see :data:`ToolMiddleware`.
            input_guardrails: checks of the user's message, run beside the first model
                call; one that trips stops the run with :class:`~aniki.GuardrailTripped`
                (see :mod:`aniki.guardrails`).
            output_guardrails: checks of the final reply (its output), before it is stored.
        """
        check_identity(name, instructions, model, provider)
        self.name = name
        self.instructions = instructions
        self.model = model
        self.provider = provider
        self.session: Session | AsyncSession = (
            InMemorySession() if session is None else require_session(session)
        )
        self.tools: dict[str, Tool] = tools_by_name(tools)
        self.output_schema = output_schema
        self.output: OutputSpec | None = output_spec(output_schema)
        self.output_retries = checked_retries(output_retries)
        self.middleware: tuple[Middleware, ...] = tuple(middleware)
        self.settings: ModelSettings = settings if settings is not None else ModelSettings()
        self._resolved: Provider | None = provider if not isinstance(provider, str) else None
        self.handoffs: tuple[Agent[Any], ...] = _checked_handoffs(handoffs)
        self.description = described(description, instructions)
        self.mcp_servers: tuple[MCPServer, ...] = checked_servers(mcp_servers)
        self.max_tool_output = checked_cap(max_tool_output)
        self.tool_middleware: tuple[ToolMiddleware, ...] = checked_middleware(
            tool_middleware, "tool_middleware"
        )
        structured = self.output is not None
        self.input_guardrails = guardrails_of(
            input_guardrails, "input", agent=name, structured=structured
        )
        self.output_guardrails = guardrails_of(
            output_guardrails, "output", agent=name, structured=structured
        )

    async def gather_tools(self) -> dict[str, Tool]:
        """The tools a run offers the model, by name: the agent's own, then those of each of
        its MCP servers (a name given twice, or an MCP tool named as a handoff is, is refused
        with :class:`~aniki.UserError`)."""
        if not self.mcp_servers:
            return dict(self.tools)
        gathered = dict(self.tools)
        handoffs = {handoff_tool_name(target) for target in self.handoffs}
        for server in self.mcp_servers:
            for found in await server.list_tools():
                if found.name in gathered or found.name in handoffs:
                    other = ", the other a handoff" if found.name in handoffs else ""
                    raise UserError(
                        f"agent {self.name!r} has two tools named {found.name!r} (one from MCP "
                        f"server {server.name!r}){other}; rename one, or give the server a "
                        "tool_prefix"
                    )
                gathered[found.name] = found
        return gathered

    def as_tool(
        self,
        name: str | None = None,
        description: str | None = None,
        *,
        session: Session | AsyncSession | None = None,
        max_turns: int = 10,
    ) -> Tool:
        """This agent as a tool another agent's model can call with a request in words.

        Each call runs this agent on the request, in ``session`` (a fresh in-memory session
        per call when ``None``; a given one keeps the sub-agent's conversation across calls)
        and answers with its final reply (its structured output as JSON when it has an
        ``output_schema``). What its model calls cost is added to the calling run's usage. In
        a streamed run, its events are streamed too, after an :class:`~aniki.AgentUpdated`.

        Example::

            researcher = Agent("Researcher", "Find facts.", model="gpt-4o-mini")
            writer = Agent("Writer", "Write.", model="gpt-4o", tools=[researcher.as_tool()])
        """
        if session is not None:
            session = require_session(session)
        said = description if description is not None else _asked(self)
        made = tool(name=tool_name(self.name) if name is None else name, description=said)(_ask)
        shared = {spec.name: getattr(made, spec.name) for spec in dataclasses.fields(Tool)}
        agent_tool = AgentTool(**shared, agent=self, session=session, max_turns=max_turns)
        return agent_tool.called_by(None)

    def resolve_provider(self) -> Provider:
        """The provider object, built from the registry on first use when given by name."""
        if self._resolved is None:
            assert isinstance(self.provider, str)
            self._resolved = get_provider(self.provider)
        return self._resolved

    async def render_instructions(self, context: Context) -> str:
        """The system prompt for a run (calling ``instructions`` when it is a function)."""
        if isinstance(self.instructions, str):
            return self.instructions
        value = self.instructions(context)
        if inspect.isawaitable(value):
            value = await value
        if not isinstance(value, str):
            raise UserError(
                f"the instructions function of agent {self.name!r} returned "
                f"{type(value).__name__}; it must return a string"
            )
        return value

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, model={self.model!r}, tools={sorted(self.tools)!r})"


def _checked_handoffs(handoffs: Sequence[Agent[Any]]) -> tuple[Agent[Any], ...]:
    targets = tuple(handoffs)
    for target in targets:
        if not isinstance(target, Agent):
            raise UserError(f"handoffs takes Agents, got {type(target).__name__}")
    return targets


def tool_name(name: str) -> str:
    """An agent's ``name`` as a tool name: lower case, runs of other characters as ``_`` (64
    characters at most)."""
    text = re.sub(r"[^a-z0-9_-]+", "_", name.lower()).strip("_")
    return text[:64] or "agent"


def handoff_tool_name(target: Agent[Any]) -> str:
    """The name of the tool that hands a conversation to ``target``."""
    return f"transfer_to_{tool_name(target.name)}"


def _asked(agent: Agent[Any]) -> str:
    """The default description of ``agent`` as a tool."""
    what = agent.description.rstrip(".")
    return f"Ask {agent.name}" + (f": {what}" if what else "") + "."


async def _ask(request: str) -> Any:
    """Ask the agent.

    Args:
        request: What to ask or tell the agent, in words, with everything it needs.
    """
    # Only the source of an agent tool's schema: AgentTool.called_by gives the call itself.
    raise NotImplementedError


AgentToolRun: TypeAlias = Callable[["AgentTool", str, Any], Awaitable[Any]]
"""How a call of an agent tool runs: given the tool, the request, and the calling run (its
plan, or ``None`` outside any run), it returns the tool's answer."""

_ENGINE: list[AgentToolRun] = []


def run_agent_tools_with(run: AgentToolRun) -> None:
    """Make ``run`` how every agent tool's call runs. :mod:`aniki.runner` calls this when it
    loads, with :func:`aniki._run.agent_tools.ask`: the run engine sits above this module, so
    it hands its entry point down instead of being imported here."""
    _ENGINE[:] = [run]


@dataclass(frozen=True, slots=True)
class AgentTool(Tool):
    """What :meth:`Agent.as_tool` returns: a :class:`~aniki.Tool` whose call runs ``agent``
    on the request, as :meth:`Agent.as_tool` describes.

    A run offers it bound to itself (:meth:`called_by`), so the sub-run's usage and events
    reach the calling run.
    """

    agent: Agent[Any] = field(kw_only=True, repr=False)
    """The agent each call runs."""
    session: Session | AsyncSession | None = field(default=None, kw_only=True, repr=False)
    """Where the agent's runs keep their conversation (``None``: a fresh one per call)."""
    max_turns: int = field(default=10, kw_only=True)
    """The most model calls one call's run may make."""

    def called_by(self, run: object) -> AgentTool:
        """This tool as the run whose plan is ``run`` offers it (``None``: outside a run)."""

        async def ask(request: str) -> Any:
            assert _ENGINE, "aniki.runner hands the engine down when aniki is imported"
            return await _ENGINE[0](self, request, run)

        return dataclasses.replace(self, function=ask)
