"""``Runner``: runs an agent for one user message, with or without streaming."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from ._run import background, observe, session_io
from ._run.deadline import Deadline
from ._run.loop import (
    Outcome,
    RunPlan,
    commit,
    execute,
    prepare,
    run_tools,
    run_turns,
    switch_agent,
)
from ._run.streaming import StreamedRun
from ._run.subagents import find_agent
from .agent import Agent, Middleware, OutputT
from .context import Context
from .errors import UserError
from .messages import Message, MessageLike, to_message
from .providers.base import ModelSettings, Provider, merge_settings
from .result import RunResult
from .sessions.base import AsyncSession, Session, require_session

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
        user = _user_message(message)
        plan = self._plan(agent, session, context, settings, streaming=False)
        run = Deadline(timeout).bound(_run(plan, user))
        return await (run if observe.OBSERVER is None else observe.OBSERVER.run(plan, run))

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
        _refuse_in_a_loop("run")
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
        user = _user_message(message)
        plan = self._plan(agent, session, context, settings, streaming=True)

        first = Outcome()

        async def start() -> None:
            await prepare(plan)
            first.history = await session_io.append_then_read(
                plan.session, [user], guard=plan.guard
            )

        async def produce(emit: Any, started: Awaitable[None]) -> Outcome:
            plan.emit = emit
            await started
            return await execute(plan, user, first)

        async def finish(outcome: Outcome) -> RunResult[OutputT]:
            if outcome.pending:
                outcome.history = await session_io.append_then_read(
                    plan.session, outcome.pending, guard=plan.guard
                )
            if outcome.held is not None:
                from ._run import approvals

                await approvals.hold(plan.session, outcome.held)
            return await _result(plan, outcome)

        observed = observe.observe_stream(plan)
        return StreamedRun(start, produce, finish, deadline=Deadline(timeout), observed=observed)

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
        run = Deadline(timeout).bound(_resume(plan, approve, deny))
        return await (run if observe.OBSERVER is None else observe.OBSERVER.run(plan, run))

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
        work = self.resume(
            agent,
            approve=approve,
            deny=deny,
            session=session,
            context=context,
            settings=settings,
            timeout=timeout,
        )
        return background.run(work, timeout=timeout)

    def _plan(
        self,
        agent: Agent[Any],
        session: Session | AsyncSession | None,
        context: Context | Mapping[str, Any] | None,
        settings: ModelSettings | None,
        *,
        streaming: bool,
    ) -> RunPlan:
        if not isinstance(agent, Agent):
            raise UserError(f"Runner needs an Agent, got {type(agent).__name__}")
        if context is None or isinstance(context, Mapping):
            context = Context(context)
        elif not isinstance(context, Context):
            raise UserError(f"context must be a Context or a mapping, got {type(context).__name__}")
        plan = RunPlan(
            agent=agent,
            session=agent.session if session is None else require_session(session),
            context=context,
            provider=_built_provider(agent),
            max_turns=self.max_turns,
            middleware=self.middleware + agent.middleware,
            settings=merge_settings(agent.settings, settings),
            runner_middleware=self.middleware,
            run_settings=settings,
            streaming=streaming,
            stream_retries=self.stream_retries,
            retry_backoff=self.retry_backoff,
        )
        return plan


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
    stored = await session_io.append_then_read(plan.session, [user], guard=plan.guard)
    outcome = Outcome(history=stored)
    outcome = await execute(plan, user, outcome)
    return await _result(plan, outcome)


async def _resume(plan: RunPlan, approve: Sequence[str], deny: Sequence[str]) -> RunResult[Any]:
    """Decide the held calls, store their turn, and let the model go on."""
    await prepare(plan)
    session_id = str(plan.session.id)
    from ._run import approvals  # only a resume needs it

    turn = await approvals.load(plan.session)
    if turn is None:
        raise UserError(f"no tool call awaits approval in session {session_id!r}")
    if turn.agent != plan.agent.name:
        held_by = find_agent(plan.agent, turn.agent)  # handed off to during the run
        if held_by is None:
            raise UserError(
                f"the calls held in session {session_id!r} were asked for by agent "
                f"{turn.agent!r}; resume with that agent (or one that hands off to it), not "
                f"{plan.agent.name!r}"
            )
        await switch_agent(plan, held_by)
    decided = approvals.decisions(turn, approve, deny, session_id)
    undecided = [call.id for call in turn.awaiting if call.id not in decided]
    if undecided:
        raise UserError(
            f"decide every held call: {undecided} is neither approved nor denied "
            "(pass its id in approve= or deny=)"
        )
    outcome = Outcome()
    stored = await session_io.read(plan.session)
    asked = {call.id for call in turn.assistant.tool_calls}
    if not any(
        message.role == "assistant" and {c.id for c in message.tool_calls} == asked
        for message in stored[-len(asked) - 1 :]
    ):  # not stored yet (a crash after storing it only leaves the record to drop)
        approved = [call for call in turn.awaiting if decided[call.id]]
        answers = {m.tool_call_id: m for m in (*turn.results, *await run_tools(plan, approved))}
        answers.update(
            {c.id: approvals.denied_message(c) for c in turn.awaiting if not decided[c.id]}
        )
        results = [answers[call.id] for call in turn.assistant.tool_calls]
        await commit(plan, outcome, [turn.assistant, *results])
    await approvals.drop(plan.session)
    outcome = await run_turns(plan, outcome)
    return await _result(plan, outcome)


async def _result(plan: RunPlan, outcome: Outcome) -> RunResult[Any]:
    history = outcome.take_history()
    snapshot = tuple(history if history is not None else await session_io.read(plan.session))
    return RunResult(
        messages=snapshot,
        new_messages=tuple(outcome.new_messages),
        content=outcome.content,
        output=outcome.output,
        usage=outcome.usage + plan.sub_usage,
        run_id=plan.context.run_id,
        context=plan.context,
        context_reports=tuple(outcome.reports.reports) if outcome.reports else (),
        pending_approvals=outcome.held.awaiting if outcome.held is not None else (),
        last_agent=plan.agent.name,
    )
