"""A SQLite session's meta (derived state beside its history: a policy's cut, a summary):
each call one statement, or one write transaction."""

from __future__ import annotations

from collections.abc import Callable

from ._db import Database
from ._sql import DELETE_META, GET_META, SET_META

__all__ = ["get_meta", "set_meta", "swap_meta"]


def get_meta(db: Database, session_id: str, key: str) -> str | None:
    """The stored meta text, or ``None``."""
    with db.lock, db.errors():
        row = db.conn.execute(GET_META, (session_id, key)).fetchone()
    if row is not None and type(row[0]) is not str:
        raise db.damage(f"the meta value {key!r} of session {session_id!r} is not text")
    return None if row is None else row[0]


def set_meta(db: Database, session_id: str, key: str, text: str | None) -> None:
    """Store meta text; ``None`` deletes the key."""
    with db.transaction(write=True) as conn:
        if text is None:
            conn.execute(DELETE_META, (session_id, key))
        else:
            conn.execute(SET_META, (session_id, key, text))


def swap_meta(
    db: Database,
    session_id: str,
    key: str,
    matches: Callable[[str | None], bool],
    text: str | None,
) -> bool:
    """In one write transaction: when ``matches(stored text or None)``, store ``text``
    (``None`` deletes the key) and return ``True``; otherwise change nothing."""
    with db.transaction(write=True) as conn:
        row = conn.execute(GET_META, (session_id, key)).fetchone()
        if row is not None and type(row[0]) is not str:
            raise db.damage(f"the meta value {key!r} of session {session_id!r} is not text")
        if not matches(None if row is None else row[0]):
            return False
        if text is None:
            conn.execute(DELETE_META, (session_id, key))
        else:
            conn.execute(SET_META, (session_id, key, text))
        return True
