"""Listing a SQLite store's sessions, and removing them (prune, delete by owner).

A listing walks an index newest first (the rule of :func:`aniki.sessions._catalog.select`)
and reads each session's row and its last message's key and time (two seeks: its count and
exact ``updated_at``, see :mod:`._sql`), never its history:

- every session: ``aniki_sessions_by_second`` (the whole second of ``updated_at``, newest
  first), which holds only the sessions ever written (a cleared one has no ``updated_at``);
- one owner's: ``aniki_sessions_by_owner_second`` (``owner``, then the second);
- one tag's: the tags table's primary key (``tag, number``), then each session by its number,
  the tag's sessions sorted (only they are read).

The index gives the order by second; the sessions written in one second are sorted by their
exact times, then ids (SQLite sorts the tail of an ORDER BY whose head an index gives, one
second at a time, so ``limit`` still stops the walk). ``updated_after`` and ``cursor`` bound
the index by their second and the exact time decides within it.

A prune or a delete empties whole sessions as ``clear()`` does (messages, meta, tags, info;
the generation bumped, so every instance's cache starts over), at most
:data:`~aniki.sessions._catalog.PRUNE_BATCH` per write transaction: each session goes whole,
and no lock is held long. The sessions of a batch are chosen inside its transaction, so a
session written meanwhile is either written before (and no longer old) or after (a new
conversation). The row keeping its id and number stays, as after ``clear()``: another
instance may still hold the number, and must never write into a block given to another id.
"""

from __future__ import annotations

import math
from datetime import datetime

from .._catalog import PRUNE_BATCH, Listing, timestamp
from ..base import SessionInfo
from ._blobs import empty
from ._db import Database
from ._info import info_of
from ._sql import INFO, SECOND, UPDATED

__all__ = ["list_infos", "listing_query", "removal_query", "remove_sessions"]

_BY_TAG = (
    # CROSS JOIN keeps the tag's rows as the outer loop: the planner may not walk every
    # session in time order instead, testing each for the tag.
    f"SELECT {INFO} FROM aniki_session_tags AS t CROSS JOIN aniki_sessions AS s"
    " ON s.number = t.number WHERE t.tag = ? AND s.updated_at IS NOT NULL"
)
_ALL = f"SELECT {INFO} FROM aniki_sessions AS s WHERE s.updated_at IS NOT NULL"
_CHOSEN = "SELECT s.number, s.id, s.generation FROM aniki_sessions AS s WHERE "
_ORDER = f" ORDER BY {SECOND} DESC, 3 DESC, s.id"  # column 3 of INFO: the exact updated_at


def listing_query(listing: Listing) -> tuple[str, list[object]]:
    """The SQL and parameters of ``listing``."""
    values: list[object]
    sql, values = _ALL, []
    if listing.tag is not None:
        sql, values = _BY_TAG, [listing.tag]
    if listing.owner is not None:
        sql += " AND s.owner = ?"
        values.append(listing.owner)
    if listing.updated_after is not None:
        after = timestamp(listing.updated_after)
        sql += f" AND {SECOND} >= ? AND {UPDATED} > ?"
        values += [math.floor(after), after]
    if listing.cursor is not None:
        when, ident = listing.cursor
        when_at = timestamp(when)
        # Strictly after (when, ident) in (updated_at DESC, id) order; the first term bounds
        # the index range.
        sql += f" AND {SECOND} <= ? AND ({UPDATED} < ? OR ({UPDATED} = ? AND s.id > ?))"
        values += [math.floor(when_at), when_at, when_at, ident]
    sql += _ORDER
    if listing.limit is not None:
        sql += " LIMIT ?"
        values.append(listing.limit)
    return sql, values


def list_infos(db: Database, listing: Listing) -> list[SessionInfo]:
    """The page of sessions ``listing`` asks for, in its order (one read transaction)."""
    sql, values = listing_query(listing)
    with db.transaction(write=False) as conn:
        rows = conn.execute(sql, values).fetchall()
    return [info_of(db, row) for row in rows]


def removal_query(*, cutoff: datetime | None, owner: str | None) -> tuple[str, list[object]]:
    """The SQL and parameters choosing the next batch of sessions a prune (``cutoff``, and
    ``owner`` or ``None``) or a delete (``owner`` alone) removes."""
    where: list[str] = []
    values: list[object] = []
    if owner is not None:
        where.append("s.owner = ?")
        values.append(owner)
    if cutoff is not None:
        before = timestamp(cutoff)
        # Never written (no updated_at): not old. The first term lets the index bound it.
        where.append(f"s.updated_at IS NOT NULL AND {SECOND} <= ? AND {UPDATED} < ?")
        values += [math.floor(before), before]
    if not where:
        raise ValueError("a removal names a cut-off or an owner")
    return f"{_CHOSEN}{' AND '.join(where)} LIMIT {PRUNE_BATCH}", values


def remove_sessions(db: Database, *, cutoff: datetime | None, owner: str | None) -> int:
    """Empty every session last written before ``cutoff`` (any age: ``None``) and of
    ``owner`` (anyone's: ``None``), :data:`PRUNE_BATCH` per transaction; how many."""
    chosen, values = removal_query(cutoff=cutoff, owner=owner)
    removed = 0
    while True:
        with db.transaction(write=True) as conn:
            rows = conn.execute(chosen, values).fetchall()
            for number, session_id, generation in rows:
                if type(session_id) is not str:
                    raise db.damage("a row of the sessions table cannot be read")
                empty(conn, session_id, *db.session_row((number, generation)))
        removed += len(rows)
        if len(rows) < PRUNE_BATCH:
            return removed
