"""Tool calls held for approval: kept in the session's run journal, so a run can stop in one
process and be resumed in another, once.

When the model asks for a tool that ``requires_approval``, the run stops before calling it.
The assistant message and the results of the turn's other calls (run at once) are kept in
the run's journal entry (:mod:`aniki._run.journal`), marked *held*, not in the history, so
the stored history stays one a provider accepts: no tool call without its answer. The
entry is bound to its session and to the last message the session held when the run
stopped: after an ``undo()``, a ``clear()``, a later turn, or in a fork, it cannot be
resumed.

``Runner.resume`` (:func:`resume`) checks the entry, then takes it in one compare-and-swap
that only one resume (or worker) can win, with its decisions; a second one gets
:class:`~aniki.RunInProgressError`, or, once the first has ended, finds nothing to decide.
The approved calls are claimed and run, each denied one is answered with a tool message
saying so, the whole turn is stored at once (:mod:`aniki._run.recovery`), and the model goes
on in the same run (same ``run_id``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import RunInProgressError, UserError
from ..messages import Message
from .handoffs import find_agent
from .journal import Journal, holder_alive, journal_of
from .loop import switch_agent
from .once import last_id
from .plan import Outcome, RunPlan
from .recovery import denied_message, go_on

__all__ = ["decisions", "denied_message", "resume"]


def decisions(
    awaiting: Sequence[str], approve: Iterable[str], deny: Iterable[str], session_id: str
) -> dict[str, bool]:
    """The decision for each awaiting call (``True``: approved); a ``UserError`` for an id
    that awaits nothing, is both approved and denied, or a call left undecided."""
    approved, denied = _ids(approve, "approve"), _ids(deny, "deny")
    waiting = set(awaiting)
    unknown = sorted((approved | denied) - waiting)
    if unknown:
        raise UserError(
            f"no tool call with id {unknown[0]!r} awaits approval in session {session_id!r}; "
            f"waiting: {sorted(waiting)}"
        )
    both = sorted(approved & denied)
    if both:
        raise UserError(f"tool call {both[0]!r} is both approved and denied; pick one")
    undecided = [call_id for call_id in awaiting if call_id not in approved | denied]
    if undecided:
        raise UserError(
            f"decide every held call: {undecided} is neither approved nor denied "
            "(pass its id in approve= or deny=)"
        )
    return {call_id: call_id in approved for call_id in approved | denied}


def _ids(given: Iterable[str], name: str) -> set[str]:
    if isinstance(given, str):
        raise UserError(f"{name}= takes a list of tool call ids, not one string: {name}=[...]")
    ids = set(given)
    if any(not isinstance(call_id, str) for call_id in ids):
        raise UserError(f"{name}= takes tool call ids (strings)")
    return ids


async def resume(plan: RunPlan, approve: Sequence[str], deny: Sequence[str]) -> Outcome:
    """``Runner.resume``: decide the held calls, store their turn, and let the model go on
    (until it answers, or stops for approval again)."""
    session_id = str(plan.session.id)
    wanted = _ids(approve, "approve") | _ids(deny, "deny")
    looking = journal_of(plan.session, "", held=True)
    if looking is None:
        raise UserError(f"no tool call awaits approval in session {session_id!r}")
    state = await looking.load()
    replayed: dict[str, Any] | None = (
        state["runs"].get(plan.context.run_id) if looking.durable else None
    )
    entry: dict[str, Any]
    if replayed is not None and replayed.get("state") == "running":  # its first attempt took it
        run_id, entry = plan.context.run_id, replayed
    else:
        run_id, entry = _held(state, wanted, session_id)
    held_by = entry.get("agent", "")
    if held_by != plan.agent.name:
        target = find_agent(plan.agent, held_by)  # handed off to during the run
        if target is None:
            raise UserError(
                f"the calls held in session {session_id!r} were asked for by agent "
                f"{held_by!r}; resume with that agent (or one that hands off to it), not "
                f"{plan.agent.name!r}"
            )
        await switch_agent(plan, target)
    if entry is replayed:  # decided by its first attempt
        decided = dict(entry.get("decided") or {})
    else:
        decided = decisions(_checked(entry, session_id), approve, deny, session_id)
    base = await last_id(plan.session)
    plan.context.run_id = run_id
    journal = journal_of(plan.session, run_id, held=True)
    assert journal is not None
    if entry is not replayed and (entry.get("session") != session_id or entry.get("base") != base):
        await _drop(journal)
        raise UserError(
            f"the tool calls held in session {session_id!r} can no longer be resumed: the "
            "conversation changed since the run stopped for them (an undo, a clear, a later "
            "turn, or a copy made by fork); run again"
        )
    plan.journal = journal
    taken = await journal.change(lambda state: _take(journal, state, plan, decided))
    plan.journaled = True
    return await go_on(plan, taken)


def _held(state: dict[str, Any], wanted: set[str], session_id: str) -> tuple[str, dict[str, Any]]:
    """The held run whose calls ``wanted`` names (the only held run, when it names none)."""
    every = [(k, v) for k, v in state["runs"].items() if v.get("state") == "held"]
    held = [(k, v) for k, v in every if wanted & set(v.get("awaiting", ()))]
    if len(held) == 1:
        return held[0]
    if not held and len(every) == 1:  # the decisions are checked against its calls
        return every[0]
    if not every:
        busy = [
            run_id
            for run_id, entry in state["runs"].items()
            if entry.get("state") == "running" and wanted & set(entry.get("decided") or ())
        ]
        alive = [r for r in busy if holder_alive(*_holding(state["runs"][r]))]
        if alive:
            raise RunInProgressError(alive[0], session_id, "another resume decided its calls")
        if busy:
            raise UserError(
                f"run {busy[0]!r} of session {session_id!r} was cut by a crash after its "
                "calls were decided; Runner.recover finishes it"
            )
        raise UserError(f"no tool call awaits approval in session {session_id!r}")
    raise UserError(
        f"{len(held)} runs of session {session_id!r} wait for approval; name their calls "
        "in approve= or deny="
    )


def _checked(entry: dict[str, Any], session_id: str) -> list[str]:
    """The ids awaiting a decision; ``UserError`` when the entry does not hold together
    (a call the model's recorded response did not make, a result for none of its calls)."""
    try:
        turn = entry["turns"][-1]
        response = Message.from_dict(turn["response"])
        made = [call.id for call in response.tool_calls]
        awaiting = [str(call_id) for call_id in entry["awaiting"]]
        done = set(turn["calls"])
        for record in turn["calls"].values():
            Message.from_dict(record["result"])
        assert response.role == "assistant" and made
        assert set(awaiting) <= set(made) and done <= set(made)
        assert set(awaiting) | done == set(made) and not set(awaiting) & done
    except (AssertionError, KeyError, IndexError, TypeError, ValueError):
        raise UserError(
            f"the tool calls held for approval in session {session_id!r} cannot be resumed: "
            "the record names a call the model's recorded response did not make, or cannot "
            "be read (changed by hand, or written by a newer aniki); run again"
        ) from None
    return awaiting


def _take(
    journal: Journal, state: dict[str, Any], plan: RunPlan, decided: dict[str, bool]
) -> dict[str, Any]:
    entry = state["runs"].get(journal.run_id)
    if entry is None or entry.get("state") == "done":
        raise UserError(f"no tool call awaits approval in session {journal.session_id!r}")
    if entry.get("state") != "held" and not (journal.durable and entry.get("state") == "running"):
        raise RunInProgressError(journal.run_id, journal.session_id, "resumed by another caller")
    taken = journal.take(state, entry, plan.agent.name)
    taken["decided"] = taken.get("decided") or decided
    for key in ("awaiting", "base"):
        taken.pop(key, None)
    return dict(taken)


async def _drop(journal: Journal) -> None:
    """End a held entry that can no longer be resumed."""

    def edit(state: dict[str, Any]) -> None:
        entry = state["runs"].get(journal.run_id)
        if entry is not None and entry.get("state") == "held":
            state["runs"][journal.run_id] = {
                "state": "done",
                "agent": entry.get("agent", ""),
                "updated": entry.get("updated", 0),
            }

    await journal.change(edit)


def _holding(entry: dict[str, Any]) -> tuple[Any, Any, Any]:
    return entry.get("holder"), entry.get("until"), entry.get("token")
