"""Attachments of a PostgreSQL store, kept apart from the messages that name them (the
records and their references are :mod:`aniki.sessions._blobs`'s), as flows (see ``_flow``).

Two tables beside the messages (made by ``_schema``):

- ``<table>_blobs``: each attachment's bytes once, by the SHA-256 of its bytes (so the same
  image sent ten times is stored once);
- ``<table>_blob_refs``: one row per message (session and ``seq``) and hash it names,
  written in the transaction that stores the message. A removal of messages (a clear, an
  undo, an import, a prune or a delete) drops the links in its range and deletes each blob
  no other link names: a blob goes with the last message that names it. A fork links its
  copies, so a blob outlives the session it was first sent in.

A message without inline bytes (nearly every one) costs nothing here: its append stays one
statement, and a read fetches blobs only when a record it read names one (one substring test
per row tells).

Locks. An append stores its blobs after its own statement, which locked the session's row:
``INSERT ... ON CONFLICT DO UPDATE ... WHERE false`` writes a blob that is absent and locks
one that is present, in hash order, without rewriting it. A removal, holding the rows of the
sessions it removes, drops their links, then locks the blobs they named (in hash order), and
only then, in a statement whose snapshot is taken once those locks are held, deletes those
that no link names. An append racing the removal either holds its blob's lock first (the
removal then sees its link, committed) or comes after (it writes the blob anew). Each takes
a session's row before any blob, so the two never wait for each other in a cycle.

Reads: the rows are read first and the blobs they name next, two statements; a blob is never
changed once written (its key is its content's hash), so the pair is as if read at once,
unless the messages were removed in between and took their blobs with them. Then both are
read again in one statement, so as of one snapshot (:func:`again`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ...messages import Message
from .._blobs import MARK, join, named, refs, split_batch
from .._codec import decode_message, encode_message
from ._flow import Flow, Query
from ._sql import render

__all__ = [
    "NO_BLOBS",
    "Blobs",
    "again",
    "blob_statements",
    "copy_links",
    "decoded",
    "held",
    "load",
    "put",
    "records_of",
    "unlink",
]

NO_BLOBS: Mapping[str, bytes] = MappingProxyType({})
"""The blobs of records that name none."""


@dataclass(frozen=True, slots=True)
class Blobs:
    """The blob statements of one table family, rendered once."""

    table: str
    put: bytes
    fetch: bytes
    clear: bytes
    cut: bytes
    drop: bytes
    orphans: bytes
    copy: bytes


# The blobs an append names, written when absent and locked (in hash order) when present,
# and a link from each of its messages (the last %(n)s of the session up to seq %(last)s:
# under the session's row lock, which the append took, those are its own) to each hash its
# record names, by position in the batch.
_PUT = (
    "WITH b AS (INSERT INTO {blobs} AS b (hash, data)"
    " SELECT x.hash, x.data FROM unnest(%(hashes)s::text[], %(data)b::bytea[]) AS x(hash, data)"
    " ORDER BY x.hash ON CONFLICT (hash) DO UPDATE SET data = EXCLUDED.data WHERE false),"
    " mine AS (SELECT seq, row_number() OVER (ORDER BY seq) AS position FROM"
    " (SELECT seq FROM {messages} WHERE session_id = %(sid)s AND seq <= %(last)s"
    " ORDER BY seq DESC LIMIT %(n)s) AS t)"
    " INSERT INTO {blob_refs} (session_id, seq, hash)"
    " SELECT %(sid)s, mine.seq, l.hash FROM mine"
    " JOIN unnest(%(positions)s::bigint[], %(linked)s::text[]) AS l(position, hash)"
    " USING (position) ON CONFLICT DO NOTHING"
)

# A removal's first step: drop the links of the messages %(where)s picks, and lock the blobs
# they named, in hash order; the hashes come back for the second step (_ORPHANS).
_UNLINK = (
    "WITH gone AS (DELETE FROM {blob_refs} WHERE {where} RETURNING hash){also}"
    " SELECT b.hash FROM {blobs} AS b WHERE b.hash IN (SELECT hash FROM gone)"
    " ORDER BY b.hash FOR UPDATE OF b"
)
_ORPHANS = (
    "DELETE FROM {blobs} AS b WHERE b.hash = ANY(%(keys)s)"
    " AND NOT EXISTS (SELECT FROM {blob_refs} AS r WHERE r.hash = b.hash)"
)

# A fork's links: the target's messages (it held none before) pair with the source's it
# copied by their order, and each copy names what its original names. Nothing is read when
# the copied range names no blob.
_COPY = (
    "INSERT INTO {blob_refs} (session_id, seq, hash) SELECT %(new)s, t.seq, r.hash FROM"
    " (SELECT seq, row_number() OVER (ORDER BY seq) AS n FROM {messages}"
    " WHERE session_id = %(sid)s AND seq <= %(last)s) AS s"
    " JOIN (SELECT seq, row_number() OVER (ORDER BY seq) AS n FROM {messages}"
    " WHERE session_id = %(new)s) AS t USING (n)"
    " JOIN {blob_refs} AS r ON r.session_id = %(sid)s AND r.seq = s.seq"
    " WHERE EXISTS (SELECT FROM {blob_refs} WHERE session_id = %(sid)s AND seq <= %(last)s)"
    " ON CONFLICT DO NOTHING"
)


def _unlink(where: str, also: str = "") -> str:
    return _UNLINK.replace("{where}", where).replace("{also}", also)


@functools.lru_cache(maxsize=64)
def blob_statements(table: str) -> Blobs:
    """The blob statements for ``table`` (already checked by ``check_table``)."""

    def q(text: str) -> bytes:
        return render(table, text)

    return Blobs(
        table=table,
        put=q(_PUT),
        fetch=q("SELECT hash, data FROM {blobs} WHERE hash = ANY(%(keys)s)"),
        # A clear's: the session's messages go in the same statement.
        clear=q(
            _unlink(
                "session_id = %(sid)s",
                ", m AS (DELETE FROM {messages} WHERE session_id = %(sid)s)",
            )
        ),
        cut=q(_unlink("session_id = %(sid)s AND seq >= %(start)s")),
        drop=q(_unlink("session_id = ANY(%(ids)s)")),
        orphans=q(_ORPHANS),
        copy=q(_COPY),
    )


def records_of(messages: Sequence[Message]) -> tuple[list[str], Mapping[str, bytes]]:
    """The records to store for ``messages`` and the blobs they name (attachment bytes kept
    apart, once per content); a batch without attachments costs one encoding per message."""
    for message in messages:
        if message.attachments:
            return split_batch(messages)
    return [encode_message(message) for message in messages], NO_BLOBS


def put(
    q: Blobs, sid: str, records: Sequence[str], blobs: Mapping[str, bytes], last: int
) -> Flow[None]:
    """Store ``blobs`` and link them to the records just appended to ``sid`` (the last of
    which took seq ``last``), in the append's transaction, after its statement."""
    positions: list[int] = []
    linked: list[str] = []
    for position, record in enumerate(records, 1):
        for key in refs(record):
            positions.append(position)
            linked.append(key)
    hashes = sorted(blobs)
    params = {
        "sid": sid,
        "last": last,
        "n": len(records),
        "hashes": hashes,
        "data": [blobs[key] for key in hashes],
        "positions": positions,
        "linked": linked,
    }
    yield Query(q.put, params)


