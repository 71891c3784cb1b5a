"""What ``PostgresSession`` and ``AsyncPostgresSession`` share, without I/O.

The tables, for ``table="aniki_messages"`` (names are quoted, so used exactly as given)::

    aniki_messages           seq (identity: the order), session_id, message (JSON text), created_at
    aniki_messages_sessions  session_id, generation (identity: new after every clear),
                             message_count, updated_at
    aniki_messages_meta      session_id, key, value (JSON text): derived state
    aniki_messages_schema    version: the layout version of the four tables

Messages are ``text`` holding the JSON that :func:`~aniki.sessions._codec.encode_message` writes,
which escapes NUL (PostgreSQL ``text`` and ``jsonb`` cannot hold one), so every message round-trips
exactly.

Why appends stay in order without a timestamp: an append (one statement) first upserts the
session's row, which locks it until commit, and only then takes its ``seq`` values. Appends to
one session are thus serialized and commit in ``seq`` order, so a reader that has seen
``seq <= n`` can ask for ``seq > n`` and miss nothing. A read returns the session's
``generation`` in the same statement (one snapshot): when another process cleared the session
since, it differs and the whole history is read instead.

An operation is a generator (a *flow*) that yields :class:`Query` steps and receives their rows;
the sync and async classes run each flow in one transaction: a single statement marked ``alone``
is its own transaction, several run between BEGIN and COMMIT.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from datetime import timezone
from typing import Any, TypeVar

from ..errors import SchemaVersionError, StoreError, StoreUnavailableError, UserError
from ..messages import Message
from ._codec import (
    SCHEMA_VERSION,
    check_meta_key,
    check_session_id,
    decode_message,
    decode_meta,
    encode_message,
    encode_meta,
)
from ._history_cache import HistoryCache, unfused
from .base import SessionInfo

__all__ = ["Flow", "PostgresCore", "Query", "check_table", "import_psycopg", "translate"]

T = TypeVar("T")

MAX_TABLE_LENGTH = 48
"""Longest table name: PostgreSQL cuts names at 63 bytes, and aniki adds suffixes to it."""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# Tables already created (and their version checked) by this process: (conninfo, table).
_READY: set[tuple[str, str]] = set()


@dataclass(frozen=True, slots=True)
class Query:
    """A step: run ``statement`` with ``params``; the reply is the rows (``[]`` when none)."""

    statement: bytes
    """The SQL, with the table names already quoted in."""
    params: dict[str, Any] | None = None
    """Values for its ``%(name)s`` placeholders; never spliced into the text."""
    alone: bool = False
    """The statement needs no transaction shared with the flow's others: on an autocommit
    connection it runs as its own (one round trip instead of three). A flow whose first
    statement is alone yields only such statements."""


Flow = Generator[Query, list[tuple[Any, ...]], T]
"""An operation: yields queries, receives each one's rows, returns the result."""


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
class _Statements:
    lock_name: str
    regclass_names: dict[str, Any]
    lock: bytes
    find_tables: bytes
    get_version: bytes
    create: tuple[bytes, ...]
    put_version: bytes
    append: bytes
    append_read: bytes
    append_tail: bytes
    read: bytes
    tail: bytes
    clear: tuple[bytes, ...]
    get_meta: bytes
    set_meta: bytes
    delete_meta: bytes
    list_sessions: bytes


# The CTEs of an append; {placeholders} are the quoted table names.
_APPEND = (
    "WITH s AS ("
    " INSERT INTO {sessions} AS s (session_id, message_count, updated_at)"
    " VALUES (%(sid)s, %(n)s, now())"
    " ON CONFLICT (session_id) DO UPDATE"
    " SET message_count = s.message_count + EXCLUDED.message_count,"
    " updated_at = EXCLUDED.updated_at"
    " RETURNING generation, message_count"
    "), m AS ("
    " INSERT INTO {messages} (session_id, message)"
    " SELECT %(sid)s, batch.record FROM s,"
    " unnest(%(records)b::text[]) WITH ORDINALITY AS batch(record, position)"
    " ORDER BY batch.position"
    " RETURNING seq"
    ")"
)

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


