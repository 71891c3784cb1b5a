"""Making a PostgreSQL store's tables and indexes, and bringing an older layout up to date
(:func:`setup`, a flow; see ``_flow``).

Set-up runs once per process and store, in one transaction, under an advisory lock named
after the table: when several processes start at once, one makes the tables and the others
then find them. It looks for the tables and the indexes of the current layout; when one is
missing, or the schema table holds an older version, it makes what is absent (every statement
is ``IF NOT EXISTS``) and stamps the schema table with :data:`LAYOUT_VERSION`. A schema table
stamped with a newer version is refused with :class:`~aniki.SchemaVersionError`, and nothing
is changed.

The layout has its own version, apart from the message format's
(:data:`~aniki.sessions._codec.SCHEMA_VERSION`), because an aniki reads only the layouts it
knows: an aniki of layout 2 that met a record naming a blob would report the store damaged,
while one that finds version 3 says to upgrade it.

A store of layout 2 (its messages hold their attachments' bytes inline, as base64) gains the
two blob tables and is stamped 3; nothing else changes, its records decode as they did, and
only messages written from then on keep their bytes apart.

The sessions table of the layout before conversations had info (title, owner, tags,
``created_at``; still stamped 2) gains those columns with ``ALTER TABLE ... ADD COLUMN IF NOT
EXISTS``; in the same transaction each existing session's ``created_at`` and message count
are taken from its messages, once (only when the columns were absent), so its sessions are
listed with the right counts and times. The indexes that serve the listing and the prune are
made then.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ...errors import SchemaVersionError
from ._flow import Flow, Query
from ._sql import regclass_names, render

__all__ = ["LAYOUT_VERSION", "Schema", "schema", "setup"]

LAYOUT_VERSION = 3
"""The version of the tables' layout this aniki makes and reads. 1: messages, sessions and
meta. 2: records of message format 2 (attachments, reasoning, ids and times); later in 2, the
sessions' info columns. 3: attachments apart, in ``<table>_blobs`` and ``<table>_blob_refs``,
records naming them by hash."""


@dataclass(frozen=True, slots=True)
class Schema:
    """The set-up statements of one table family, rendered once."""

    lock_name: str
    names: dict[str, str]
    """The quoted names of the tables and indexes, for ``to_regclass``."""
    lock: bytes
    find: bytes
    has_info: bytes
    get_version: bytes
    tables: tuple[bytes, ...]
    add_info: bytes
    backfill: bytes
    indexes: tuple[bytes, ...]
    put_version: bytes


_FIND = (
    "SELECT to_regclass(%(schema)s), to_regclass(%(messages)s), to_regclass(%(sessions)s),"
    " to_regclass(%(meta)s), to_regclass(%(by_time)s), to_regclass(%(by_owner)s),"
    " to_regclass(%(by_tag)s), to_regclass(%(blobs)s), to_regclass(%(blob_refs)s),"
    " to_regclass(%(refs_by_hash)s)"
)

_TABLES = (
    "CREATE TABLE IF NOT EXISTS {schema} ("
    " id smallint PRIMARY KEY CHECK (id = 1), version integer NOT NULL)",
    "CREATE TABLE IF NOT EXISTS {messages} ("
    " seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    " session_id text NOT NULL, message text NOT NULL,"
    " created_at timestamptz NOT NULL DEFAULT now())",
    "CREATE INDEX IF NOT EXISTS {index} ON {messages} (session_id, seq)",
    "CREATE TABLE IF NOT EXISTS {sessions} ("
    " session_id text PRIMARY KEY,"
    " generation bigint GENERATED ALWAYS AS IDENTITY,"
    " message_count bigint NOT NULL, updated_at timestamptz NOT NULL,"
    " created_at timestamptz NOT NULL DEFAULT now(), title text, owner text,"
    " tags text[] NOT NULL DEFAULT '{{}}')",
    "CREATE TABLE IF NOT EXISTS {meta} ("
    " session_id text NOT NULL, key text NOT NULL, value text NOT NULL,"
    " PRIMARY KEY (session_id, key))",
    # Attachments apart from their messages (see _blobs): the bytes once per content, and a
    # link per message and blob it names, found by session (removals) and by hash (whether
    # another message still names a blob).
    "CREATE TABLE IF NOT EXISTS {blobs} (hash text PRIMARY KEY, data bytea NOT NULL)",
    "CREATE TABLE IF NOT EXISTS {blob_refs} ("
    " session_id text NOT NULL, seq bigint NOT NULL, hash text NOT NULL,"
    " PRIMARY KEY (session_id, seq, hash))",
    "CREATE INDEX IF NOT EXISTS {refs_by_hash} ON {blob_refs} (hash)",
)

# Ids sort by code point ("C"), as the listing rule (aniki.sessions._catalog.select) does.
# updated_at is indexed, so an append's update of the session's row is not HOT: it adds an
# entry to each index. The owner and tag indexes leave out the sessions without one, so a
# session with neither (most of those an app does not list per user) pays for two: the
# primary key and by_time.
_INDEXES = (
    'CREATE INDEX IF NOT EXISTS {by_time} ON {sessions} (updated_at DESC, session_id COLLATE "C")',
    "CREATE INDEX IF NOT EXISTS {by_owner} ON {sessions}"
    ' (owner, updated_at DESC, session_id COLLATE "C") WHERE owner IS NOT NULL',
    "CREATE INDEX IF NOT EXISTS {by_tag} ON {sessions} USING gin (tags) WHERE tags <> '{{}}'",
)


@functools.lru_cache(maxsize=64)
def schema(table: str) -> Schema:
    """The set-up statements for ``table`` (already checked by ``check_table``)."""

    def q(text: str) -> bytes:
        return render(table, text)

    return Schema(
        lock_name=f"aniki:{table}",
        names=regclass_names(table),
        lock=q("SELECT pg_advisory_xact_lock(hashtextextended(%(name)s, 0))"),
        find=q(_FIND),
        has_info=q(
            "SELECT EXISTS (SELECT FROM pg_attribute WHERE attrelid = %(sessions)s::regclass"
            " AND attname = 'created_at' AND NOT attisdropped)"
        ),
        get_version=q("SELECT max(version) FROM {schema}"),
        tables=tuple(q(text) for text in _TABLES),
        add_info=q(
            "ALTER TABLE {sessions}"
            " ADD COLUMN IF NOT EXISTS created_at timestamptz NOT NULL DEFAULT now(),"
            " ADD COLUMN IF NOT EXISTS title text, ADD COLUMN IF NOT EXISTS owner text,"
            " ADD COLUMN IF NOT EXISTS tags text[] NOT NULL DEFAULT '{{}}'"
        ),
        # A session is first written when its first message is stored; the count is
        # recounted as well, from the one pass over the messages.
        backfill=q(
            "UPDATE {sessions} AS s SET created_at = m.first, message_count = m.n"
            " FROM (SELECT session_id, min(created_at) AS first, count(*) AS n"
            " FROM {messages} GROUP BY session_id) AS m WHERE m.session_id = s.session_id"
        ),
        indexes=tuple(q(text) for text in _INDEXES),
        put_version=q(
            "INSERT INTO {schema} AS s (id, version) VALUES (1, %(version)s)"
            " ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version"
            " WHERE s.version < EXCLUDED.version"
        ),
    )


def setup(table: str, *, store: str) -> Flow[None]:
    """Make ``table``'s tables and indexes if absent, bring an older layout up to date, and
    check the version (see the module docstring); ``store`` names it in errors."""
    q = schema(table)
    yield Query(q.lock, {"name": q.lock_name})
    ((found_schema, *found),) = yield Query(q.find, q.names)
    version = None
    if found_schema is not None:
        ((version,),) = yield Query(q.get_version)
        if version is not None and version > LAYOUT_VERSION:
            raise SchemaVersionError(
                f"the tables were written with schema version {version}, newer than this "
                f"aniki's {LAYOUT_VERSION}; upgrade aniki to use them",
                store=store,
            )
    complete = found_schema is not None and None not in found
    if version == LAYOUT_VERSION and complete:
        return
    upgrade = False
    if found[1] is not None:  # the sessions table: of which layout?
        ((has_info,),) = yield Query(q.has_info, q.names)
        upgrade = not has_info
    # With every table and index there (a store stamped with an older version whose layout
    # came up to date meanwhile), only the stamp changes: no DDL, which a role with only
    # data rights may not run.
    if upgrade or not complete:
        for statement in q.tables:
            yield Query(statement)
        if upgrade:
            yield Query(q.add_info)
            yield Query(q.backfill)
        for statement in q.indexes:
            yield Query(statement)
    yield Query(q.put_version, {"version": LAYOUT_VERSION})
