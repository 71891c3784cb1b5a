"""A run's data: :class:`RunPlan`, what it needs, fixed before its first turn; :class:`Outcome`,
what it produced; :class:`HeldTurn`, a turn it stopped before a call that needs approval.

Every module of the run engine speaks these types; this one runs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..agent import Agent, Middleware, ToolMiddleware
from ..context import Context
from ..errors import UserError
from ..events import StreamEvent
from ..messages import Message, ToolCall
from ..providers.base import ModelSettings, Provider, merge_settings
from ..sessions._capabilities import Capabilities, capabilities_of
from ..sessions._guard import TurnGuard
from ..sessions.base import AsyncSession, Session, require_session
from ..usage import Usage

if TYPE_CHECKING:
    from ..sessions._reading import ReadingRun
    from ..tools import Tool
    from .journal import Journal
    from .reports import ReportBuilder

__all__ = ["Emit", "HeldTurn", "Outcome", "RunPlan", "check_max_turns", "new_plan"]

Emit = Callable[[StreamEvent], None]
"""Where a streamed run sends its events."""


@dataclass(slots=True)
class RunPlan:
    """Everything one run needs, fixed before its first turn."""

    agent: Agent[Any]
    session: Any
    can: Capabilities
    """What ``session`` can do, found once for the run (each turn asks several times)."""
    context: Context
    provider: Provider | None
    """``None`` until :func:`~aniki._run.loop.prepare` has built the agent's provider from
    its name."""
    max_turns: int
    middleware: tuple[Middleware, ...]
    settings: ModelSettings
    streaming: bool
    stream_retries: int = 2
    retry_backoff: float = 0.5
    emit: Emit | None = None
    tools: dict[str, Tool] = field(default_factory=dict)
    """The tools the model may call in this run: the agent's own, and those its MCP servers
    offer (gathered by :func:`~aniki._run.loop.prepare`)."""
    handoffs: dict[str, Agent[Any]] = field(default_factory=dict)
    """The agents the model may hand off to, by the name of the tool that does it."""
    runner_middleware: tuple[Middleware, ...] = ()
    """The runner's own middleware (``middleware`` adds the current agent's)."""
    tool_middleware: tuple[ToolMiddleware, ...] = ()
    """Wrapped around each tool call: the runner's, then the current agent's."""
    runner_tool_middleware: tuple[ToolMiddleware, ...] = ()
    """The runner's own tool middleware."""
    run_settings: ModelSettings | None = None
    """The run's own settings (``settings`` merges them over the current agent's)."""
    sub_usage: Usage = field(default_factory=Usage)
    """What agents called as tools during the run cost."""
    guard: TurnGuard = field(default_factory=TurnGuard)
    """Refuses the run's answers once its question was undone (:mod:`aniki.sessions._guard`)."""
    journal: Journal | None = None
    """The run's journal in its session's store (:mod:`aniki._run.once`), once made."""
    unjournaled: bool = False
    """Whether the run keeps no journal (its store keeps no derived state)."""
    journaled: bool = False
    """Whether the run has an entry in the journal that it holds."""
    reading: ReadingRun | None = None
    """The run as its session's reads see it, kept while its agent, provider and settings
    stay the same (:func:`~aniki._run.heads.reading_run`)."""
    recorded: dict[str, dict[str, Any]] = field(default_factory=dict)
    """By call id: what the journal recorded of calls a recovered or resumed run finds
    claimed (``{"result": ...}`` when it returned)."""


@dataclass(frozen=True, slots=True)
class HeldTurn:
    """A turn stopped for approval (kept in the store by :mod:`aniki._run.approvals`)."""

    agent: str
    """The name of the agent whose model asked for the calls."""
    assistant: Message
    """The assistant message with the tool calls."""
    results: tuple[Message, ...]
    """The tool messages of the calls that needed no approval, already run."""
    awaiting: tuple[ToolCall, ...]
    """The calls that wait for a decision, in the order the model gave them."""


@dataclass(slots=True)
class Outcome:
    """What a run produced; ``pending`` holds what a stream has not committed yet."""

    content: str = ""
    output: Any = None
    usage: Usage = field(default_factory=Usage)
    new_messages: list[Message] = field(default_factory=list)
    pending: list[Message] = field(default_factory=list)
    history: Sequence[Message] | None = None
    """The session's history as the last write returned it, for the next read (used once)."""
    reports: ReportBuilder | None = None
    """The run's context reports, one per model call."""
    held: HeldTurn | None = None
    """A turn stopped before a tool call that needs approval (the run ends there)."""
    corrections: list[Message] = field(default_factory=list)
    """A reply that did not fit the output schema and the note saying why: sent after the
    history in the next request only, never stored."""

    def take_history(self) -> Sequence[Message] | None:
        """:attr:`history`, which is then forgotten: a later read must ask the store again."""
        history, self.history = self.history, None
        return history


def new_plan(
    agent: Agent[Any],
    session: Session | AsyncSession | None,
    context: Context | Mapping[str, Any] | None,
    settings: ModelSettings | None,
    *,
    streaming: bool,
    max_turns: int,
    middleware: tuple[Middleware, ...] = (),
    tool_middleware: tuple[ToolMiddleware, ...] = (),
    stream_retries: int = 2,
    retry_backoff: float = 0.5,
) -> RunPlan:
    """The plan of one run of ``agent``, with a runner's options (``middleware`` and
    ``tool_middleware`` are the runner's own, outside the agent's); ``UserError`` for an
    argument of the wrong kind."""
    if not isinstance(agent, Agent):
        raise UserError(f"Runner needs an Agent, got {type(agent).__name__}")
    if context is None or isinstance(context, Mapping):
        context = Context(context)
    elif not isinstance(context, Context):
        raise UserError(f"context must be a Context or a mapping, got {type(context).__name__}")
    store = agent.session if session is None else require_session(session)
    return RunPlan(
        agent=agent,
        session=store,
        can=capabilities_of(store),
        context=context,
        provider=_built_provider(agent),
        max_turns=max_turns,
        middleware=middleware + agent.middleware,
        settings=merge_settings(agent.settings, settings),
        runner_middleware=middleware,
        tool_middleware=tool_middleware + agent.tool_middleware,
        runner_tool_middleware=tool_middleware,
        run_settings=settings,
        streaming=streaming,
        stream_retries=stream_retries,
        retry_backoff=retry_backoff,
    )


def check_max_turns(max_turns: object) -> int:
    """``max_turns`` when it is a whole number of at least 1, else ``UserError``."""
    if not isinstance(max_turns, int) or max_turns < 1:
        raise UserError(f"max_turns must be a whole number of at least 1, got {max_turns!r}")
    return max_turns


def _built_provider(agent: Agent[Any]) -> Provider | None:
    """The agent's provider, or ``None`` when it is named by a string and not built yet: the
    run builds it then, off the event loop (see :func:`~aniki._run.loop.prepare`)."""
    if isinstance(agent.provider, str):
        built: Provider | None = agent._resolved  # the Agent's own cache of the built one
        return built
    return agent.provider
