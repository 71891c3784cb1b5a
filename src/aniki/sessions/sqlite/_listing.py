"""Listing a SQLite store's sessions, and removing them (prune, delete by owner).

A listing reads no message: each session's row holds its info, times and message count, and
the query walks an index newest first (the rule of :func:`aniki.sessions._catalog.select`):

- every session: ``aniki_sessions_by_time`` (``updated_at DESC, id``), which holds only the
  sessions ever written (a cleared one has no ``updated_at``);
- one owner's: ``aniki_sessions_by_owner`` (``owner, updated_at DESC, id``);
- one tag's: the tags table's primary key (``tag, number``), then each session by its number,
  the tag's sessions sorted (only they are read).

``updated_after`` and ``cursor`` bound the same index range, ``limit`` stops the walk.

A prune or a delete empties whole sessions as ``clear()`` does (messages, meta, tags, info;
the generation bumped, so every instance's cache starts over), at most
:data:`~aniki.sessions._catalog.PRUNE_BATCH` per write transaction: each session goes whole,
and no lock is held long. The sessions of a batch are chosen inside its transaction, so a
session written meanwhile is either written before (and no longer old) or after (a new
conversation). The row keeping its id and number stays, as after ``clear()``: another
instance may still hold the number, and must never write into a block given to another id.
"""

from __future__ import annotations

from datetime import datetime

from .._catalog import PRUNE_BATCH, Listing, timestamp
from ..base import SessionInfo
from ._db import Database, empty
from ._info import info_of
from ._sql import INFO_COLUMNS

__all__ = ["list_infos", "listing_query", "removal_query", "remove_sessions"]

_COLUMNS = ", ".join(f"s.{column}" for column in INFO_COLUMNS)
_BY_TAG = (
    # CROSS JOIN keeps the tag's rows as the outer loop: the planner may not walk every
    # session in time order instead, testing each for the tag.
    f"SELECT {_COLUMNS} FROM aniki_session_tags AS t CROSS JOIN aniki_sessions AS s"
    " ON s.number = t.number WHERE t.tag = ? AND s.updated_at IS NOT NULL"
)
_ALL = f"SELECT {_COLUMNS} FROM aniki_sessions AS s WHERE s.updated_at IS NOT NULL"
_CHOSEN = "SELECT number, id, generation FROM aniki_sessions WHERE "


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
        sql += " AND s.updated_at > ?"
        values.append(timestamp(listing.updated_after))
    if listing.cursor is not None:
        when, ident = listing.cursor
        # Strictly after (when, ident) in (updated_at DESC, id) order; the first term bounds
        # the index range.
        sql += " AND s.updated_at <= ? AND (s.updated_at < ? OR s.id > ?)"
        values += [timestamp(when), timestamp(when), ident]
    sql += " ORDER BY s.updated_at DESC, s.id"
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
        where.append("owner = ?")
        values.append(owner)
    if cutoff is not None:
        where.append("updated_at < ?")
        values.append(timestamp(cutoff))
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
