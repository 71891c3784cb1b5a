"""Store access for the CLI: any store URL, sessions read and written through one path."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..messages import Message
from ..sessions.base import SessionInfo

__all__ = ["list_sessions", "open_store_session", "read_messages", "replace_messages"]


def open_store_session(url: str, session_id: str) -> Any:
    """The session ``session_id`` of the store at ``url``."""
    from ..sessions.url import open_session

    return open_session(url, session_id)


def list_sessions(url: str) -> list[SessionInfo]:
    """Every session of the store at ``url``, by id."""
    from ..sessions.url import list_sessions as list_store

    return sorted(list_store(url), key=lambda info: info.id)


def read_messages(url: str, session_id: str) -> Sequence[Message]:
    """The history of ``session_id`` (empty when there is none)."""
    session = open_store_session(url, session_id)
    try:
        return tuple(session.get_messages())
    finally:
        _close(session)


def replace_messages(url: str, session_id: str, messages: Sequence[Message]) -> None:
    """Make ``messages`` the whole history of ``session_id`` (an empty list deletes it)."""
    session = open_store_session(url, session_id)
    try:
        replace = getattr(session, "_replace", None)
        if replace is not None:  # SQLite, Redis, PostgreSQL: one transaction, old or new
            replace(list(messages))
            return
        session.clear()
        if messages:
            session.add_messages(list(messages))
    finally:
        _close(session)


def _close(session: Any) -> None:
    close = getattr(session, "close", None)
    if callable(close):
        close()
