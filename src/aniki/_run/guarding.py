"""The agent's guardrails in a run (:mod:`aniki.guardrails`): input guardrails beside the
run's first model call (:func:`first_turn`), output guardrails before the reply is stored
(:func:`checked_reply`).

The checks of one stage run concurrently, and the first to trip decides: the others are
cancelled. What a run started inside an async check costs (``Runner.run``: a check that asks
another agent) is added to the guarded run's usage (:func:`apart`).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from .._threads import TOOLS
from ..errors import GuardrailTripped, UserError
from ..events import StreamRestarted, TextDelta
from ..guardrails import Guardrail, GuardrailStage
from ..messages import Message
from ..usage import Usage
from . import observe
from .plan import Outcome, RunPlan

__all__ = ["apart", "checked_reply", "first_turn"]

logger = logging.getLogger("aniki")
T = TypeVar("T")

Charge = Callable[[Usage], None]

_ENCLOSING: ContextVar[Charge | None] = ContextVar("aniki_guarded_run", default=None)
"""Inside a guardrail's check: adds a usage to the run it guards."""


async def first_turn(plan: RunPlan, user: Message, turn: Awaitable[T]) -> T:
    """``turn`` (the run's first model call) with the agent's input guardrails run beside
    it: its result once every check has passed; :class:`~aniki.GuardrailTripped` as soon as
    one trips (the model call is then cancelled, or its reply dropped)."""
    guards = plan.agent.input_guardrails
    if not guards:
        return await turn
    checks = asyncio.ensure_future(_all_pass(plan, guards, "input", user, user))
    model = asyncio.ensure_future(turn)
    try:
        await asyncio.wait((checks, model), return_when=asyncio.FIRST_COMPLETED)
        await checks  # the model may have answered first: its reply waits for the checks
        return await model
    finally:
        await _stopped(checks, model)


async def checked_reply(plan: RunPlan, outcome: Outcome, assistant: Message) -> Message:
    """The reply to store: ``assistant`` when every output guardrail of the answering agent
    passes; else the replacement of the guardrail that tripped, when it has one; else
    :class:`~aniki.GuardrailTripped`."""
    guards = plan.agent.output_guardrails
    if not guards:
        return assistant
    try:
        await _all_pass(plan, guards, "output", outcome.output, assistant)
    except _Tripped as tripped:
        guard, reason = tripped.guardrail, tripped.reason
        if guard.replacement is None:
            raise GuardrailTripped(guard.name, "output", reason, assistant) from None
        logger.warning(
            "output guardrail %r replaced the reply of agent %r: %s",
            guard.name,
            plan.agent.name,
            reason,
        )
        return _replaced(plan, outcome, assistant, guard, reason)
    return assistant


def _replaced(
    plan: RunPlan, outcome: Outcome, assistant: Message, guard: Guardrail, reason: str
) -> Message:
    assert guard.replacement is not None
    outcome.content = outcome.output = guard.replacement
    if plan.emit is not None:  # the reply streamed so far is void; the replacement stands
        plan.emit(StreamRestarted(f"output guardrail {guard.name!r} replaced the reply: {reason}"))
        plan.emit(TextDelta(guard.replacement))
    reply = Message("assistant", guard.replacement, model=assistant.model, usage=assistant.usage)
    return reply if assistant.context is None else reply._reported(assistant.context)


class _Tripped(Exception):
    def __init__(self, guardrail: Guardrail, reason: str) -> None:
        self.guardrail = guardrail
        self.reason = reason


async def _all_pass(
    plan: RunPlan,
    guards: Sequence[Guardrail],
    stage: GuardrailStage,
    checked: Any,
    message: Message,
) -> None:
    """Run every check of ``guards`` on ``checked``; the first to trip raises (an input
    guardrail's :class:`~aniki.GuardrailTripped` at once, an output one's as
    :class:`_Tripped`, for :func:`checked_reply` to settle)."""

    async def one(guard: Guardrail) -> None:
        if observe.OBSERVER is None:
            reason = await _verdict(plan, guard, checked)
        else:
            decide = functools.partial(_verdict, plan, guard, checked)
            reason = await observe.OBSERVER.guardrail(plan, guard.name, stage, decide)
        if reason is None:
            return
        if stage == "input":
            raise GuardrailTripped(guard.name, stage, reason, message)
        raise _Tripped(guard, reason)

    if len(guards) == 1:
        await one(guards[0])
        return
    running = [asyncio.ensure_future(one(guard)) for guard in guards]
    try:
        for finished in asyncio.as_completed(running):
            await finished
    finally:
        await _stopped(*running)


async def _verdict(plan: RunPlan, guard: Guardrail, checked: Any) -> str | None:
    """What ``guard``'s check says of ``checked``: ``None`` (pass) or the reason it trips."""

    def charge(usage: Usage) -> None:
        plan.sub_usage += usage

    token = _ENCLOSING.set(charge)
    try:
        check = guard.check
        if inspect.iscoroutinefunction(check):
            returned = await check(plan.context, checked)
        else:
            returned = await TOOLS.submit(functools.partial(check, plan.context, checked))
            if inspect.isawaitable(returned):
                returned = await returned
    finally:
        _ENCLOSING.reset(token)
    if returned is None or returned is True:
        return None
    if returned is False:
        return "(no reason given)"
    if isinstance(returned, str):
        return returned or "(no reason given)"
    raise UserError(
        f"guardrail {guard.name!r} returned {type(returned).__name__}; return None (or "
        "True) to pass, or a reason string (or False) to trip"
    )


@contextmanager
def apart() -> Iterator[Charge | None]:
    """Around a whole run: what adds its usage to the run whose guardrail started it
    (``None``: it was not started by one); inside, the run's own runs charge it instead."""
    enclosing = _ENCLOSING.get()
    if enclosing is None:
        yield None
        return
    token = _ENCLOSING.set(None)
    try:
        yield enclosing
    finally:
        _ENCLOSING.reset(token)


async def _stopped(*tasks: asyncio.Future[Any]) -> None:
    """Cancel whichever of ``tasks`` still runs and wait for it; every outcome retrieved."""
    for task in tasks:
        if not task.done():
            task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
