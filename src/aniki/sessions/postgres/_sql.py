"""The tables of the PostgreSQL sessions and every statement over them, as SQL text.

The tables, for ``table="aniki_messages"`` (names are quoted, so used exactly as given)::

    aniki_messages           seq (identity: the order), session_id, message (JSON text), created_at
    aniki_messages_sessions  session_id, generation (identity: new after every clear or
                             undo), message_count, updated_at, created_at, title, owner,
                             tags (text[]); a row from the session's first write (an
                             append, set_info, a fork into it) until a clear, prune or delete
    aniki_messages_meta      session_id, key, value (JSON text): derived state
    aniki_messages_blobs     hash (SHA-256 of the bytes, hex), data (bytea): each attachment's
                             bytes once, named by the messages' records (see ``_blobs``)
    aniki_messages_blob_refs session_id, seq, hash: one row per message and blob it names
    aniki_messages_schema    version: the layout version of the tables

The tables and their indexes are made (and an older layout brought up to date) by
``_schema``; the statements of info, listing and retention are in ``_catalog``.

Messages are ``text`` holding the JSON that :func:`~aniki.sessions._codec.encode_message` writes,
which escapes NUL (PostgreSQL ``text`` and ``jsonb`` cannot hold one), so every message round-trips
exactly.

Table names are checked (:func:`check_table`) and always quoted; values are always parameters.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from ...errors import UserError

__all__ = ["MAX_TABLE_LENGTH", "Statements", "check_table", "render", "statements"]

MAX_TABLE_LENGTH = 48
"""Longest table name: PostgreSQL cuts names at 63 bytes, and aniki adds suffixes to it."""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def check_table(table: object) -> str:
    """``table`` when it is a valid ``name`` or ``schema.name``, else :class:`~aniki.UserError`."""
    parts = table.split(".") if isinstance(table, str) else []
    if (
        not 1 <= len(parts) <= 2
        or not all(_IDENTIFIER.match(part) for part in parts)
        or len(parts[-1]) > MAX_TABLE_LENGTH
        or len(parts[0]) > 63
    ):
        raise UserError(
            f"invalid table name {table!r}: use ASCII letters, digits and underscores, not "
            f"starting with a digit, at most {MAX_TABLE_LENGTH} characters, optionally after "
            "a schema name and a dot (myschema.aniki_messages)"
        )
    return str(table)


@dataclass(frozen=True, slots=True)
class Statements:
    """Every statement of one table family, rendered once."""

    regclass_names: dict[str, Any]
    append: bytes
    append_read: bytes
    append_tail: bytes
    append_one: bytes
    append_read_one: bytes
    append_tail_one: bytes
    append_after: bytes
    append_read_after: bytes
    append_tail_after: bytes
    read: bytes
    tail: bytes
    clear: tuple[bytes, ...]
    get_meta: bytes
    set_meta: bytes
    delete_meta: bytes
    swap_meta: bytes
    swap_in_meta: bytes
    swap_out_meta: bytes
    lock_session: bytes
    share_session: bytes
    claim_session: bytes
    rows_before: bytes
    copy_messages: bytes
    copy_meta: bytes
    cut: bytes
    guarded: dict[bytes, bytes]
    """For each append without ``after``, its guarded variant (:func:`_guarded`)."""


# The CTEs of an append; {placeholders} are the quoted table names.
_APPEND = (
    "WITH s AS ("
    " INSERT INTO {sessions} AS s (session_id, message_count, updated_at)"
    " VALUES (%(sid)s, %(n)s, now())"
    " ON CONFLICT (session_id) DO UPDATE"
    " SET message_count = s.message_count + EXCLUDED.message_count,"
    " updated_at = greatest(s.updated_at, EXCLUDED.updated_at)"
    " RETURNING generation, message_count"
    "), m AS ("
    " INSERT INTO {messages} (session_id, message)"
    " SELECT %(sid)s, batch.record FROM s,"
    " unnest(%(records)b::text[]) WITH ORDINALITY AS batch(record, position)"
    " ORDER BY batch.position"
    " RETURNING seq"
    ")"
)

# A batch of one message (a user's message, most replies) as a plain parameter: the array,
# its unnesting and the sort cost the server a sixth of the statement (measured: 420 against
# 360 us per append on one connection).
_BATCH = (
    " SELECT %(sid)s, batch.record FROM s,"
    " unnest(%(records)b::text[]) WITH ORDINALITY AS batch(record, position)"
    " ORDER BY batch.position"
)
_ONE = " SELECT %(sid)s, %(record)s FROM s"


# Under a run's turn guard (aniki.sessions._guard), a later append lands only while the
# session's generation is still %(expect)s: the upsert of its row becomes an UPDATE that
# holds only then (a clear deletes the row, an undo changes the generation), so no row back
# means nothing was written, and the check costs no transaction of its own.
_UPSERT = _APPEND[len("WITH s AS (") : _APPEND.index("), m AS (")]
_GUARDED_UPDATE = (
    " UPDATE {sessions} AS s SET message_count = s.message_count + %(n)s,"
    " updated_at = greatest(s.updated_at, now())"
    " WHERE s.session_id = %(sid)s AND s.generation = %(expect)s"
    " RETURNING generation, message_count"
)


def _guarded(text: str) -> str:
    assert text.count(_UPSERT) == 1
    return text.replace(_UPSERT, _GUARDED_UPDATE)


def _for_one(text: str) -> str:
    assert _BATCH in text
    return text.replace(_BATCH, _ONE)


# An append's CTEs, the session's row as the statement's snapshot has it, and a head of the
# columns every row returned carries: generation, count and last seq after the append, the
# generation and count before it; the statement adds seq and message.
_APPEND_THEN = (
    _APPEND.replace(
        "WITH s AS (",
        "WITH before AS (SELECT generation, message_count FROM"
        " {sessions} WHERE session_id = %(sid)s), s AS (",
        1,
    )
    + " SELECT s.generation, s.message_count, (SELECT max(seq) FROM m),"
    " (SELECT generation FROM before), (SELECT message_count FROM before), r.seq, r.message"
    " FROM s"
)


# An append that lands only after the message whose id is %(follows)s (NULL: onto a session
# holding none), checked in the statement itself (an encrypted session's chain needs it): the
# session's row as the snapshot had it (`before`) and that snapshot's last message, then an
# UPDATE of the row that holds only while the row is still as the snapshot had it (the row
# lock makes it wait for a racing append, undo or clear, and then it compares the new row) or,
# onto an empty session, while it still counts no message; when the snapshot had no row, an
# INSERT of it that, finding one made since, adds to it only if it counts no message. No row
# back: another message is last, and nothing was written. (The id is read through json, whose
# ->> refuses a record holding an escaped NUL: the escape is made another one first.)
_BEFORE = "before AS (SELECT generation, message_count FROM {sessions} WHERE session_id = %(sid)s)"
_FOLLOWS = (
    "last AS (SELECT replace(message, '\\u0000', '\\u0001')::json->>'id' AS id"
    " FROM {messages} WHERE session_id = %(sid)s ORDER BY seq DESC LIMIT 1),"
    " u AS (UPDATE {sessions} AS s SET message_count = s.message_count + %(n)s,"
    " updated_at = greatest(s.updated_at, now()) WHERE s.session_id = %(sid)s"
    " AND CASE WHEN %(follows)s::text IS NULL THEN s.message_count = 0"
    " ELSE s.generation = (SELECT generation FROM before)"
    " AND s.message_count = (SELECT message_count FROM before)"
    " AND (SELECT id FROM last) = %(follows)s END RETURNING s.generation, s.message_count),"
    " i AS (INSERT INTO {sessions} AS s (session_id, message_count, updated_at)"
    " SELECT %(sid)s, %(n)s, now() WHERE %(follows)s::text IS NULL"
    " AND NOT EXISTS (SELECT FROM before)"
    " ON CONFLICT (session_id) DO UPDATE SET message_count = EXCLUDED.message_count,"
    " updated_at = greatest(s.updated_at, EXCLUDED.updated_at) WHERE s.message_count = 0"
    " RETURNING generation, message_count),"
    " s AS (SELECT generation, message_count FROM u UNION ALL SELECT generation, message_count"
    " FROM i"
)


def _after(text: str) -> str:
    """An append statement (``_APPEND`` or ``_APPEND_THEN`` and what follows) made to land
    only after the message %(follows)s names."""
    head, upsert = "WITH s AS (", " RETURNING generation, message_count), m AS ("
    if text.startswith("WITH before AS ("):
        head = "WITH " + _BEFORE + ", s AS ("
    assert text.startswith(head) and upsert in text
    rest = text[text.index(upsert) + len(upsert) - len("), m AS (") :]
    return "WITH " + _BEFORE + ", " + _FOLLOWS + rest


_SUFFIXES = {
    "messages": "",
    "sessions": "_sessions",
    "meta": "_meta",
    "schema": "_schema",
    "blobs": "_blobs",
    "blob_refs": "_blob_refs",
}
_INDEXES = {
    "index": "_by_session",
    "by_time": "_by_time",
    "by_owner": "_by_owner",
    "by_tag": "_by_tag",
    "refs_by_hash": "_refs_by_hash",
}


def regclass_names(table: str) -> dict[str, str]:
    """The quoted, schema-qualified names of ``table``'s tables and indexes (for
    ``to_regclass``), by the keys the statements use."""
    *schema, base = table.split(".")
    # check_table allows only letters, digits and underscores: quoting needs no escapes.
    return {
        key: ".".join(f'"{part}"' for part in [*schema, base + suffix])
        for key, suffix in {**_SUFFIXES, **_INDEXES}.items()
    }


@functools.lru_cache(maxsize=64)
def _names(table: str) -> dict[str, Any]:
    from psycopg import sql

    base = table.split(".")[-1]
    names = {key: sql.SQL(name) for key, name in regclass_names(table).items()}
    # An index is made in its table's schema: CREATE INDEX takes its bare name.
    names.update({key: sql.SQL(f'"{base}{suffix}"') for key, suffix in _INDEXES.items()})
    return names


@functools.lru_cache(maxsize=512)
def render(table: str, text: str) -> bytes:
    """``text`` with ``{messages}``, ``{sessions}``, ``{meta}``, ``{schema}``, ``{blobs}``,
    ``{blob_refs}`` (and the index names) made ``table``'s quoted names. Rendered once:
    psycopg then finds each statement in its cache of converted queries."""
    from psycopg import sql

    return sql.SQL(text).format(**_names(table)).as_bytes(None)


@functools.lru_cache(maxsize=64)
def statements(table: str) -> Statements:
    """The statements for ``table`` (already checked by :func:`check_table`)."""

    def q(text: str) -> bytes:
        return render(table, text)

    append = _APPEND + " SELECT s.generation, s.message_count, (SELECT max(seq) FROM m) FROM s"
    # An append, then the rows a read needs, in one statement. Its parts all read the one
    # snapshot taken when it started, which lacks the batch (the caller holds it) and any
    # append committed while the upsert waited for the row lock: `before` (the row in that
    # snapshot) tells whether one was, and then the caller reads again.
    append_read = (
        _APPEND_THEN + " LEFT JOIN LATERAL (SELECT seq, message FROM {messages}"
        " WHERE session_id = %(sid)s"
        " AND seq > CASE WHEN s.generation = %(gen)s THEN %(after)s ELSE 0 END) AS r ON true"
        " ORDER BY r.seq"
    )
    append_tail = (
        _APPEND_THEN + " LEFT JOIN LATERAL (SELECT seq, message FROM {messages}"
        " WHERE session_id = %(sid)s ORDER BY seq DESC LIMIT %(limit)s) AS r ON true"
        " ORDER BY r.seq DESC"
    )

    plain = {
        "append": append,
        "append_one": _for_one(append),
        "append_read": append_read,
        "append_read_one": _for_one(append_read),
        "append_tail": append_tail,
        "append_tail_one": _for_one(append_tail),
    }
    return Statements(
        guarded={q(text): q(_guarded(text)) for text in plain.values()},
        regclass_names=regclass_names(table),
        # One statement, so one round trip and, on an autocommit connection, its own
        # transaction. The messages' insert reads the session's row from the upsert, so the
        # upsert runs first and locks that row until commit: appends to one session are
        # serialized and take their seq values in commit order.
        append=q(append),
        append_one=q(_for_one(append)),
        append_read=q(append_read),
        append_read_one=q(_for_one(append_read)),
        append_tail=q(append_tail),
        append_tail_one=q(_for_one(append_tail)),
        append_after=q(_after(append)),
        append_read_after=q(_after(append_read)),
        append_tail_after=q(_after(append_tail)),
        read=q(
            "SELECT s.generation, m.seq, m.message FROM {sessions} AS s"
            " LEFT JOIN {messages} AS m ON m.session_id = s.session_id"
            " AND m.seq > CASE WHEN s.generation = %(gen)s THEN %(after)s ELSE 0 END"
            " WHERE s.session_id = %(sid)s ORDER BY m.seq"
        ),
        # The most recent rows only, newest first (the (session_id, seq) index serves it).
        tail=q(
            "SELECT m.message FROM {messages} AS m WHERE m.session_id = %(sid)s"
            " ORDER BY m.seq DESC LIMIT %(limit)s"
        ),
        # The session's row goes first: deleting it waits for an append in flight, and
        # holds back new ones until this commits, so no message outlives the clear.
        clear=(
            q("DELETE FROM {sessions} WHERE session_id = %(sid)s"),
            q("DELETE FROM {messages} WHERE session_id = %(sid)s"),
            q("DELETE FROM {meta} WHERE session_id = %(sid)s"),
        ),
        get_meta=q("SELECT value FROM {meta} WHERE session_id = %(sid)s AND key = %(key)s"),
        set_meta=q(
            "INSERT INTO {meta} (session_id, key, value) VALUES (%(sid)s, %(key)s, %(value)s)"
            " ON CONFLICT (session_id, key) DO UPDATE SET value = EXCLUDED.value"
        ),
        delete_meta=q("DELETE FROM {meta} WHERE session_id = %(sid)s AND key = %(key)s"),
        # The compare-and-swap of a meta value, one statement each: a row back means it was
        # done. Replace a value, set an absent one, delete a value.
        swap_meta=q(
            "UPDATE {meta} SET value = %(value)s WHERE session_id = %(sid)s AND key = %(key)s"
            " AND value = %(expected)s RETURNING 1"
        ),
        swap_in_meta=q(
            "INSERT INTO {meta} (session_id, key, value) VALUES (%(sid)s, %(key)s, %(value)s)"
            " ON CONFLICT (session_id, key) DO NOTHING RETURNING 1"
        ),
        swap_out_meta=q(
            "DELETE FROM {meta} WHERE session_id = %(sid)s AND key = %(key)s"
            " AND value = %(expected)s RETURNING 1"
        ),
        # The row locks of fork and undo (see _edits): an undo's conflicts with every other
        # lock; a fork's source is only read, so forks of one session may run together
        # while appends, clears and undos of it wait.
        lock_session=q(
            "SELECT message_count FROM {sessions} WHERE session_id = %(sid)s FOR UPDATE"
        ),
        share_session=q(
            "SELECT message_count FROM {sessions} WHERE session_id = %(sid)s FOR SHARE"
        ),
        # A fork's target, locked as an append locks it (made when absent, so two forks into
        # one new session meet here); the count it held before tells whether it is taken.
        claim_session=q(
            "INSERT INTO {sessions} AS s (session_id, message_count, updated_at)"
            " VALUES (%(sid)s, 0, now())"
            " ON CONFLICT (session_id) DO UPDATE SET updated_at = s.updated_at"
            " RETURNING message_count"
        ),
        # The newest rows before seq %(before)s, newest first: a page of a walk backwards.
        rows_before=q(
            "SELECT seq, message FROM {messages} WHERE session_id = %(sid)s"
            " AND seq < %(before)s ORDER BY seq DESC LIMIT %(limit)s"
        ),
        # A fork's messages, copied in order up to seq %(last)s (the record text carries the
        # ids and times; the new rows get new seqs), the target's count set to match, its
        # title, owner and tags the source's (none when it has no row), its times the fork's.
        copy_messages=q(
            "WITH copied AS ("
            " INSERT INTO {messages} (session_id, message, created_at)"
            " SELECT %(new)s, message, created_at FROM {messages}"
            " WHERE session_id = %(sid)s AND seq <= %(last)s ORDER BY seq"
            " RETURNING 1"
            ") UPDATE {sessions} AS t SET message_count = (SELECT count(*) FROM copied),"
            " created_at = now(), updated_at = greatest(t.updated_at, now()),"
            " title = f.title, owner = f.owner, tags = coalesce(f.tags, '{{}}')"
            " FROM (SELECT) AS one LEFT JOIN {sessions} AS f ON f.session_id = %(sid)s"
            " WHERE t.session_id = %(new)s"
        ),
        copy_meta=q(
            "INSERT INTO {meta} (session_id, key, value)"
            " SELECT %(new)s, key, value FROM {meta}"
            " WHERE session_id = %(sid)s AND key <> ALL(%(skipped)s)"
        ),
        # An undo: the rows from seq %(start)s on go, and the session takes a new generation
        # so that every instance's cache starts over (as after a clear).
        cut=q(
            "WITH gone AS ("
            " DELETE FROM {messages} WHERE session_id = %(sid)s AND seq >= %(start)s"
            " RETURNING 1"
            ") UPDATE {sessions} SET generation = DEFAULT,"
            " message_count = message_count - (SELECT count(*) FROM gone),"
            " updated_at = greatest(updated_at, now())"
            " WHERE session_id = %(sid)s RETURNING message_count"
        ),
    )
