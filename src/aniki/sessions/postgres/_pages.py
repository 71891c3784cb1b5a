"""A page of a PostgreSQL session (:func:`page`): one statement, so one snapshot.

The total is the session row's ``message_count`` (every write keeps it equal to the session's
rows, in the same transaction). The page is read over the ``(session_id, seq)`` index with
``OFFSET``, from whichever end is nearer: the last page costs as little as the first, the
middle one of a long history a walk over half its index. (``seq`` values are shared by every
session of the table, so a session's are not contiguous and cannot be computed.) The blobs
the page's records name are read next, as a read of the history reads them (see ``_blobs``);
a page that names its attachments (see :func:`~aniki.sessions._pages.read_named_page`) reads
none.
"""

from __future__ import annotations

import functools

from ...messages import Message
from .._blobs import MARK, described
from .._codec import decode_message
from .._pages import Page, named_page, naming, span
from ._blobs import Blobs, again, decoded, load
from ._flow import Flow, Query
from ._sql import Statements

__all__ = ["page"]

# %(low)s and %(high)s: start and start + limit as _pages.span gives them (from the end when
# low is negative). Of the two branches, the one whose one-time filter holds is run: the
# other reads no row. No session row (never written, or cleared): no row back.
_PAGE = (
    "WITH b AS (SELECT message_count AS total,"
    " least(greatest(CASE WHEN %(low)s::bigint < 0 THEN message_count ELSE 0 END"
    " + %(low)s::bigint, 0), message_count) AS first,"
    " least(greatest(CASE WHEN %(low)s::bigint < 0 THEN message_count ELSE 0 END"
    " + %(high)s::bigint, 0), message_count) AS stop"
    " FROM {sessions} WHERE session_id = %(sid)s)"
    " SELECT b.total, b.first, r.seq, r.message FROM b LEFT JOIN LATERAL ("
    "(SELECT seq, message FROM {messages} WHERE session_id = %(sid)s"
    " AND b.first < b.total - b.stop ORDER BY seq OFFSET b.first LIMIT b.stop - b.first)"
    " UNION ALL "
    "(SELECT seq, message FROM {messages} WHERE session_id = %(sid)s"
    " AND b.first >= b.total - b.stop ORDER BY seq DESC"
    " OFFSET b.total - b.stop LIMIT b.stop - b.first)"
    ") AS r ON true ORDER BY r.seq"
)


@functools.lru_cache(maxsize=64)
def _statement(messages: str, sessions: str) -> bytes:
    """The page statement over these tables (names quoted as ``_sql`` quotes them)."""
    from psycopg import sql

    return (
        sql.SQL(_PAGE).format(messages=sql.SQL(messages), sessions=sql.SQL(sessions)).as_bytes(None)
    )


def page(
    statements: Statements, blobs: Blobs, session_id: str, start: int, limit: int, *, store: str
) -> Flow[Page]:
    """Messages ``start`` to ``start + limit`` (see :func:`~aniki.sessions._pages.read_page`),
    with the blobs they name (read in one more statement when one does)."""
    names = statements.regclass_names
    low, high = span(start, limit)
    params = {"sid": session_id, "low": low, "high": high}
    statement = _statement(names["messages"], names["sessions"])
    rows = yield Query(statement, params, alone=True)
    texts = [text for _, _, seq, text in rows if seq is not None]
    if naming():
        named = [described(text, store=store) for text in texts]
        return named_page(int(rows[0][0]), int(rows[0][1]), named) if rows else named_page(0, 0, ())
    messages: list[Message] | None
    if not any(MARK in text for text in texts):  # text only: no blob to read
        messages = [decode_message(text, store=store) for text in texts]
    else:
        messages = yield from load(blobs, texts, store=store)
    if messages is None:  # a blob went between the two statements: both again, at once
        rows, found = yield from again(blobs, statement, params, 4)
        texts = [text for _, _, seq, text in rows if seq is not None]
        messages = decoded(texts, found, store=store)
    if not rows:
        return Page(0, 0, ())
    return Page(int(rows[0][0]), int(rows[0][1]), tuple(messages))
