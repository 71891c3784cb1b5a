"""Going on from a journal entry (:mod:`aniki._run.journal`): a run cut by a crash
(``Runner.recover``) and a turn held for approval (``Runner.resume``, in
:mod:`aniki._run.approvals`) are finished the same way.

Each open turn of the entry is settled in order: a turn the history already holds (the
crash came after storing it) is left as it is; otherwise each of its calls is answered by
its recorded result, or, claimed without one, by running it again if its tool is
idempotent, else by a message saying its outcome is unknown; then the turn is stored whole.
The model then goes on, unless the run had already answered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..messages import Message, ToolCall
from ..sessions import _session_io as session_io
from . import once
from .journal import holder_alive, journal_of
from .loop import commit, prepare, run_tools, run_turns
from .plan import Outcome, RunPlan

__all__ = ["cut_runs", "denied_message", "go_on", "stored_turn", "take_cut"]


def denied_message(call: ToolCall) -> Message:
    """The tool message answering a call that was denied."""
    return Message(
        "tool",
        f"The user denied this call of {call.name!r}; it was not run. Do not call it again "
        "with the same arguments unless the user asks.",
        tool_call_id=call.id,
    )


def stored_turn(history: Sequence[Message], response: Message) -> bool:
    """Whether ``history`` holds the turn of ``response`` (found by its calls' ids)."""
    asked = {call.id for call in response.tool_calls}
    return any(
        message.role == "assistant" and {call.id for call in message.tool_calls} == asked
        for message in reversed(history)
    )


async def go_on(plan: RunPlan, entry: dict[str, Any]) -> Outcome:
    """Settle the open turns of ``entry`` (held by ``plan``'s journal), then let the model
    go on until it answers, or stops for approval again."""
    await prepare(plan)
    outcome = Outcome()
    decided: dict[str, bool] = entry.get("decided") or {}
    history = await session_io.read(plan.session, plan.can)
    stored_now = False
    for turn in entry.get("turns", ()):
        response = Message.from_dict(turn["response"])
        if stored_turn(history, response):
            continue
        await _settle(plan, outcome, response, turn.get("calls", {}), decided)
        stored_now = True
    history = await session_io.read(plan.session, plan.can)
    last = history[-1] if history else None
    if not stored_now and last is not None and last.role == "assistant" and not last.tool_calls:
        return outcome  # it had answered: only its journal entry was left to end
    return await run_turns(plan, outcome)


async def _settle(
    plan: RunPlan,
    outcome: Outcome,
    response: Message,
    calls: dict[str, Any],
    decided: dict[str, bool],
) -> None:
    """Answer every call of ``response`` and store the turn."""
    answers: dict[str | None, Message] = {}
    to_run: list[ToolCall] = []
    for call in response.tool_calls:
        record = calls.get(call.id)
        if record is not None and record.get("result"):
            answers[call.id] = Message.from_dict(record["result"])
        elif decided.get(call.id) is False:
            answers[call.id] = denied_message(call)
        elif record is not None and not (plan.journal is not None and plan.journal.durable):
            # claimed: it may have run (under a durable executor its step says)
            plan.recorded[call.id] = record
            to_run.append(call)
        else:  # never claimed: approved now, or a call the crash came before
            to_run.append(call)
    fresh = [call for call in to_run if call.id not in plan.recorded]
    await once.claim(plan, fresh)
    for message in await run_tools(plan, to_run):
        answers[message.tool_call_id] = message
    turn = [response, *(answers[call.id] for call in response.tool_calls)]
    await commit(plan, outcome, turn)


async def cut_runs(session: Any) -> list[str]:
    """The ids of ``session``'s runs whose holder died before they ended, oldest first."""
    found = journal_of(session, "")
    if found is None:
        return []
    state = await found.load()
    cut = [
        (float(entry.get("updated", 0)), run_id)
        for run_id, entry in state["runs"].items()
        if entry.get("state") == "running"
        and entry.get("session") == found.session_id  # not one a fork copied
        and not holder_alive(entry.get("holder"), entry.get("until"), entry.get("token"))
    ]
    return [run_id for _, run_id in sorted(cut)]


async def take_cut(plan: RunPlan) -> dict[str, Any] | None:
    """Take the cut run ``plan.context.run_id`` for ``plan`` (``None``: another worker took
    it first, or it ended)."""
    journal = journal_of(plan.session, plan.context.run_id)
    if journal is None:
        return None

    def edit(state: dict[str, Any]) -> dict[str, Any] | None:
        entry = state["runs"].get(journal.run_id)
        if (
            entry is None
            or entry.get("state") != "running"
            or entry.get("session") != journal.session_id
            or holder_alive(entry.get("holder"), entry.get("until"), entry.get("token"))
        ):
            return None
        return dict(journal.take(state, entry, str(entry.get("agent", ""))))

    taken: dict[str, Any] | None = await journal.change(edit)
    if taken is not None:
        plan.journal, plan.journaled = journal, True
    return taken
