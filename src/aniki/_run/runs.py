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

import asyncio
import logging
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from ..errors import UserError
from ..messages import Message
from ..result import RunResult
from ..sessions import _session_io as session_io
from . import approvals, guarding, observe, once, recovery
from .deadline import Deadline
from .handoffs import find_agent
from .journal import release
from .loop import execute, prepare, store, switch_agent
from .plan import Emit, Outcome, RunPlan
from .streaming import StreamedRun

__all__ = ["end", "journaled", "recover", "result", "resume", "run", "stream"]

logger = logging.getLogger("aniki")
T = TypeVar("T")


async def run(plan: RunPlan, user: Message, timeout: float | None) -> RunResult[Any]:
    """Run ``plan`` on the user message ``user`` until its agent answers in text, or stops
    for approval. A run a guardrail's check started is charged to the run it guards."""
    with guarding.apart() as enclosing:
        done = await _observed(plan, Deadline(timeout).bound(journaled(plan, _whole(plan, user))))
    if enclosing is not None:
        enclosing(done.usage)
    return done


async def journaled(plan: RunPlan, work: Awaitable[T], *, last: bool = True) -> T:
    """``work``, the run's journal entry ended with it: on success by the run itself, on a
    failure here (in the background, so the failure is raised at once), or, when the
    process dies first, by ``Runner.recover``. ``last``: the run ends with ``work``."""
    try:
        return await work
    except BaseException:
        if plan.journaled:
            ending = asyncio.ensure_future(once.finish(plan))
            ending.add_done_callback(_retrieve)
        release(plan.journal.token if plan.journal is not None else None)
        raise
    finally:
        if last:
            _ended(plan)


def _ended(plan: RunPlan) -> None:
    """What a run lets go of when it ends: its journal entry's hold in this process, and
    its reading context, whose functions hold the plan (so no cycle is left to the GC)."""
    release(plan.journal.token if plan.journal is not None else None)
    plan.reading = None


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.warning("could not mark a failed run ended: %s", task.exception())


async def resume(
    plan: RunPlan, approve: Sequence[str], deny: Sequence[str], timeout: float | None
) -> RunResult[Any]:
    """Decide the calls held in ``plan``'s session and let its agent go on."""
    return await _observed(
        plan, Deadline(timeout).bound(journaled(plan, _resumed(plan, approve, deny)))
    )


async def recover(plan: RunPlan, timeout: float | None) -> RunResult[Any] | None:
    """Finish the cut run ``plan.context.run_id`` (``None``: another worker took it first)."""
    found: RunResult[Any] | None = await Deadline(timeout).bound(journaled(plan, _recovered(plan)))
    return found


async def _recovered(plan: RunPlan) -> RunResult[Any] | None:
    entry = await recovery.take_cut(plan)
    if entry is None:
        return None
    held_by = str(entry.get("agent", ""))
    if held_by and held_by != plan.agent.name:
        target = find_agent(plan.agent, held_by)
        if target is None:
            raise UserError(
                f"run {plan.context.run_id!r} was cut while agent {held_by!r} answered; "
                f"recover it with that agent (or one that hands off to it), not "
                f"{plan.agent.name!r}"
            )
        await switch_agent(plan, target)
    outcome = await recovery.go_on(plan, entry)
    await end(plan, outcome)
    return await result(plan, outcome)


def stream(plan: RunPlan, user: Message, timeout: float | None) -> StreamedRun[Any]:
    """Run ``plan`` (a streaming one) on ``user``, its events sent as they happen."""
    first = Outcome()

    async def start() -> None:
        await prepare(plan)
        first.history = await store(plan, [user])

    async def produce(emit: Emit, started: Awaitable[None]) -> Outcome:
        plan.emit = emit
        await started
        return await journaled(plan, execute(plan, user, first), last=False)

    async def finish(outcome: Outcome) -> RunResult[Any]:
        async def stored() -> RunResult[Any]:
            if outcome.pending:
                outcome.history = await store(plan, outcome.pending)
            await end(plan, outcome)
            return await result(plan, outcome)

        return await journaled(plan, stored())

    def aborted() -> None:  # the run may have finished in the background: end its entry
        if plan.journaled:
            ending = asyncio.ensure_future(once.finish(plan))
            ending.add_done_callback(_retrieve)
        _ended(plan)

    observed = observe.observe_stream(plan)
    return StreamedRun(
        start, produce, finish, deadline=Deadline(timeout), observed=observed, aborted=aborted
    )


def _observed(plan: RunPlan, work: Awaitable[RunResult[Any]]) -> Awaitable[RunResult[Any]]:
    return work if observe.OBSERVER is None else observe.OBSERVER.run(plan, work)


async def _whole(plan: RunPlan, user: Message) -> RunResult[Any]:
    """A whole non-streamed run: store the user message, run the turns, take the snapshot."""
    await prepare(plan)
    stored = await store(plan, [user])
    outcome = await execute(plan, user, Outcome(history=stored))
    await end(plan, outcome)
    return await result(plan, outcome)


async def end(plan: RunPlan, outcome: Outcome) -> None:
    """Keep the turn the run stopped at for approval, or mark its journal entry ended."""
    if outcome.held is not None:
        await once.hold(plan, outcome.held)
    else:
        await once.finish(plan)


async def _resumed(plan: RunPlan, approve: Sequence[str], deny: Sequence[str]) -> RunResult[Any]:
    outcome = await approvals.resume(plan, approve, deny)
    await end(plan, outcome)
    return await result(plan, outcome)


async def result(plan: RunPlan, outcome: Outcome) -> RunResult[Any]:
    """The run's :class:`~aniki.RunResult`, with the session's history as it ends."""
    history = outcome.take_history()
    if history is None:
        history = await session_io.read(plan.session, plan.can)
    snapshot = tuple(history)
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
