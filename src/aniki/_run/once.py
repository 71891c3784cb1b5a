"""Each tool call once: the run engine's side of the run journal (:mod:`aniki._run.journal`).

The turn loop calls :func:`open_turn` before a turn's tools run (the response and a claim on
each call, in one step), runs each call through :func:`once` (its result recorded as it
returns; after a crash, a recorded result is given back instead of running the call again),
and ends the run with :func:`finish` or :func:`hold`. A run whose store keeps no derived
state, or that a durable executor runs, journals nothing.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..errors import UserError
from ..messages import Message, ToolCall
from ..sessions import _session_io as session_io
from ..sessions._capabilities import capabilities_of
from .journal import Journal, journal_of
from .plan import HeldTurn, RunPlan

__all__ = [
    "claim",
    "ending",
    "finish",
    "hold",
    "journal",
    "last_id",
    "once",
    "open_turn",
    "unknown_outcome",
]


def journal(plan: RunPlan) -> Journal | None:
    """The run's journal (made on first use; ``None``: this run journals nothing)."""
    if plan.journal is None and not plan.unjournaled:
        plan.journal = journal_of(plan.session, plan.context.run_id)
        plan.unjournaled = plan.journal is None
    return plan.journal


async def open_turn(plan: RunPlan, assistant: Message, run_now: Sequence[ToolCall]) -> None:
    """Record ``assistant`` (a response asking for tools) and claim ``run_now``, the calls
    about to run, in one step: from here on a crash cannot make them run twice."""
    found = journal(plan)
    if found is None or not assistant.tool_calls:
        return
    turn = {"response": assistant.to_dict(), "calls": {call.id: {} for call in run_now}}

    def edit(state: dict[str, Any]) -> None:
        entry = state["runs"].get(found.run_id)
        if plan.journaled:
            entry = found.mine(state)
        else:
            found.refuse_if_held(entry)
            if entry is not None and entry.get("state") == "done":
                raise UserError(
                    f"run {found.run_id!r} of session {found.session_id!r} has ended; give "
                    "each run its own run_id"
                )
            entry = found.take(state, None, plan.agent.name)
        if not plan.streaming:  # earlier turns are stored: only this one is open
            entry["turns"] = []
        entry["turns"] = [*entry.get("turns", []), turn]
        entry["agent"] = plan.agent.name

    await found.change(edit)
    plan.journaled = True


async def claim(plan: RunPlan, calls: Sequence[ToolCall]) -> None:
    """Claim ``calls`` of the run's last open turn (approved calls of a resumed turn)."""
    found = journal(plan)
    if found is None or not calls:
        return

    def edit(state: dict[str, Any]) -> None:
        entry = found.mine(state)
        last = dict(entry["turns"][-1])
        last["calls"] = {**last["calls"], **{call.id: {} for call in calls}}
        entry["turns"] = [*entry["turns"][:-1], last]

    await found.change(edit)


async def once(
    plan: RunPlan,
    call: ToolCall,
    work: Callable[[], Awaitable[Message]],
    *,
    last: Callable[[], bool] = lambda: False,
) -> Message:
    """``work()`` (the call, claimed by :func:`open_turn`), its result recorded as it returns;
    after a crash, the recorded result, or for a call that may have run, ``work()`` again
    only if its tool is idempotent (else a tool message saying the outcome is unknown).

    ``last()`` says, once the call has returned, whether it is the last call of its turn
    still running: a run that stores each turn as it completes then writes the result
    with the turn (or the held entry) at once, and it needs no record of its own: a crash
    before that write finds it claimed, as it would before a record."""
    recorded = plan.recorded.get(call.id)
    if recorded is not None:
        if recorded.get("result"):
            return Message.from_dict(recorded["result"])
        tool = plan.tools.get(call.name)
        if tool is None or not tool.idempotent:
            message = unknown_outcome(call)
            await _record(plan, call, message)
            return message
    message = await work()
    if plan.streaming or not last():
        await _record(plan, call, message)
    return message


async def _record(plan: RunPlan, call: ToolCall, message: Message) -> None:
    found = journal(plan)
    if found is None or not plan.journaled:
        return
    result = message.to_dict()

    def edit(state: dict[str, Any]) -> None:
        entry = found.mine(state)
        turns = [dict(turn) for turn in entry["turns"]]
        for turn in reversed(turns):
            if call.id in turn["calls"]:
                turn["calls"] = {**turn["calls"], call.id: {"result": result}}
                break
        entry["turns"] = turns

    await found.change(edit)


def unknown_outcome(call: ToolCall) -> Message:
    """The tool message answering a call that a crash cut short, which may have run."""
    return Message(
        "tool",
        f"The outcome of this call of {call.name!r} is unknown: the run was interrupted while "
        "it ran, so it may or may not have taken effect. It was not run again. Check its "
        "effect before calling it again.",
        tool_call_id=call.id,
    )


async def hold(plan: RunPlan, held: HeldTurn) -> None:
    """Keep the run's turn stopped for approval: held, bound to this session and to the
    last message it holds now."""
    found = journal(plan) or journal_of(plan.session, plan.context.run_id, held=True)
    if found is None:
        raise UserError(
            f"{type(plan.session).__name__} keeps no derived state (get_meta/set_meta), so a "
            "run cannot stop for approval there; use a built-in store, or give the store "
            "get_meta and set_meta"
        )
    base = await last_id(plan.session)
    results = {m.tool_call_id: {"result": m.to_dict()} for m in held.results}
    turn = {"response": held.assistant.to_dict(), "calls": results}

    def edit(state: dict[str, Any]) -> None:
        entry = found.mine(state) if plan.journaled else found.take(state, None, held.agent)
        turns = entry.get("turns", [])
        entry["turns"] = [*turns[:-1], turn] if plan.journaled and turns else [turn]
        entry.update(
            state="held",
            agent=held.agent,
            base=base,
            awaiting=[call.id for call in held.awaiting],
            token=None,
            holder=None,
        )

    await found.change(edit)


async def finish(plan: RunPlan) -> None:
    """Mark the run ended (when it journaled anything, and :func:`ending` did not)."""
    found = plan.journal
    if found is None or not plan.journaled:
        return
    await found.change(_ended(found))
    plan.journaled = False


def ending(plan: RunPlan) -> Callable[[], None] | None:
    """The end of the run's entry as one blocking try, for the store's worker thread to
    run right after it stores the run's answer: one trip there instead of two. Should the
    try fail (a lost race, an error), :func:`finish` ends the entry as usual. ``None``
    when the run holds no entry."""
    found = plan.journal
    if found is None or not plan.journaled:
        return None

    def end_now() -> None:
        if found.try_now(_ended(found)):
            plan.journaled = False

    return end_now


def _ended(found: Journal) -> Callable[[dict[str, Any]], None]:
    def edit(state: dict[str, Any]) -> None:
        entry = state["runs"].get(found.run_id)
        if entry is None or entry.get("token") != found.token:
            return  # taken over (its new holder ends it) or forgotten
        state["runs"][found.run_id] = {  # kept small: every later swap carries it
            "state": "done",
            "agent": entry.get("agent", ""),
            "updated": round(time.time(), 3),
        }

    return edit


async def last_id(session: Any) -> str | None:
    """The id of the last message ``session`` holds (``None`` when it holds none): one
    message read from a store that reads the recent ones alone, else its whole history."""
    can = capabilities_of(session)
    if can.limited:
        recent: Sequence[Message] = await session_io.call(
            can.blocking, lambda: session.get_messages(limit=1)
        )
    else:
        recent = await session_io.read(session)
    return recent[-1].id if recent else None
