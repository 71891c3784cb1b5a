"""What ``fork`` and ``undo`` mean, shared by every built-in store (pure, no I/O): which
messages a fork copies, where the last turn starts, which derived state a fork leaves
behind, and the errors both give."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import UserError
from ..messages import Message
from ._args import check_session_id

__all__ = [
    "FORK_SKIPPED_META",
    "fork_target",
    "forked_count",
    "last_turn_start",
    "taken",
]

FORK_SKIPPED_META = frozenset({"aniki.summary.claim"})
"""Meta keys a fork does not copy: a reader's claim on making the next summary belongs to
the session it was made in. Every other value (a summary, a policy's cut) is copied; the
policies check it against the fork's history and start afresh where it no longer fits."""


def fork_target(session_id: str, new_id: object) -> str:
    """``new_id`` when a fork of ``session_id`` may be made under it; ``UserError`` if not."""
    target = check_session_id(new_id)
    if target == session_id:
        raise UserError(f"fork() needs a new session id, not this session's own ({target!r})")
    return target


def forked_count(messages: Sequence[Message], upto: str | None, session_id: str) -> int:
    """How many of ``messages`` (the history, oldest first) a fork ``upto`` the message with
    that id copies: all of them when ``upto`` is ``None``."""
    if upto is None:
        return len(messages)
    if not isinstance(upto, str):
        raise UserError(f"upto must be a message id (a str) or None, got {type(upto).__name__}")
    for position in range(len(messages) - 1, -1, -1):
        if messages[position].id == upto:
            return position + 1
    raise UserError(
        f"session {session_id!r} has no message with id {upto!r}; pass the id of one of its "
        "messages (get_messages() shows them), or None to fork the whole history"
    )


def taken(new_id: str) -> UserError:
    """The error for a fork into a session that already holds messages."""
    return UserError(
        f"cannot fork into session {new_id!r}: it already holds messages; choose another id, "
        "or clear() that session first"
    )


def last_turn_start(messages: Sequence[Message]) -> int:
    """Where the last turn starts: the position of the last user message, or ``len(messages)``
    (nothing to undo) when there is none."""
    for position in range(len(messages) - 1, -1, -1):
        if messages[position].role == "user":
            return position
    return len(messages)
