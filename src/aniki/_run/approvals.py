"""Tool calls held for approval: kept in the session's store, so a run can stop in one
process and be resumed in another.

When the model asks for a tool that ``requires_approval``, the run stops before calling it.
The assistant message and the results of the turn's other calls (run at once) are kept in
the session's derived state under :data:`PENDING_KEY`, not in the history, so the stored
history stays one a provider accepts: no tool call without its answer. ``Runner.resume``
reads it back (:func:`resume`), runs the approved calls, answers the denied ones with a tool
message saying so, stores the whole turn at once, then drops the record and lets the model go
on. The turn loop only notes a held turn (``Outcome.held``); each run keeps it here when its
turns end (:func:`keep_held`).

A crash between storing the turn and dropping the record is noticed on the next resume: the
turn is then in the history already, and only the record goes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import UserError
from ..messages import Message, ToolCall
from ..sessions import _session_io as session_io
from ..sessions._capabilities import capabilities_of
from .handoffs import find_agent
from .loop import commit, prepare, run_tools, run_turns, switch_agent
from .plan import HeldTurn, Outcome, RunPlan

__all__ = [
    "PENDING_KEY",
    "decisions",
    "denied_message",
    "drop",
    "hold",
    "keep_held",
    "load",
    "resume",
]

PENDING_KEY = "aniki.pending_approval"
"""The meta key of a held turn."""

_VERSION = 1


def _record(turn: HeldTurn) -> dict[str, Any]:
    """The JSON-safe record of ``turn`` kept in meta."""
    return {
        "version": _VERSION,
        "agent": turn.agent,
        "assistant": turn.assistant.to_dict(),
        "results": [message.to_dict() for message in turn.results],
        "awaiting": [call.id for call in turn.awaiting],
    }


def _from_record(value: Any, session_id: str) -> HeldTurn:
    """The held turn a stored record holds."""
    try:
        assert isinstance(value, dict) and value.get("version") == _VERSION
        assistant = Message.from_dict(value["assistant"])
        calls = {call.id: call for call in assistant.tool_calls}
        return HeldTurn(
            agent=str(value["agent"]),
            assistant=assistant,
            results=tuple(Message.from_dict(item) for item in value["results"]),
            awaiting=tuple(calls[call_id] for call_id in value["awaiting"]),
        )
    except (AssertionError, KeyError, TypeError, ValueError):
        raise UserError(
            f"the tool calls held for approval in session {session_id!r} cannot be read "
            "(written by a newer aniki, or changed by hand); run again without resume"
        ) from None


def _owner(session: Any) -> Any:
    """The object that keeps ``session``'s meta: the session, or the store it wraps."""
    found = session
    for _ in range(8):
        can = capabilities_of(found)
        if can.get_meta is not None:
            return found
        found = can.inner
        if found is None:
            break
    raise UserError(
        f"{type(session).__name__} keeps no derived state (get_meta/set_meta), so a run cannot "
        "stop for approval there; use a built-in store, or give the store get_meta and set_meta"
    )


async def hold(session: Any, turn: HeldTurn) -> None:
    """Keep ``turn`` in ``session``'s store."""
    owner = _owner(session)
    await session_io.call(
        session_io.blocks(owner), lambda: owner.set_meta(PENDING_KEY, _record(turn))
    )


async def load(session: Any) -> HeldTurn | None:
    """The turn held in ``session``'s store, if any."""
    owner = _owner(session)
    value = await session_io.call(session_io.blocks(owner), lambda: owner.get_meta(PENDING_KEY))
    return None if value is None else _from_record(value, str(session.id))


async def drop(session: Any) -> None:
    """Forget the held turn."""
    owner = _owner(session)
    await session_io.call(session_io.blocks(owner), lambda: owner.set_meta(PENDING_KEY, None))


def decisions(
    turn: HeldTurn, approve: Iterable[str], deny: Iterable[str], session_id: str
) -> dict[str, bool]:
    """The decision for each awaiting call (``True``: approved); a ``UserError`` for an id
    that awaits nothing or is both approved and denied."""
    approved, denied = _ids(approve, "approve"), _ids(deny, "deny")
    waiting = {call.id for call in turn.awaiting}
    unknown = sorted((approved | denied) - waiting)
    if unknown:
        raise UserError(
            f"no tool call with id {unknown[0]!r} awaits approval in session {session_id!r}; "
            f"waiting: {sorted(waiting)}"
        )
    both = sorted(approved & denied)
    if both:
        raise UserError(f"tool call {both[0]!r} is both approved and denied; pick one")
    return {call_id: call_id in approved for call_id in approved | denied}


def _ids(given: Iterable[str], name: str) -> set[str]:
    if isinstance(given, str):
        raise UserError(f"{name}= takes a list of tool call ids, not one string: {name}=[...]")
    ids = set(given)
    if any(not isinstance(call_id, str) for call_id in ids):
        raise UserError(f"{name}= takes tool call ids (strings)")
    return ids


def denied_message(call: ToolCall) -> Message:
    """The tool message answering a call that was denied."""
    return Message(
        "tool",
        f"The user denied this call of {call.name!r}; it was not run. Do not call it again "
        "with the same arguments unless the user asks.",
        tool_call_id=call.id,
    )


async def keep_held(plan: RunPlan, outcome: Outcome) -> None:
    """Keep the turn the run stopped at for approval, if it stopped, in its session's store."""
    if outcome.held is not None:
        await hold(plan.session, outcome.held)


async def resume(plan: RunPlan, approve: Sequence[str], deny: Sequence[str]) -> Outcome:
    """``Runner.resume``: decide the held calls, store their turn, and let the model go on
    (until it answers, or stops for approval again)."""
    await prepare(plan)
    session_id = str(plan.session.id)
    turn = await load(plan.session)
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
    decided = decisions(turn, approve, deny, session_id)
    undecided = [call.id for call in turn.awaiting if call.id not in decided]
    if undecided:
        raise UserError(
            f"decide every held call: {undecided} is neither approved nor denied "
            "(pass its id in approve= or deny=)"
        )
    outcome = Outcome()
    await _store_turn(plan, outcome, turn, decided)
    await drop(plan.session)
    outcome = await run_turns(plan, outcome)
    await keep_held(plan, outcome)
    return outcome


async def _store_turn(
    plan: RunPlan, outcome: Outcome, turn: HeldTurn, decided: dict[str, bool]
) -> None:
    """Run the approved calls, answer the denied ones, and store the whole turn; unless it
    is stored already (a crash after storing it only leaves the record to drop)."""
    stored = await session_io.read(plan.session)
    asked = {call.id for call in turn.assistant.tool_calls}
    if any(
        message.role == "assistant" and {c.id for c in message.tool_calls} == asked
        for message in stored[-len(asked) - 1 :]
    ):
        return
    approved = [call for call in turn.awaiting if decided[call.id]]
    answers = {m.tool_call_id: m for m in (*turn.results, *await run_tools(plan, approved))}
    answers.update({c.id: denied_message(c) for c in turn.awaiting if not decided[c.id]})
    results = [answers[call.id] for call in turn.assistant.tool_calls]
    await commit(plan, outcome, [turn.assistant, *results])