@functools.lru_cache(maxsize=64)
def _statements(table: str) -> _Statements:
    from psycopg import sql

    *schema, base = table.split(".")

    def quoted(suffix: str) -> str:
        # check_table allows only letters, digits and underscores: quoting needs no escapes.
        return ".".join(f'"{part}"' for part in [*schema, base + suffix])

    suffixes = {"messages": "", "sessions": "_sessions", "meta": "_meta", "schema": "_schema"}
    names = {key: sql.SQL(quoted(suffix)) for key, suffix in suffixes.items()}
    names["index"] = sql.SQL(f'"{base}_by_session"')

    def q(text: str) -> bytes:
        # Rendered once: psycopg then finds each statement in its cache of converted queries.
        return sql.SQL(text).format(**names).as_bytes(None)

    return _Statements(
        lock_name=f"aniki:{table}",
        regclass_names={key: quoted(suffix) for key, suffix in suffixes.items()},
        lock=q("SELECT pg_advisory_xact_lock(hashtextextended(%(name)s, 0))"),
        find_tables=q(
            "SELECT to_regclass(%(schema)s), to_regclass(%(messages)s),"
            " to_regclass(%(sessions)s), to_regclass(%(meta)s)"
        ),
        get_version=q("SELECT max(version) FROM {schema}"),
        create=(
            q(
                "CREATE TABLE IF NOT EXISTS {schema} ("
                " id smallint PRIMARY KEY CHECK (id = 1), version integer NOT NULL)"
            ),
            q(
                "CREATE TABLE IF NOT EXISTS {messages} ("
                " seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
                " session_id text NOT NULL, message text NOT NULL,"
                " created_at timestamptz NOT NULL DEFAULT now())"
            ),
            q("CREATE INDEX IF NOT EXISTS {index} ON {messages} (session_id, seq)"),
            q(
                "CREATE TABLE IF NOT EXISTS {sessions} ("
                " session_id text PRIMARY KEY,"
                " generation bigint GENERATED ALWAYS AS IDENTITY,"
                " message_count bigint NOT NULL, updated_at timestamptz NOT NULL)"
            ),
            q(
                "CREATE TABLE IF NOT EXISTS {meta} ("
                " session_id text NOT NULL, key text NOT NULL, value text NOT NULL,"
                " PRIMARY KEY (session_id, key))"
            ),
        ),
        put_version=q(
            "INSERT INTO {schema} AS s (id, version) VALUES (1, %(version)s)"
            " ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version"
            " WHERE s.version < EXCLUDED.version"
        ),
        # One statement, so one round trip and, on an autocommit connection, its own
        # transaction. The messages' insert reads the session's row from the upsert, so the
        # upsert runs first and locks that row until commit: appends to one session are
        # serialized and take their seq values in commit order.
        append=q(
            _APPEND + " SELECT s.generation, s.message_count, (SELECT max(seq) FROM m) FROM s"
        ),
        # An append, then the rows a read needs, in one statement. Its parts all read the one
        # snapshot taken when it started, which lacks the batch (the caller holds it) and any
        # append committed while the upsert waited for the row lock: `before` (the row in that
        # snapshot) tells whether one was, and then the caller reads again.
        append_read=q(
            _APPEND_THEN + " LEFT JOIN LATERAL (SELECT seq, message FROM {messages}"
            " WHERE session_id = %(sid)s"
            " AND seq > CASE WHEN s.generation = %(gen)s THEN %(after)s ELSE 0 END) AS r ON true"
            " ORDER BY r.seq"
        ),
        append_tail=q(
            _APPEND_THEN + " LEFT JOIN LATERAL (SELECT seq, message FROM {messages}"
            " WHERE session_id = %(sid)s ORDER BY seq DESC LIMIT %(limit)s) AS r ON true"
            " ORDER BY r.seq DESC"
        ),
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
        list_sessions=q(
            "SELECT session_id, message_count, updated_at FROM {sessions}"
            " ORDER BY updated_at DESC, session_id"
        ),
    )


