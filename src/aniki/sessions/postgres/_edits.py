"""The flows of ``fork`` and ``undo`` on the PostgreSQL tables, without I/O.

What they mean is shared by every store (``sessions/_edits.py``); this is how the tables do it.
Each flow runs as one transaction (see ``_drive``) and begins by locking the session's row,
the row an append's upsert locks first (see ``_core``): while it is held, no append, clear or
undo of that session commits, so the statements that follow, each reading a fresh snapshot,
all see one history. A fork's source is locked for reading (``FOR SHARE``), its target as an
append would lock it (the row is made when absent, so two forks into one id meet there); an
undo takes ``FOR UPDATE``. The last turn, or the message a fork stops at, is found by reading
the newest records back a page at a time and decoding them here, so a damaged record is a
:class:`~aniki.CorruptStoreError` as on any read, and a record's text never has to pass as
``jsonb`` (which refuses the ``\\u0000`` a message may hold). The blobs those records name
are read with them; with the session's row held, a missing one is damage.

A fork links its copies to the blobs their originals name, and an undo drops the links of
the messages it removes and each blob no other message names (see ``_blobs``).

A session's row exists from its first write until a clear (or a prune) removes it, and holds
its info and times: a fork gives its target the source's title, owner and tags and the fork's
time; an undo moves ``updated_at`` and keeps the row, emptied or not.
"""

from __future__ import annotations

from collections.abc import Callable

from ...messages import Message
from .._edits import FORK_SKIPPED_META, forked_count, last_turn_start, taken
from ._blobs import Blobs, copy_links, held, unlink
from ._flow import Flow, Query
from ._sql import Statements

__all__ = ["fork", "undo"]

FIRST_PAGE = 32
"""Records read by the first step of a walk back; a turn seldom holds more."""

LAST_PAGE = 4096
"""The most records one step reads: each step doubles the last, up to this."""

_NO_SEQ = 2**63 - 1
"""Above every ``seq`` (a bigint): a walk back starts below it, a whole fork copies below it."""

_SKIPPED = sorted(FORK_SKIPPED_META)


def fork(
    sql: Statements, blobs: Blobs, source: str, target: str, upto: str | None, *, store: str
) -> Flow[None]:
    """Copy session ``source``'s messages (through the one whose id is ``upto``; all when
    ``None``), with their links to the blobs they name, and its meta, less the skipped keys,
    into session ``target``, which must hold no messages; its meta is replaced. ``target``
    is already checked (``fork_target``)."""
    # Two rows, locked in the order of their ids: forks between the same two sessions,
    # either way round, take them in the same order and never wait for each other forever.
    count = held = 0
    for sid in sorted((source, target)):
        if sid == source:
            rows = yield Query(sql.share_session, {"sid": source})
            count = rows[0][0] if rows else 0
        else:
            ((held,),) = yield Query(sql.claim_session, {"sid": target})
    if held:
        raise taken(target)  # the transaction rolls back: nothing was written
    last = _NO_SEQ
    if upto is not None:
        seqs: list[int] = []
        messages: list[Message] = []
        if count:
            seqs, messages = yield from _back_to(
                sql, blobs, source, lambda m: m.id == upto, store=store
            )
        last = seqs[forked_count(messages, upto, source) - 1]  # a suffix: its last match is it
    yield Query(sql.copy_messages, {"sid": source, "new": target, "last": last})
    yield from copy_links(blobs, source, target, last)
    yield Query(sql.clear[2], {"sid": target})  # the target's old meta, if any
    yield Query(sql.copy_meta, {"sid": source, "new": target, "skipped": _SKIPPED})


def undo(sql: Statements, blobs: Blobs, sid: str, *, store: str) -> Flow[tuple[Message, ...]]:
    """Delete session ``sid``'s last turn (its last user message and all after it, and the
    blobs no other message names) and give the session a new generation; the messages
    removed, oldest first."""
    if not (yield Query(sql.lock_session, {"sid": sid})):
        return ()  # no row: no messages
    seqs, messages = yield from _back_to(sql, blobs, sid, lambda m: m.role == "user", store=store)
    start = last_turn_start(messages)  # on a suffix: the last user message of the whole
    if start == len(messages):
        return ()
    yield from unlink(blobs, blobs.cut, {"sid": sid, "start": seqs[start]})
    yield Query(sql.cut, {"sid": sid, "start": seqs[start]})
    return tuple(messages[start:])


def _back_to(
    sql: Statements, blobs: Blobs, sid: str, found: Callable[[Message], bool], *, store: str
) -> Flow[tuple[list[int], list[Message]]]:
    """The newest records of ``sid`` as seqs and messages, oldest first: read back a page at
    a time, through the first page holding a message ``found`` accepts, or to the start."""
    seqs: list[int] = []
    messages: list[Message] = []  # both newest first until the end
    before, limit = _NO_SEQ, FIRST_PAGE
    while True:
        rows = yield Query(sql.rows_before, {"sid": sid, "before": before, "limit": limit})
        page = yield from held(blobs, [text for _, text in rows], store=store)
        seqs.extend(seq for seq, _ in rows)
        messages.extend(page)
        if len(rows) < limit or any(found(message) for message in page):
            seqs.reverse()
            messages.reverse()
            return seqs, messages
        before, limit = rows[-1][0], min(2 * limit, LAST_PAGE)
