"""``Runner``: runs an agent for one user message, with or without streaming."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from ._run import session_io
from ._run.loop import Outcome, RunPlan, execute
from ._run.streaming import StreamedRun
from .agent import Agent, Middleware
from .context import Context
from .errors import UserError
from .messages import Message, MessageLike, to_message
from .providers.base import ModelSettings, merge_settings
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

    def __init__(self, *, max_turns: int = 10, middleware: Sequence[Middleware] = ()) -> None:
        if not isinstance(max_turns, int) or max_turns < 1:
            raise UserError(f"max_turns must be a whole number of at least 1, got {max_turns!r}")
        self.max_turns = max_turns
        self.middleware: tuple[Middleware, ...] = tuple(middleware)

    async def run(
        self,
        agent: Agent,
        *,
        message: str | MessageLike,
        session: Session | AsyncSession | None = None,
        context: Context | Mapping[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> RunResult:
        """Run ``agent`` on ``message`` until it answers in text; return the result.

        Args:
            agent: the agent to run.
            message: the user's message (text, or a user ``Message``).
            session: the history to use instead of ``agent.session`` for this run.
            context: a :class:`~aniki.Context`, or initial values for a fresh one.
            settings: model settings for this run, over the agent's.
        """
        plan, user = self._plan(agent, message, session, context, settings, streaming=False)
        await session_io.append(plan.session, [user])
        outcome = await execute(plan, user, Outcome())
        return await _result(plan, outcome)

    def run_sync(
        self,
        agent: Agent,
        *,
        message: str | MessageLike,
        session: Session | AsyncSession | None = None,
        context: Context | Mapping[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> RunResult:
        """:meth:`run` for synchronous code (it runs its own event loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise UserError(
                "run_sync() cannot be called from a running event loop; use await runner.run(...)"
            )
        return asyncio.run(
            self.run(agent, message=message, session=session, context=context, settings=settings)
        )

    def stream(
        self,
        agent: Agent,
        *,
        message: str | MessageLike,
        session: Session | AsyncSession | None = None,
        context: Context | Mapping[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> StreamedRun:
        """Run ``agent`` on ``message``, yielding events as they happen (a :class:`StreamedRun`)."""
        plan, user = self._plan(agent, message, session, context, settings, streaming=True)

        async def start() -> None:
            await session_io.append(plan.session, [user])

        async def produce(emit: Any) -> Outcome:
            plan.emit = emit
            return await execute(plan, user, Outcome())

        async def finish(outcome: Outcome) -> RunResult:
            await session_io.append(plan.session, outcome.pending)
            return await _result(plan, outcome)

        return StreamedRun(start, produce, finish)

    def _plan(
        self,
        agent: Agent,
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
            provider=agent.resolve_provider(),
            max_turns=self.max_turns,
            middleware=self.middleware + agent.middleware,
            settings=merge_settings(agent.settings, settings),
            streaming=streaming,
        )
        return plan, user


def _user_message(message: str | MessageLike) -> Message:
    if isinstance(message, str):
        return Message(role="user", content=message)
    user = to_message(message)
    if user.role != "user":
        raise UserError(f"message= must be a user message, got role {user.role!r}")
    return user


async def _result(plan: RunPlan, outcome: Outcome) -> RunResult:
    snapshot = tuple(await session_io.read(plan.session))
    return RunResult(
        messages=snapshot,
        new_messages=tuple(outcome.new_messages),
        content=outcome.content,
        output=outcome.output,
        usage=outcome.usage,
        run_id=plan.context.run_id,
        context=plan.context,
    )