class PostgresCore:
    """The state and pure logic of one PostgreSQL session: statements, cache, and flows."""

    def __init__(self, session_id: str, *, table: str, store: str, conninfo: str) -> None:
        self.id = check_session_id(session_id)
        self.store = store
        self._sql = _statements(check_table(table))
        self._ready_key = (conninfo, table)
        self._cache: HistoryCache[int] = HistoryCache()  # position = last seq read

    # --- table setup, once per process and store ---------------------------------------

    @property
    def ready(self) -> bool:
        return self._ready_key in _READY

    def mark_ready(self, ready: bool) -> None:
        if ready:
            _READY.add(self._ready_key)
        else:
            _READY.discard(self._ready_key)

    def setup(self) -> Flow[None]:
        """Create the tables if absent and check their version, under a lock (safe when
        several processes start at once)."""
        q = self._sql
        yield Query(q.lock, {"name": q.lock_name})
        ((schema, *others),) = yield Query(q.find_tables, q.regclass_names)
        version = None
        if schema is not None:
            ((version,),) = yield Query(q.get_version)
            if version is not None and version > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"the tables were written with schema version {version}, newer than this "
                    f"aniki's {SCHEMA_VERSION}; upgrade aniki to use them",
                    store=self.store,
                )
        if version != SCHEMA_VERSION or None in others:
            for statement in q.create:
                yield Query(statement)
            yield Query(q.put_version, {"version": SCHEMA_VERSION})

    # --- operations ------------------------------------------------------------------

    def append(self, messages: Sequence[Message]) -> Flow[None]:
        if not messages:
            return
        records = [encode_message(m) for m in messages]
        params = {"sid": self.id, "n": len(records), "records": records}
        ((generation, count, last),) = yield Query(self._sql.append, params, alone=True)
        # Extend the cache only when our batch sits right after it; otherwise the next read
        # fetches whatever another writer added in between.
        cache = self._cache
        if cache.generation in (None, generation) and len(cache) + len(messages) == count:
            cache.generation = generation
            cache.extend(messages, last)

    def append_then_read(
        self, messages: Sequence[Message], limit: int | None
    ) -> Flow[tuple[Message, ...]]:
        """:meth:`append`, then :meth:`read`: one statement, unless another append committed
        while this one waited for the session's row (then a second reads afresh)."""
        plain = unfused(messages, limit, self.append, self.read)
        if plain is not None:
            return (yield from plain)
        cache = self._cache
        tail = limit if limit is not None and cache.generation is None else 0
        params = {
            "sid": self.id,
            "n": len(messages),
            "records": [encode_message(m) for m in messages],
            "gen": -1 if cache.generation is None else cache.generation,
            "after": cache.position,
            "limit": limit,
        }
        rows = yield Query(self._sql.append_tail if tail else self._sql.append_read, params, True)
        generation, count, last, generation_before, count_before = rows[0][:5]
        if (
            generation_before not in (None, generation)
            or (count_before or 0) + len(messages) != count
        ):
            return (yield from self.read(limit))
        earlier = [(seq, text) for *_, seq, text in rows if seq is not None]
        if tail:
            earlier.reverse()
            window = [decode_message(text, store=self.store) for _, text in earlier]
            return tuple([*window, *messages][-tail:])
        if generation != cache.generation:  # a first read, or cleared since
            cache.reset(generation)
        if earlier:
            cache.extend([decode_message(t, store=self.store) for _, t in earlier], earlier[-1][0])
        cache.extend(messages, last)
        return cache.view(limit)

    def read(self, limit: int | None) -> Flow[tuple[Message, ...]]:
        if limit is not None and limit <= 0:
            return ()
        cache = self._cache
        if limit is not None and cache.generation is None:
            # Nothing cached yet: fetch only the tail, not the whole history, so that a policy
            # over a freshly opened session costs the size of its window.
            tail = yield Query(self._sql.tail, {"sid": self.id, "limit": limit}, alone=True)
            return tuple(decode_message(text, store=self.store) for (text,) in reversed(tail))
        gen = -1 if cache.generation is None else cache.generation
        params = {"sid": self.id, "gen": gen, "after": cache.position}
        rows = yield Query(self._sql.read, params, alone=True)
        generation = rows[0][0] if rows else None
        if generation != cache.generation:  # a first read, or cleared since
            cache.reset(generation)
        new = [(seq, text) for _, seq, text in rows if seq is not None]
        if new:
            decoded = [decode_message(text, store=self.store) for _, text in new]
            cache.extend(decoded, new[-1][0])
        return cache.view(limit)

    def clear(self) -> Flow[None]:
        for statement in self._sql.clear:
            yield Query(statement, {"sid": self.id})
        self._cache.reset()

    def get_meta(self, key: str) -> Flow[Any]:
        rows = yield Query(self._sql.get_meta, {"sid": self.id, "key": _meta_key(key)}, alone=True)
        return decode_meta(rows[0][0], store=self.store) if rows else None

    def set_meta(self, key: str, value: Any) -> Flow[None]:
        params = {"sid": self.id, "key": _meta_key(key)}
        if value is None:
            yield Query(self._sql.delete_meta, params, alone=True)
        else:
            yield Query(
                self._sql.set_meta, {**params, "value": encode_meta(key, value)}, alone=True
            )

    def list_sessions(self) -> Flow[list[SessionInfo]]:
        rows = yield Query(self._sql.list_sessions, alone=True)
        return [
            SessionInfo(sid, int(count), updated.astimezone(timezone.utc))
            for sid, count, updated in rows
        ]


def _meta_key(key: str) -> str:
    if "\x00" in check_meta_key(key):
        raise UserError("a meta key must not contain NUL characters (PostgreSQL text cannot)")
    return key


def import_psycopg() -> Any:
    """The ``psycopg`` package, or :class:`~aniki.UserError` saying how to install it."""
    try:
        import psycopg
    except ModuleNotFoundError as exc:
        raise UserError(
            f"PostgreSQL sessions need the {exc.name!r} package: pip install 'aniki-sdk[postgres]'"
        ) from exc
    return psycopg


def translate(exc: Exception, store: str) -> StoreError:
    """A psycopg (or psycopg_pool) exception as the aniki error a caller can act on."""
    import psycopg

    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, psycopg.OperationalError):
        if "database" in text and "does not exist" in text:
            hint = "create it (CREATE DATABASE ...) or fix the database name in the DSN"
        elif "password" in text or ("role" in text and "does not exist" in text):
            hint = "check the user name and password in the DSN"
        elif type(exc).__name__ in {"PoolTimeout", "TooManyRequests"}:
            hint = "no pooled connection became free in time; enlarge the pool or its timeout"
        else:
            hint = "check that the server is running and the DSN's host, port and database"
        return StoreUnavailableError(f"cannot use PostgreSQL ({text}); {hint}", store=store)
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return StoreError(
            f"the PostgreSQL user lacks a privilege aniki needs ({text}); grant it, or have an "
            "owner create the tables once",
            store=store,
        )
    return StoreError(f"PostgreSQL failed: {text}", store=store)
