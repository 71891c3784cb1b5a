"""``Runner``: runs an agent for one user message, with or without streaming.

The public face of the run engine (:mod:`aniki._run`): it checks what it is given, makes the
run's plan, and hands it to :mod:`aniki._run.runs`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from ._agent_checks import checked_middleware
from ._run import agent_tools, background, recovery, runs
from ._run.plan import RunPlan, check_max_turns, new_plan
from ._run.streaming import StreamedRun
from .agent import Agent, Middleware, OutputT, ToolMiddleware, run_agent_tools_with
from .context import Context
from .errors import UserError
from .messages import Message, MessageLike, to_message
from .providers.base import ModelSettings
from .result import RunResult
from .sessions.base import AsyncSession, Session

__all__ = ["Runner"]

# aniki.agent sits below the run engine and cannot import it: an agent tool's calls run on
# the engine through the function handed down here.
run_agent_tools_with(agent_tools.ask)


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
        tool_middleware: Sequence[ToolMiddleware] = (),
    ) -> None:
        """
        Args:
            max_turns: the most model calls one run may make.
            middleware: wrapped around every model call, outside the agent's own.
            stream_retries: how often ``stream`` retries a model stream that broke part-way
                (the consumer is sent ``StreamRestarted``); failures before a reply began are
                retried by the provider's client, not here.
            retry_backoff: seconds before the first stream retry; doubled for each further one.
            tool_middleware: wrapped around every tool call, outside the agent's own (see
                :data:`~aniki.ToolMiddleware`).
        """
        check_max_turns(max_turns)
        if not isinstance(stream_retries, int) or stream_retries < 0:
            raise UserError(f"stream_retries must be 0 or more, got {stream_retries!r}")
        self.max_turns = max_turns
        self.middleware: tuple[Middleware, ...] = tuple(middleware)
        self.tool_middleware: tuple[ToolMiddleware, ...] = checked_middleware(
            tool_middleware, "tool_middleware"
        )
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
        run_id: str | None = None,
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
            run_id: the run's id (``result.run_id``, ``ctx.run_id``); a fresh one when
                ``None``. A run is the unit that happens once: its tool calls are claimed
                and their results recorded in the session's store (its run journal) as
                they happen, so a second worker on the same run gets
                ``RunInProgressError`` and a run cut by a crash is finished by
                :meth:`recover` without running a recorded call again.
        """
        user = _user_message(message)
        plan = self._plan(agent, session, _with_run_id(context, run_id), settings, streaming=False)
        return await runs.run(plan, user, timeout)

    def run_sync(
        self,
        agent: Agent[OutputT],
        *,
        message: str | MessageLike,
        session: Session | AsyncSession | None = None,
        context: Context | Mapping[str, Any] | None = None,
        settings: ModelSettings | None = None,
        timeout: float | None = None,
        run_id: str | None = None,
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
        _refuse_in_a_loop("run")
        user = _user_message(message)
        plan = self._plan(agent, session, _with_run_id(context, run_id), settings, streaming=False)
        return background.run(runs.run(plan, user, timeout), timeout=timeout)

    def stream(
        self,
        agent: Agent[OutputT],
        *,
        message: str | MessageLike,
        session: Session | AsyncSession | None = None,
        context: Context | Mapping[str, Any] | None = None,
        settings: ModelSettings | None = None,
        timeout: float | None = None,
        run_id: str | None = None,
    ) -> StreamedRun[OutputT]:
        """Run ``agent`` on ``message``, yielding events as they happen (a :class:`StreamedRun`);
        ``run_id`` as in :meth:`run`."""
        user = _user_message(message)
        plan = self._plan(agent, session, _with_run_id(context, run_id), settings, streaming=True)
        return runs.stream(plan, user, timeout)

    async def resume(
        self,
        agent: Agent[OutputT],
        *,
        approve: Sequence[str] = (),
        deny: Sequence[str] = (),
        session: Session | AsyncSession | None = None,
        context: Context | Mapping[str, Any] | None = None,
        settings: ModelSettings | None = None,
        timeout: float | None = None,
    ) -> RunResult[OutputT]:
        """Continue a run that stopped for approval: decide each held tool call by its id.

        The approved calls run, each denied one is answered with a tool message saying so,
        the whole turn is stored at once, and the model goes on as in :meth:`run`. The held
        calls are read from the session's store, so this works in another process, after a
        restart, as long as ``agent`` has the same tools.

        Example::

            result = await runner.run(agent, message="Refund order 42", session=session)
            if result.pending_approvals:
                call = result.pending_approvals[0]  # e.g. refund(order_id="42")
                result = await runner.resume(agent, approve=[call.id], session=session)

        Raises:
            UserError: nothing awaits approval in the session, an id awaits nothing, or a
                held call is left undecided.
        """
        plan = self._plan(agent, session, context, settings, streaming=False)
        return await runs.resume(plan, approve, deny, timeout)

    def resume_sync(
        self,
        agent: Agent[OutputT],
        *,
        approve: Sequence[str] = (),
        deny: Sequence[str] = (),
        session: Session | AsyncSession | None = None,
        context: Context | Mapping[str, Any] | None = None,
        settings: ModelSettings | None = None,
        timeout: float | None = None,
    ) -> RunResult[OutputT]:
        """:meth:`resume` for synchronous code, on the same background loop as
        :meth:`run_sync`."""
        _refuse_in_a_loop("resume")
        plan = self._plan(agent, session, context, settings, streaming=False)
        return background.run(runs.resume(plan, approve, deny, timeout), timeout=timeout)

    async def recover(
        self,
        agent: Agent[OutputT],
        *,
        session: Session | AsyncSession | None = None,
        settings: ModelSettings | None = None,
        timeout: float | None = None,
    ) -> list[RunResult[OutputT]]:
        """Finish the runs of ``session`` that a crash cut short; their results, oldest first
        (empty when there are none).

        A run is cut when the process holding it died (seen at once on the same machine,
        and from another one when its claim's lease has run out) before it ended. Each is
        finished by the rules of its journal: a tool call with a recorded result is not run
        again; one that was claimed but has no result may have run, so it runs again only
        if its tool is ``idempotent`` and is otherwise answered with a message telling the
        model its outcome is unknown; then the model goes on. Runs held for approval wait
        for :meth:`resume`. Call it when a worker starts (see docs/durable.md); two workers
        recovering at once each finish different runs. ``timeout`` bounds each run.
        """
        results: list[RunResult[OutputT]] = []
        base = agent.session if session is None else session
        for run_id in await recovery.cut_runs(base):
            plan = self._plan(agent, session, Context(run_id=run_id), settings, streaming=False)
            done = await runs.recover(plan, timeout)
            if done is not None:
                results.append(done)
        return results

    def recover_sync(
        self,
        agent: Agent[OutputT],
        *,
        session: Session | AsyncSession | None = None,
        settings: ModelSettings | None = None,
        timeout: float | None = None,
    ) -> list[RunResult[OutputT]]:
        """:meth:`recover` for synchronous code, on the same background loop as
        :meth:`run_sync`."""
        _refuse_in_a_loop("recover")
        return background.run(
            self.recover(agent, session=session, settings=settings, timeout=timeout),
            timeout=None,
        )

    def _plan(
        self,
        agent: Agent[Any],
        session: Session | AsyncSession | None,
        context: Context | Mapping[str, Any] | None,
        settings: ModelSettings | None,
        *,
        streaming: bool,
    ) -> RunPlan:
        return new_plan(
            agent,
            session,
            context,
            settings,
            streaming=streaming,
            max_turns=self.max_turns,
            middleware=self.middleware,
            tool_middleware=self.tool_middleware,
            stream_retries=self.stream_retries,
            retry_backoff=self.retry_backoff,
        )


def _with_run_id(
    context: Context | Mapping[str, Any] | None, run_id: str | None
) -> Context | Mapping[str, Any] | None:
    """The run's context, carrying ``run_id`` when one is given."""
    if run_id is None:
        return context
    if not isinstance(run_id, str) or not run_id or len(run_id) > 200:
        raise UserError(
            f"run_id must be a non-empty string of at most 200 characters, got {run_id!r}"
        )
    if isinstance(context, Context):
        if context.run_id != run_id:
            raise UserError(
                f"run_id={run_id!r} differs from the given context's run_id "
                f"{context.run_id!r}: pass one of them"
            )
        return context
    return Context(context, run_id=run_id)


def _refuse_in_a_loop(method: str) -> None:
    """``UserError`` when ``{method}_sync`` is called from a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise UserError(
        f"{method}_sync() cannot be called from a running event loop; "
        f"use await runner.{method}(...)"
    )


def _user_message(message: str | MessageLike) -> Message:
    if isinstance(message, str):
        return Message(role="user", content=message)
    user = to_message(message)
    if user.role != "user":
        raise UserError(f"message= must be a user message, got role {user.role!r}")
    return user
