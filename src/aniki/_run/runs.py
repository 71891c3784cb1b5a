"""A whole run, as ``Runner`` and an agent called as a tool start one: the user message
stored, the turns run (:mod:`aniki._run.loop`), a turn held for approval kept, the result
made. Each run is bounded by its :class:`~aniki._run.deadline.Deadline` and seen by the
observer, if any (:mod:`aniki._run.observe`).

* :func:`run` stores the user message at once and each turn as it completes;
* :func:`stream` stores the user message at once and everything else only when the consumer
  reaches ``RunCompleted`` (see :class:`~aniki._run.streaming.StreamedRun`);
* :func:`resume` goes on from a turn held for approval (:func:`aniki._run.approvals.resume`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any

from ..messages import Message
from ..result import RunResult
from ..sessions import _session_io as session_io
from . import approvals, observe
from .deadline import Deadline
from .loop import execute, prepare, store
from .plan import Emit, Outcome, RunPlan
from .streaming import StreamedRun

__all__ = ["result", "resume", "run", "stream"]


async def run(plan: RunPlan, user: Message, timeout: float | None) -> RunResult[Any]:
    """Run ``plan`` on the user message ``user`` until its agent answers in text, or stops
    for approval."""
    return await _observed(plan, Deadline(timeout).bound(_whole(plan, user)))


async def resume(
    plan: RunPlan, approve: Sequence[str], deny: Sequence[str], timeout: float | None
) -> RunResult[Any]:
    """Decide the calls held in ``plan``'s session and let its agent go on."""
    return await _observed(plan, Deadline(timeout).bound(_resumed(plan, approve, deny)))


def stream(plan: RunPlan, user: Message, timeout: float | None) -> StreamedRun[Any]:
    """Run ``plan`` (a streaming one) on ``user``, its events sent as they happen."""
    first = Outcome()

    async def start() -> None:
        await prepare(plan)
        first.history = await store(plan, [user])

    async def produce(emit: Emit, started: Awaitable[None]) -> Outcome:
        plan.emit = emit
        await started
        return await execute(plan, user, first)

    async def finish(outcome: Outcome) -> RunResult[Any]:
        if outcome.pending:
            outcome.history = await store(plan, outcome.pending)
        await approvals.keep_held(plan, outcome)
        return await result(plan, outcome)

    observed = observe.observe_stream(plan)
    return StreamedRun(start, produce, finish, deadline=Deadline(timeout), observed=observed)


def _observed(plan: RunPlan, work: Awaitable[RunResult[Any]]) -> Awaitable[RunResult[Any]]:
    return work if observe.OBSERVER is None else observe.OBSERVER.run(plan, work)


async def _whole(plan: RunPlan, user: Message) -> RunResult[Any]:
    """A whole non-streamed run: store the user message, run the turns, take the snapshot."""
    await prepare(plan)
    stored = await store(plan, [user])
    outcome = await execute(plan, user, Outcome(history=stored))
    await approvals.keep_held(plan, outcome)
    return await result(plan, outcome)


async def _resumed(plan: RunPlan, approve: Sequence[str], deny: Sequence[str]) -> RunResult[Any]:
    return await result(plan, await approvals.resume(plan, approve, deny))


async def result(plan: RunPlan, outcome: Outcome) -> RunResult[Any]:
    """The run's :class:`~aniki.RunResult`, with the session's history as it ends."""
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
