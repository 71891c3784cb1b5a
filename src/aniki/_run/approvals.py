"""Tool calls held for approval: kept in the session's store, so a run can stop in one
process and be resumed in another.

When the model asks for a tool that ``requires_approval``, the run stops before calling it.
The assistant message and the results of the turn's other calls (run at once) are kept in
the session's derived state under :data:`PENDING_KEY`, not in the history, so the stored
history stays one a provider accepts: no tool call without its answer. ``Runner.resume``
reads it back, runs the approved calls, answers the denied ones with a tool message saying
so, stores the whole turn at once, then drops the record and lets the model go on.

A crash between storing the turn and dropping the record is noticed on the next resume: the
turn is then in the history already, and only the record goes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import UserError
from ..messages import Message, ToolCall
from . import session_io

__all__ = ["PENDING_KEY", "HeldTurn", "decisions", "denied_message", "drop", "hold", "load"]

PENDING_KEY = "aniki.pending_approval"
"""The meta key of a held turn."""

_VERSION = 1


@dataclass(frozen=True, slots=True)
class HeldTurn:
    """A turn stopped for approval."""

    agent: str
    """The name of the agent whose model asked for the calls."""
    assistant: Message
    """The assistant message with the tool calls."""
    results: tuple[Message, ...]
    """The tool messages of the calls that needed no approval, already run."""
    awaiting: tuple[ToolCall, ...]
    """The calls that wait for a decision, in the order the model gave them."""

    def to_value(self) -> dict[str, Any]:
        """The JSON-safe record kept in meta."""
        return {
            "version": _VERSION,
            "agent": self.agent,
            "assistant": self.assistant.to_dict(),
            "results": [message.to_dict() for message in self.results],
            "awaiting": [call.id for call in self.awaiting],
        }

    @classmethod
    def from_value(cls, value: Any, session_id: str) -> HeldTurn:
        """The held turn a stored record holds."""
        try:
            assert isinstance(value, dict) and value.get("version") == _VERSION
            assistant = Message.from_dict(value["assistant"])
            calls = {call.id: call for call in assistant.tool_calls}
            return cls(
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
        if callable(getattr(found, "get_meta", None)) and callable(
            getattr(found, "set_meta", None)
        ):
            return found
        found = getattr(found, "inner", None)
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
        session_io.blocks(owner), lambda: owner.set_meta(PENDING_KEY, turn.to_value())
    )


async def load(session: Any) -> HeldTurn | None:
    """The turn held in ``session``'s store, if any."""
    owner = _owner(session)
    value = await session_io.call(session_io.blocks(owner), lambda: owner.get_meta(PENDING_KEY))
    return None if value is None else HeldTurn.from_value(value, str(session.id))


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
