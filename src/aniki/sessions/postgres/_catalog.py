"""The flows of a conversation's info, the store's listing, and retention on the PostgreSQL
tables, without I/O.

What they mean is shared by every store (``sessions/_catalog.py``); this is how the tables
do it. A session's info lives in its row of the sessions table (title, owner, tags,
``created_at``, ``updated_at`` and the message count), which every write keeps in the same
statement or transaction as the write itself (see ``_sql``), so neither an info nor a listing
ever counts messages.

- The listing is one statement over the sessions table, newest ``updated_at`` first and ids
  by code point, served by an index: ``by_time`` (all sessions), ``by_owner`` or, for a tag,
  the GIN index over ``tags``. A page continues after the cursor's ``(updated_at, id)``
  (keyset paging: no ``OFFSET``).
- A prune or a delete works in batches of at most :data:`~aniki.sessions._catalog.PRUNE_BATCH`
  sessions, each batch one transaction: the first statement locks the rows of the sessions
  it will remove (``FOR UPDATE SKIP LOCKED``: a session a writer holds is left for the next
  prune, and the prune never waits on a writer, so they cannot deadlock); the next drop the
  links of their attachments and each blob no other session names (see ``_blobs``); the last,
  with a snapshot taken once those locks are held, removes those sessions' messages, meta
  and rows. Every write to a session takes its row's lock first, so a removed session is
  removed whole: an append waiting for the lock then makes the session anew.
"""

from __future__ import annotations

import functools
from datetime import datetime, timezone
from typing import Any

from .._catalog import KEEP, PRUNE_BATCH, InfoChange, Listing
from ..base import SessionInfo
from ._blobs import blob_statements, unlink
from ._flow import Flow, Query
from ._sql import render

__all__ = ["delete_sessions", "info", "list_sessions", "prune", "set_info"]

_COLUMNS = "session_id, message_count, updated_at, title, owner, tags, created_at"

_INFO = f"SELECT {_COLUMNS} FROM {{sessions}} WHERE session_id = %(sid)s"

# A keyword left out (KEEP) keeps the field; a new row gets the given values (None: none).
# The first write of a session sets created_at (the column's default).
_SET_INFO = (
    "INSERT INTO {sessions} AS s (session_id, message_count, updated_at, title, owner, tags)"
    " VALUES (%(sid)s, 0, now(), %(title)s, %(owner)s, coalesce(%(tags)s::text[], '{{}}'))"
    " ON CONFLICT (session_id) DO UPDATE SET"
    " title = CASE WHEN %(keep_title)s THEN s.title ELSE EXCLUDED.title END,"
    " owner = CASE WHEN %(keep_owner)s THEN s.owner ELSE EXCLUDED.owner END,"
    " tags = CASE WHEN %(keep_tags)s THEN s.tags ELSE EXCLUDED.tags END,"
    " updated_at = greatest(s.updated_at, EXCLUDED.updated_at)"
)

# The filters of a listing, each written as the index it needs expects it (the tag's second
# clause is the GIN index's predicate, repeated so the planner may use it).
_OWNER = " AND owner = %(owner)s"
_TAG = " AND tags @> ARRAY[%(tag)s]::text[] AND tags <> '{{}}'"
_AFTER = " AND updated_at > %(after)s"
_CURSOR = (
    ' AND updated_at <= %(when)s AND (updated_at < %(when)s OR session_id COLLATE "C" > %(ident)s)'
)

# The sessions of one batch of a prune (or, without the time, a delete), oldest first.
_DOOMED = (
    "SELECT session_id FROM {sessions} WHERE {where}"
    " ORDER BY updated_at LIMIT %(batch)s FOR UPDATE SKIP LOCKED"
)
_REMOVE = (
    "WITH m AS (DELETE FROM {messages} WHERE session_id = ANY(%(ids)s)),"
    " x AS (DELETE FROM {meta} WHERE session_id = ANY(%(ids)s))"
    " DELETE FROM {sessions} WHERE session_id = ANY(%(ids)s)"
)


