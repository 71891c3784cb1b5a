"""Store access for the CLI: any store URL, sessions read and written through one path."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ..errors import StoreError, UserError
from ..messages import Message
from ..sessions._capabilities import capabilities_of
from ..sessions.base import SessionInfo

__all__ = [
    "absent",
    "check_store_url",
    "fork_session",
    "list_filtered",
    "list_sessions",
    "open_store_session",
    "read_messages",
    "replace_messages",
    "split_reference",
    "sqlite_path",
    "undo_session",
]

# The schemes open_session knows; "file:chats" (relative) is as much a URL as "file:///chats".
_STORE_URL = re.compile(r"(?i)(memory|sqlite|file|redis|rediss|postgresql|postgres):")


def check_store_url(url: str) -> str:
    """``url`` when it names a store by URL; a :class:`UserError` with the URL to write for a
    bare path (``chats.db`` -> ``sqlite:///chats.db``, a directory -> ``file:chats``)."""
    if ":" in url:
        return url
    suggestion = f"file:{url}" if Path(url).is_dir() else f"sqlite:///{url}"
    raise UserError(
        f"{url!r} is a path, not a store URL: write {suggestion} "
        "(sqlite:///FILE for a SQLite file, file:DIR for a directory of session files; "
        "an absolute path keeps its leading slash, as in sqlite:////var/chats.db)"
    )


def split_reference(reference: str, default_url: str) -> tuple[str, str] | None:
    """``(store URL, session id)`` for a ``URL#ID`` or a plain id; ``None`` for a URL
    without ``#ID``.

    A reference that starts with a store scheme (``file:``, ``sqlite:``, ``redis:``, ...) is
    a URL, relative file URLs included; anything else is a session id in ``default_url``.
    """
    if not _STORE_URL.match(reference):
        return default_url, reference
    url, sep, session_id = reference.rpartition("#")
    if not sep or not url or not session_id:
        return None
    return url, session_id


def list_filtered(
    url: str, *, owner: str | None, tag: str | None, limit: int | None
) -> list[SessionInfo]:
    """The sessions of the store at ``url`` that ``open_store(url).list_sessions`` gives for
    these filters, newest first (none when the store does not exist yet)."""
    from ..sessions.store import open_store

    if absent(url):
        return []
    with open_store(check_store_url(url)) as store:
        return store.list_sessions(owner=owner, tag=tag, limit=limit)


def open_store_session(url: str, session_id: str) -> Any:
    """The session ``session_id`` of the store at ``url``."""
    from ..sessions.url import open_session

    return open_session(check_store_url(url), session_id)


def list_sessions(url: str, *, problems: list[StoreError] | None = None) -> list[SessionInfo]:
    """Every session of the store at ``url``, by id.

    A directory store leaves out the files it cannot list and appends a
    :class:`~aniki.StoreError` for each to ``problems``.
    """
    from ..sessions.url import list_sessions as listed

    if absent(url):
        return []
    return sorted(listed(check_store_url(url), problems=problems), key=lambda info: info.id)


def absent(url: str) -> bool:
    """Whether ``url`` names a SQLite file or a session directory that does not exist: a
    command that only reads then finds nothing, and creates nothing."""
    from ..sessions.url import file_path

    database = sqlite_path(url)
    if database is not None:
        return not database.exists()
    scheme, _, rest = check_store_url(url).partition(":")
    rest = rest.partition("?")[0]
    if scheme.lower() == "file":
        try:
            return not Path(file_path(url, rest)).exists()
        except UserError:
            return False  # opening it says what is wrong
    return False


def sqlite_path(url: str) -> Path | None:
    """The file a ``sqlite:///PATH`` URL names; ``None`` for any other URL."""
    scheme, _, rest = url.partition(":")
    rest = rest.partition("?")[0]
    if scheme.lower() != "sqlite" or not rest.startswith("///") or len(rest) == 3:
        return None
    return Path(unquote(rest[3:]))


def read_messages(url: str, session_id: str) -> Sequence[Message]:
    """The history of ``session_id`` (empty when there is none, or no store yet)."""
    if absent(url):
        return ()
    session = open_store_session(url, session_id)
    try:
        return tuple(session.get_messages())
    finally:
        _close(session)


def replace_messages(url: str, session_id: str, messages: Sequence[Message]) -> None:
    """Make ``messages`` the whole history of ``session_id`` (an empty list deletes it)."""
    session = open_store_session(url, session_id)
    try:
        replace = capabilities_of(session).replace
        if replace is not None:  # SQLite, Redis, PostgreSQL: one transaction, old or new
            replace(list(messages))
            return
        session.clear()
        if messages:
            session.add_messages(list(messages))
    finally:
        _close(session)


def fork_session(url: str, session_id: str, new_id: str, upto: str | None) -> int:
    """Fork ``session_id`` into ``new_id`` (through message ``upto``); the messages copied."""
    session = open_store_session(url, session_id)
    try:
        fork = capabilities_of(session).fork
        if fork is None:
            raise UserError(f"the store at {url!r} cannot fork sessions")
        forked = fork(new_id, upto=upto)
        try:
            return len(forked.get_messages())
        finally:
            _close(forked)
    finally:
        _close(session)


def undo_session(url: str, session_id: str) -> Sequence[Message]:
    """Remove the last turn of ``session_id``; the messages removed."""
    session = open_store_session(url, session_id)
    try:
        undo = capabilities_of(session).undo
        if undo is None:
            raise UserError(f"the store at {url!r} cannot undo a turn")
        removed: Sequence[Message] = undo()
        return removed
    finally:
        _close(session)


def _close(session: Any) -> None:
    close = capabilities_of(session).close
    if close is not None:
        close()
