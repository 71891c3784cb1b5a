"""Opening a SQLite store: the file checked, the schema made or migrated, WAL mode and the
durability level set (:func:`connect`).

Nothing is written to a file before it passed :mod:`~aniki.sessions.sqlite._schema`'s checks:
only an empty database or an aniki store that passes them is ever migrated or switched to
WAL.
"""

from __future__ import annotations

import sqlite3
import time
import weakref
from contextlib import suppress
from pathlib import Path
from typing import Any

from .._args import Durability
from .._fork import count as fork_count
from ._errors import LOCKED_CODES, result_code
from ._schema import check_header, prepare_schema

__all__ = ["INHERITED", "SYNCHRONOUS", "close_quietly", "connect", "let_go"]

SYNCHRONOUS: dict[Durability, str] = {"off": "OFF", "normal": "NORMAL", "full": "FULL"}
"""The ``PRAGMA synchronous`` level of each durability."""

INHERITED: list[sqlite3.Connection] = []
"""Connections a forked child inherited: kept, never used or closed (that is the parent's job)."""


def close_quietly(conn: sqlite3.Connection) -> None:
    """Close ``conn``, whatever state it is in."""
    with suppress(sqlite3.Error):
        conn.close()


def let_go(
    conn: sqlite3.Connection | None, closer: weakref.finalize[Any, Any] | None, forks: int
) -> None:
    """Close ``conn`` through ``closer`` (its finalizer) if this process opened it (``forks``:
    the fork count when it was opened); one a forked child inherited is kept instead, never
    used or closed, and no longer closed by its finalizer either."""
    if conn is None:
        return
    if forks == fork_count():
        if closer is not None:
            closer()
        return
    if closer is not None:
        closer.detach()
    INHERITED.append(conn)


def connect(path: Path, label: str, durability: Durability, timeout: float) -> sqlite3.Connection:
    """A new connection to the store ``path``, checked and ready (autocommit: every
    transaction is begun explicitly); :class:`~aniki.CorruptStoreError` for a file that is
    not an intact aniki store."""
    check_header(path, label)
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        prepare_schema(conn, path, label)
        # Set only once the file is known to be ours and intact: WAL rewrites the header.
        _use_wal(conn, timeout)
        conn.execute(f"PRAGMA synchronous={SYNCHRONOUS[durability]}")
    except BaseException:
        conn.close()
        raise
    return conn


def _use_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Put the file in WAL mode (once per file), waiting up to ``timeout`` for the lock.

    Switching needs the file to itself, and SQLite answers "database is locked" at once,
    without its busy wait, when other connections are opening the same new file at the
    same moment: retried here until one of them has switched it or the time is up.
    """
    deadline = time.monotonic() + timeout
    pause = 0.002
    while True:
        try:
            if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if result_code(exc) not in LOCKED_CODES or time.monotonic() >= deadline:
                raise
        time.sleep(min(pause, max(deadline - time.monotonic(), 0)))
        pause = min(pause * 2, 0.05)
