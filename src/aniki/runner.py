"""``Runner``: runs an agent for one user message, with or without streaming."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from ._run import background, session_io
from ._run.deadline import Deadline
from ._run.loop import Outcome, RunPlan, execute, prepare
from ._run.streaming import StreamedRun
from .agent import Agent, Middleware, OutputT
from .context import Context
from .errors import UserError
from .messages import Message, MessageLike, to_message
from .providers.base import ModelSettings, Provider, merge_settings
from .result import RunResult
from .sessions.base import AsyncSession, Session

__all__ = ["Runner"]


class Runner:
    """Runs agents: sends the instructions plus the whole history, runs tools, stores replies.

    Persistence follows two rules. ``run`` stores the user message at once and each turn as
    it completes, so a run that raises keeps every completed turn. ``stream`` stores the user
    message at once and everything else only when the stream completes successfully.

    Example::

        runner = Runner(max_turns=5)
        result = await runner.run(agent, message="What's my name?")
        result = runner.run_sync(agent, message="What's my name?")
        async for event in runner.stream(agent, message="Tell me more"):
            ...
    """

    def __init__(
        self,
        *,
        max_turns: int = 10,
        middleware: Sequence[Middleware] = (),
        stream_retries: int = 2,
        retry_backoff: float = 0.5,
    ) -> None:
        """
        Args:
            max_turns: the most model calls one run may make.
            middleware: wrapped around every model call, outside the agent's own.
            stream_retries: how often ``stream`` retries a model stream that broke part-way
                (the consumer is sent ``StreamRestarted``); failures before a reply began are
                retried by the provider's client, not here.
            retry_backoff: seconds before the first stream retry; doubled for each further one.
        """
        if not isinstance(max_turns, int) or max_turns < 1:
            raise UserError(f"max_turns must be a whole number of at least 1, got {max_turns!r}")
        if not isinstance(stream_retries, int) or stream_retries < 0:
            raise UserError(f"stream_retries must be 0 or more, got {stream_retries!r}")
        self.max_turns = max_turns
        self.middleware: tuple[Middleware, ...] = tuple(middleware)
        self.stream_retries = stream_retries
        self.retry_backoff = retry_backoff

    async def run(
        self,
        agent: Agent[OutputT],
        *,
        message: str | MessageLike,
        session: Session | AsyncSession | None = None,
        context: Context | Mapping[str, Any] | None = None,
        settings: ModelSettings | None = None,
        timeout: float | None = None,
    ) -> RunResult[OutputT]:
        """Run ``agent`` on ``message`` until it answers in text; return the result.

        Args:
            agent: the agent to run.
            message: the user's message (text, or a user ``Message``).
            session: the history to use instead of ``agent.session`` for this run.
            context: a :class:`~aniki.Context`, or initial values for a fresh one.
            settings: model settings for this run, over the agent's.
            timeout: seconds the whole run may take, reading and writing the session
                included (``RunTimeoutError`` after that). A store write already under way
                then is not interrupted: it completes, whole, in the background.
        """
        plan, user = self._plan(agent, message, session, context, settings, streaming=False)
        return await Deadline(timeout).bound(_run(plan, user))

    def run_sync(
        self,
        agent: Agent[OutputT],
        *,
        message: str | MessageLike,
        session: Session | AsyncSession | None = None,
        context: Context | Mapping[str, Any] | None = None,
        settings: ModelSettings | None = None,
        timeout: float | None = None,
    ) -> RunResult[OutputT]:
        """:meth:`run` for synchronous code, such as a web framework's synchronous view.

        The run happens on an event loop that aniki keeps in a background thread, shared by
        every ``run_sync`` call of the process (from any thread, concurrently): a provider's
        HTTP client and its connections are made once and reused by the calls that follow.
        The calling thread waits; its context variables are seen by the run, and by its
        tools and middleware. ``timeout`` bounds the wait even when the loop is held up by
        code that blocks it. Raises ``UserError`` when called from a running event loop
        (``await runner.run(...)`` there). A forked child makes a loop of its own.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise UserError(
                "run_sync() cannot be called from a running event loop; use await runner.run(...)"
            )
        work = self.run(
            agent,
            message=message,
            session=session,
            context=context,
            settings=settings,
            timeout=timeout,
        )
        return background.run(work, timeout=timeout)

    def stream(
        self,
        agent: Agent[OutputT],
        *,
        message: str | MessageLike,
        session: Session | AsyncSession | None = None,
        context: Context | Mapping[str, Any] | None = None,
        settings: ModelSettings | None = None,
        timeout: float | None = None,
    ) -> StreamedRun[OutputT]:
        """Run ``agent`` on ``message``, yielding events as they happen (a :class:`StreamedRun`)."""
        plan, user = self._plan(agent, message, session, context, settings, streaming=True)

        first = Outcome()

        async def start() -> None:
            await prepare(plan)
            first.history = await session_io.append_then_read(plan.session, [user])

        async def produce(emit: Any, started: Awaitable[None]) -> Outcome:
            plan.emit = emit
            await started
            return await execute(plan, user, first)

        async def finish(outcome: Outcome) -> RunResult[OutputT]:
            if outcome.pending:
                outcome.history = await session_io.append_then_read(plan.session, outcome.pending)
            return await _result(plan, outcome)

        return StreamedRun(start, produce, finish, deadline=Deadline(timeout))

    def _plan(
        self,
        agent: Agent[Any],
        message: str | MessageLike,
        session: Session | AsyncSession | None,
        context: Context | Mapping[str, Any] | None,
        settings: ModelSettings | None,
        *,
        streaming: bool,
    ) -> tuple[RunPlan, Message]:
        if not isinstance(agent, Agent):
            raise UserError(f"Runner needs an Agent, got {type(agent).__name__}")
        user = _user_message(message)
        if context is None or isinstance(context, Mapping):
            context = Context(context)
        elif not isinstance(context, Context):
            raise UserError(f"context must be a Context or a mapping, got {type(context).__name__}")
        plan = RunPlan(
            agent=agent,
            session=session if session is not None else agent.session,
            context=context,
            provider=_built_provider(agent),
            max_turns=self.max_turns,
            middleware=self.middleware + agent.middleware,
            settings=merge_settings(agent.settings, settings),
            streaming=streaming,
            stream_retries=self.stream_retries,
            retry_backoff=self.retry_backoff,
        )
        return plan, user


