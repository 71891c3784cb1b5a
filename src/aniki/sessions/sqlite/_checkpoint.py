"""Checkpoints of a SQLite store made away from the event loop (:class:`Checkpointer`).

In WAL mode a commit appends pages to the log, and SQLite's automatic checkpoint copies the
log back into the database from inside the commit that fills it past 1,000 pages, waiting
for the disk twice (at ``synchronous=NORMAL``; measured about 5 ms on a local SSD, more on
network storage). A call made on the event loop's thread (:mod:`aniki.sessions._now`) would
stall every task of the loop that long, so such calls run with the automatic checkpoint off
and, every :data:`CHECKPOINT_AFTER` writes, hand a checkpoint to a worker thread.

That thread checkpoints through a connection of its own, not the store's: the store's
connection stays free for the loop's calls meanwhile (a checkpoint in WAL mode runs beside
readers and writers). The checkpoint is ``PASSIVE``: it waits for no one, and copies what it
can; the next one copies the rest. A file found damaged is never checkpointed.

The log starts again from its beginning (instead of growing) at the first write after a
checkpoint that copied all of it, and a checkpoint made beside writes that keep landing
never does: each copies what was there when it began. So once the log is :data:`OVERGROWN`,
the next call made on the loop ends with a checkpoint of its own, on the store's connection
(no write of this process can land meanwhile): it copies only what the worker thread's last
checkpoint left, and the log starts again.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import weakref
from contextlib import suppress
from pathlib import Path

from ..._threads import LANES
from .._args import Durability
from .._fork import count as fork_count
from .._local_file import DAMAGED
from ._connect import SYNCHRONOUS, close_quietly, let_go

__all__ = ["AUTOCHECKPOINT", "CHECKPOINT_AFTER", "OVERGROWN", "Checkpointer"]

AUTOCHECKPOINT = 1000
"""Pages in the log after which a commit checkpoints, when it may: SQLite's default."""
CHECKPOINT_AFTER = 500
"""Writes made with the automatic checkpoint off after which a worker thread checkpoints:
a write adds one or two pages to the log, rarely more."""
OVERGROWN = 2 * AUTOCHECKPOINT
"""Pages in the log from which a call made on the loop finishes the worker thread's
checkpoint (see the module docstring)."""


_RUNNING = threading.Lock()
"""Held while a checkpointing connection is opened, used or closed, and by ``os.fork()``: a
child is never made while such a thread is inside SQLite (the child would keep the mutexes
that thread held, locked for good). A fork waits up to :data:`_FORK_WAIT` seconds for it."""
_FORK_WAIT = 10.0
_forking: list[bool] = []  # whether the fork now being made took _RUNNING


def _before_fork() -> None:
    _forking.append(_RUNNING.acquire(timeout=_FORK_WAIT))


def _after_fork() -> None:
    if _forking.pop():
        _RUNNING.release()


if hasattr(os, "register_at_fork"):  # not on Windows, where there is no fork
    os.register_at_fork(
        before=_before_fork, after_in_parent=_after_fork, after_in_child=_after_fork
    )


class Checkpointer:
    """Checkpoints of the store at ``path``, made in a worker thread on a connection of its
    own, one at a time."""

    def __init__(self, path: Path, durability: Durability) -> None:
        self._path = path
        self._synchronous = f"PRAGMA synchronous={SYNCHRONOUS[durability]}"
        self._key = str(path)
        self._conn: sqlite3.Connection | None = None
        self._forks = -1
        self._closer: weakref.finalize[[sqlite3.Connection], Checkpointer] | None = None
        self.overgrown = False
        """The log was :data:`OVERGROWN` pages long at the last checkpoint here."""

    def after(self, conn: sqlite3.Connection, writes: int) -> int:
        """After a call made on the loop on the store's connection ``conn`` (its lock held),
        with ``writes`` made since the last checkpoint: finish a checkpoint the log outgrew,
        or hand one to a worker thread when due; the writes still to count."""
        if self.overgrown:  # see the module docstring: copy the rest, the log starts again
            self.overgrown = False
            if not self._damaged():
                with suppress(sqlite3.Error):
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        elif writes >= CHECKPOINT_AFTER:
            LANES.submit(("sqlite-checkpoint", self._key), self._checkpoint)
            return 0
        return writes

    def close(self) -> None:
        """Close the connection (a checkpoint running now finishes first)."""
        with _RUNNING:
            let_go(self._conn, self._closer, self._forks)
            self._conn = self._closer = None

    def _checkpoint(self) -> None:
        if self._damaged():
            return
        try:
            with _RUNNING:  # also one checkpoint at a time
                conn = self._connection()
                _, pages, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error:  # none made here (the file moved away, no access to it):
            pages = OVERGROWN  # the store's connection makes the next one
        self.overgrown = pages >= OVERGROWN

    def _damaged(self) -> bool:
        return bool(DAMAGED) and DAMAGED.named(self._key) is not None

    def _connection(self) -> sqlite3.Connection:
        conn = self._conn
        if conn is not None and self._forks == fork_count():
            return conn
        let_go(conn, self._closer, self._forks)  # a parent's, if any: kept
        conn = self._conn = _open(self._path, self._synchronous)
        self._forks = fork_count()
        self._closer = weakref.finalize(self, close_quietly, conn)
        return conn


def _open(path: Path, synchronous: str) -> sqlite3.Connection:
    # mode=rw: a file deleted meanwhile is not made again, empty. The store's durability:
    # at "off", no checkpoint waits for the disk either.
    uri = f"{path.as_uri()}?mode=rw"
    conn = sqlite3.connect(uri, uri=True, timeout=0, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(synchronous)
    except sqlite3.Error:
        close_quietly(conn)
        raise
    return conn
