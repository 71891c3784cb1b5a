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
checkpoint that copied all of it, so one that ends while writes keep landing leaves it as
long as it was. Under writes that never pause long enough, a log that reaches
:data:`OVERGROWN` pages makes the store's next call leave the loop: made in a worker thread,
with the automatic checkpoint back on, its write copies the whole log, no other write of
this process coming in between, and the log starts again.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from contextlib import suppress
from pathlib import Path

from ..._threads import LANES
from .._fork import count as fork_count
from .._local_file import DAMAGED

__all__ = ["AUTOCHECKPOINT", "CHECKPOINT_AFTER", "OVERGROWN", "Checkpointer"]

AUTOCHECKPOINT = 1000
"""Pages in the log after which a commit checkpoints, when it may: SQLite's default."""
CHECKPOINT_AFTER = 500
"""Writes made with the automatic checkpoint off after which a worker thread checkpoints:
a write adds one or two pages to the log, rarely more."""
OVERGROWN = 4 * AUTOCHECKPOINT
"""Pages in a log a checkpoint could not copy whole from which the store's calls leave the
loop until one of them has checkpointed (see the module docstring)."""


_INHERITED: list[sqlite3.Connection] = []
"""Connections a forked child inherited: kept, never used or closed (that is the parent's job)."""


class Checkpointer:
    """Checkpoints of the store at ``path``, made in a worker thread on a connection of its
    own, one at a time."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._key = str(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._forks = -1
        self._closer: weakref.finalize[[sqlite3.Connection], Checkpointer] | None = None
        self.overgrown = False
        """The log was :data:`OVERGROWN` pages long after the last checkpoint here."""

    def submit(self) -> None:
        """Checkpoint in a worker thread, after any checkpoint of this file still running."""
        LANES.submit(("sqlite-checkpoint", self._key), self._checkpoint)

    def close(self) -> None:
        """Close the connection (a checkpoint running now finishes first)."""
        with self._lock:
            if self._closer is not None and self._forks == fork_count():
                self._closer()
            self._conn = self._closer = None

    def _checkpoint(self) -> None:
        with self._lock:
            if DAMAGED and DAMAGED.named(self._key) is not None:
                return
            conn = self._conn
            if conn is None or self._forks != fork_count():
                if conn is not None and self._closer is not None:  # the parent's: not ours
                    self._closer.detach()
                    _INHERITED.append(conn)
                # mode=rw: a file deleted meanwhile is not made again, empty.
                conn = self._conn = sqlite3.connect(
                    f"{self._path.as_uri()}?mode=rw",
                    uri=True,
                    timeout=0,
                    isolation_level=None,
                    check_same_thread=False,
                )
                self._forks = fork_count()
                self._closer = weakref.finalize(self, _close, conn)
            with suppress(sqlite3.Error):
                _, pages, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                # All copied: the next write starts the log again.
                self.overgrown = OVERGROWN <= pages > copied


def _close(conn: sqlite3.Connection) -> None:
    with suppress(sqlite3.Error):
        conn.close()