def unlink(q: Blobs, statement: bytes, params: dict[str, Any]) -> Flow[None]:
    """A removal's links dropped with ``statement`` (``q.clear``, ``q.cut`` or ``q.drop``),
    then each blob they named that no other message names (see the module docstring).
    Inside the removal's transaction, which holds the rows of the sessions it removes."""
    rows = yield Query(statement, params)
    if rows:
        yield Query(q.orphans, {"keys": [key for (key,) in rows]})


def copy_links(q: Blobs, source: str, target: str, last: int) -> Flow[None]:
    """Link a fork's copies (``source``'s messages up to seq ``last``, just copied into
    ``target``) to the blobs their originals name."""
    yield Query(q.copy, {"sid": source, "new": target, "last": last})


def decoded(texts: Sequence[str], blobs: Mapping[str, bytes], *, store: str) -> list[Message]:
    """The messages ``texts`` hold, each attachment's bytes taken from ``blobs``;
    :class:`~aniki.CorruptStoreError` when a record names a blob that is missing."""
    return [
        join(text, blobs, store=store) if MARK in text else decode_message(text, store=store)
        for text in texts
    ]


def _fetch(q: Blobs, keys: list[str]) -> Flow[dict[str, bytes]]:
    rows = yield Query(q.fetch, {"keys": keys}, alone=True, binary=True)
    return {key: bytes(data) for key, data in rows}


def load(q: Blobs, texts: Sequence[str], *, store: str) -> Flow[list[Message] | None]:
    """The messages ``texts`` hold, with the blobs they name read in one more statement;
    ``None`` when one of those is gone (its messages were removed since the rows were read:
    read them again with :func:`again`)."""
    keys = named(texts)
    if not keys:
        return [decode_message(text, store=store) for text in texts]
    found = yield from _fetch(q, keys)
    if len(found) < len(keys):
        return None
    return decoded(texts, found, store=store)


def held(q: Blobs, texts: Sequence[str], *, store: str) -> Flow[list[Message]]:
    """:func:`load` of rows that cannot be removed meanwhile (their session's row is locked):
    a missing blob is damage, a :class:`~aniki.CorruptStoreError`."""
    keys = named(texts)
    found = (yield from _fetch(q, keys)) if keys else NO_BLOBS
    return decoded(texts, found, store=store)


@functools.lru_cache(maxsize=64)
def _again(table: str, statement: bytes, columns: int) -> bytes:
    nulls = ", ".join(["NULL"] * columns)
    rest = render(
        table,
        ") SELECT r.*, NULL::text, NULL::bytea FROM r UNION ALL"
        f" SELECT {nulls}, b.hash, b.data FROM {{blobs}} AS b WHERE b.hash IN"
        " (SELECT (regexp_matches(r.message, '\"blob\":\"([0-9a-f]{{64}})\"', 'g'))[1] FROM r)",
    )
    return b"WITH r AS MATERIALIZED (" + statement + rest


def again(
    q: Blobs, statement: bytes, params: dict[str, Any], columns: int
) -> Flow[tuple[list[tuple[Any, ...]], dict[str, bytes]]]:
    """The rows of ``statement`` (a read whose rows have ``columns`` columns, one of them
    ``message``) and the blobs they name, in one statement, so as of one snapshot: what a
    read does when a blob went between its two statements."""
    rows = yield Query(_again(q.table, statement, columns), params, alone=True, binary=True)
    kept: list[tuple[Any, ...]] = []
    found: dict[str, bytes] = {}
    for row in rows:
        if row[-1] is None:
            kept.append(row[:columns])
        else:
            found[row[-2]] = bytes(row[-1])
    return kept, found