@functools.lru_cache(maxsize=256)
def _listing(table: str, owner: bool, tag: bool, after: bool, cursor: bool) -> bytes:
    """The listing statement with the filters asked for (one of 16, each rendered once)."""
    where = (_OWNER if owner else "") + (_TAG if tag else "")
    where += (_AFTER if after else "") + (_CURSOR if cursor else "")
    return render(
        table,
        f"SELECT {_COLUMNS} FROM {{sessions}} WHERE true{where}"
        ' ORDER BY updated_at DESC, session_id COLLATE "C" LIMIT %(limit)s',
    )


@functools.lru_cache(maxsize=256)
def _doomed(table: str, owner: bool, before: bool) -> bytes:
    clauses = ["owner = %(owner)s"] if owner else []
    clauses += ["updated_at < %(cutoff)s"] if before else []
    return render(table, _DOOMED.replace("{where}", " AND ".join(clauses)))


def _info(row: tuple[Any, ...]) -> SessionInfo:
    sid, count, updated, title, owner, tags, created = row
    return SessionInfo(
        sid,
        int(count),
        updated.astimezone(timezone.utc),
        title,
        owner,
        tuple(tags),
        created.astimezone(timezone.utc),
    )


def info(table: str, session_id: str) -> Flow[SessionInfo]:
    """Session ``session_id``'s info: a session never written (or cleared) has none."""
    rows = yield Query(render(table, _INFO), {"sid": session_id}, alone=True)
    return _info(rows[0]) if rows else SessionInfo(session_id, 0, None)


def set_info(table: str, session_id: str, change: InfoChange) -> Flow[None]:
    """Apply ``change`` (checked) to session ``session_id``'s info: one statement."""
    params = {
        "sid": session_id,
        "title": None if change.title is KEEP else change.title,
        "owner": None if change.owner is KEEP else change.owner,
        "tags": None if change.tags is KEEP else list(change.tags),
        "keep_title": change.title is KEEP,
        "keep_owner": change.owner is KEEP,
        "keep_tags": change.tags is KEEP,
    }
    yield Query(render(table, _SET_INFO), params, alone=True)


def list_sessions(table: str, listing: Listing) -> Flow[list[SessionInfo]]:
    """The page of the store's sessions ``listing`` (checked) asks for: one statement."""
    params: dict[str, Any] = {"limit": listing.limit}
    if listing.owner is not None:
        params["owner"] = listing.owner
    if listing.tag is not None:
        params["tag"] = listing.tag
    if listing.updated_after is not None:
        params["after"] = listing.updated_after
    if listing.cursor is not None:
        params["when"], params["ident"] = listing.cursor
    statement = _listing(
        table,
        listing.owner is not None,
        listing.tag is not None,
        listing.updated_after is not None,
        listing.cursor is not None,
    )
    rows = yield Query(statement, params, alone=True)
    return [_info(row) for row in rows]


def prune(table: str, cutoff: datetime, owner: str | None) -> Flow[int]:
    """Remove the sessions (of ``owner``) last written before ``cutoff``, whole, in batches
    of at most ``PRUNE_BATCH``, one transaction each; how many went."""
    params: dict[str, Any] = {"cutoff": cutoff, "owner": owner}
    return _remove(table, _doomed(table, owner is not None, True), params)


def delete_sessions(table: str, owner: str) -> Flow[int]:
    """Remove every session of ``owner`` as :func:`prune` does; how many went."""
    return _remove(table, _doomed(table, True, False), {"owner": owner})


def _remove(table: str, doomed: bytes, params: dict[str, Any]) -> Flow[int]:
    removed = 0
    remove = render(table, _REMOVE)
    blobs = blob_statements(table)
    while True:
        rows = yield Query(doomed, {**params, "batch": PRUNE_BATCH})
        ids = [sid for (sid,) in rows]
        if ids:
            yield from unlink(blobs, blobs.drop, {"ids": ids})
            yield Query(remove, {"ids": ids}, commits=True)
            removed += len(ids)
        if len(ids) < PRUNE_BATCH:
            return removed