def _user_message(message: str | MessageLike) -> Message:
    if isinstance(message, str):
        return Message(role="user", content=message)
    user = to_message(message)
    if user.role != "user":
        raise UserError(f"message= must be a user message, got role {user.role!r}")
    return user


def _built_provider(agent: Agent[Any]) -> Provider | None:
    """The agent's provider, or ``None`` when it is named by a string and not built yet: the
    run builds it then, off the event loop (see :func:`~aniki._run.loop.prepare`)."""
    if isinstance(agent.provider, str):
        built: Provider | None = agent._resolved  # the Agent's own cache of the built one
        return built
    return agent.provider


async def _run(plan: RunPlan, user: Message) -> RunResult[Any]:
    """A whole non-streamed run: store the user message, run the turns, take the snapshot."""
    await prepare(plan)
    outcome = Outcome(history=await session_io.append_then_read(plan.session, [user]))
    outcome = await execute(plan, user, outcome)
    return await _result(plan, outcome)


async def _result(plan: RunPlan, outcome: Outcome) -> RunResult[Any]:
    history = outcome.take_history()
    snapshot = tuple(history if history is not None else await session_io.read(plan.session))
    return RunResult(
        messages=snapshot,
        new_messages=tuple(outcome.new_messages),
        content=outcome.content,
        output=outcome.output,
        usage=outcome.usage,
        run_id=plan.context.run_id,
        context=plan.context,
        context_reports=tuple(outcome.reports.reports) if outcome.reports else (),
    )
