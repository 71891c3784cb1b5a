"""The schema of a SQLite session store: recognising a file, creating and migrating tables.

Opening never modifies a file it does not recognise or that fails its checks. In order,
before anything is written:

1. the header (:func:`check_header`): the SQLite magic, a possible page size, the journal
   and text-encoding fields, a whole number of pages;
2. ``PRAGMA quick_check`` of every page (:func:`prepare_schema`), for files up to
   :data:`QUICK_CHECK_LIMIT` bytes (about 0.7 ms per MB when the file is in the OS cache);
3. ``application_id`` and ``user_version``, and the schema itself: every table aniki
   created must be there with exactly the SQL that created it.

Only an empty database or an aniki store that passes them is ever written (migrated, or
switched to WAL).
"""

from __future__ import annotations

import functools
import os
import sqlite3
from pathlib import Path

from ...errors import CorruptStoreError, SchemaVersionError, StoreError, StoreUnavailableError

__all__ = [
    "APPLICATION_ID",
    "MIGRATIONS",
    "QUICK_CHECK_LIMIT",
    "check_header",
    "damage_hint",
    "prepare_schema",
    "schema_version",
    "statements",
]

QUICK_CHECK_LIMIT = 256 * 2**20
"""Files up to this size get a ``PRAGMA quick_check`` when opened (under 0.2 s when cached);
in larger ones, damage is found when an operation meets it."""

APPLICATION_ID = 0x414E4B49  # "ANKI": marks the file as an aniki store (PRAGMA application_id)

# A session owns the block of message keys number * 2**32 + 1 ... + 2**32 - 1, so its
# messages are one contiguous range of the table's own B-tree: reading them is a range scan,
# appending goes to the end of the range, and no secondary index has to be kept up to date.
_V1 = """
CREATE TABLE aniki_sessions (
    number INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    generation INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE aniki_messages (
    key INTEGER PRIMARY KEY,
    body TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE aniki_session_meta (
    session_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (session_id, key)
) WITHOUT ROWID;
"""

# Step i upgrades a file from schema version i to i + 1, inside one transaction; the
# current version is len(MIGRATIONS). Append a step for every layout change, never edit one.
_V2 = """
-- Version 2: a message's JSON may hold attachments and reasoning. No table changes: the
-- version keeps out an older aniki, which would read such records as damaged.
"""

# Version 3: what an app keeps about a conversation (title, owner, tags) and what a listing
# shows (its times and message count) sit in the session's row, so a listing reads no
# message: it walks one index newest first (all sessions, or one owner's), or the tags
# table. Appends keep the row in step through the trigger, in the statement that inserts:
# an append stays one statement, one transaction. The times are the messages' own (REAL
# seconds since 1970, to the microsecond: see _sql.clock); an existing session gets them from
# its first and last message (appended in order: its oldest and its newest).
_V3 = """
ALTER TABLE aniki_sessions ADD COLUMN title TEXT;
ALTER TABLE aniki_sessions ADD COLUMN owner TEXT;
ALTER TABLE aniki_sessions ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
ALTER TABLE aniki_sessions ADD COLUMN created_at REAL;
ALTER TABLE aniki_sessions ADD COLUMN updated_at REAL;
ALTER TABLE aniki_sessions ADD COLUMN message_count INTEGER NOT NULL DEFAULT 0;
CREATE TABLE aniki_session_tags (
    tag TEXT NOT NULL,
    number INTEGER NOT NULL,
    PRIMARY KEY (tag, number)
) WITHOUT ROWID;
CREATE INDEX aniki_session_tags_of ON aniki_session_tags (number);
UPDATE aniki_sessions SET
    message_count = (SELECT count(*) FROM aniki_messages AS m
        WHERE m.key > aniki_sessions.number << 32 AND m.key < (aniki_sessions.number + 1) << 32),
    created_at = (SELECT CAST(m.created_at * 1000000 + 0.5 AS INTEGER) / 1000000.0
        FROM aniki_messages AS m
        WHERE m.key > aniki_sessions.number << 32 AND m.key < (aniki_sessions.number + 1) << 32
        ORDER BY m.key LIMIT 1),
    updated_at = (SELECT CAST(m.created_at * 1000000 + 0.5 AS INTEGER) / 1000000.0
        FROM aniki_messages AS m
        WHERE m.key > aniki_sessions.number << 32 AND m.key < (aniki_sessions.number + 1) << 32
        ORDER BY m.key DESC LIMIT 1);
CREATE INDEX aniki_sessions_by_time ON aniki_sessions (updated_at DESC, id)
    WHERE updated_at IS NOT NULL;
CREATE INDEX aniki_sessions_by_owner ON aniki_sessions (owner, updated_at DESC, id)
    WHERE owner IS NOT NULL;
CREATE TRIGGER aniki_messages_counted AFTER INSERT ON aniki_messages BEGIN
    UPDATE aniki_sessions SET message_count = message_count + 1,
        created_at = coalesce(created_at, new.created_at), updated_at = new.created_at
    WHERE number = new.key >> 32;
END;
"""

# Version 4: attachments apart from their messages, once per content (aniki.sessions._blobs):
# a message's record names each attachment by the SHA-256 of its bytes, kept once in
# aniki_blobs; aniki_blob_refs links each message key to the hashes it names, so removing
# messages (a key range) finds the blobs they named without reading them, and a blob goes
# with its last link. Records written before keep their bytes inline and read unchanged.
_V4 = """
CREATE TABLE aniki_blobs (
    hash TEXT PRIMARY KEY,
    data BLOB NOT NULL
);
CREATE TABLE aniki_blob_refs (
    key INTEGER NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (key, hash)
) WITHOUT ROWID;
CREATE INDEX aniki_blob_refs_by_hash ON aniki_blob_refs (hash);
"""

# Version 5: an append writes the session's row only when its second changes. The trigger of
# version 3 rewrote the row and both of its time indexes on every insert: four pages a
# commit instead of one, an append at 55 us against 19 us without it. Now:
# - a session's message count is its last key's position (its keys are contiguous, see
#   _sql), found by one seek when it is read, and no longer kept in the row;
# - ``updated_at`` in the row moves when a message lands in a later whole second than the
#   row's, so the row's second is always the second of the session's last write; the exact
#   time is the later of the row's and the last message's (_sql.UPDATED), read by one seek;
# - the time indexes order sessions by that second, and a listing orders each second's few
#   sessions by their exact times (SQLite sorts the tail of an ORDER BY an index has begun).
_V5 = """
DROP TRIGGER aniki_messages_counted;
DROP INDEX aniki_sessions_by_time;
DROP INDEX aniki_sessions_by_owner;
CREATE INDEX aniki_sessions_by_second ON aniki_sessions (CAST(updated_at AS INTEGER) DESC)
    WHERE updated_at IS NOT NULL;
CREATE INDEX aniki_sessions_by_owner_second
    ON aniki_sessions (owner, CAST(updated_at AS INTEGER) DESC) WHERE owner IS NOT NULL;
CREATE TRIGGER aniki_messages_dated AFTER INSERT ON aniki_messages BEGIN
    UPDATE aniki_sessions SET created_at = coalesce(created_at, new.created_at),
        updated_at = new.created_at
    WHERE number = new.key >> 32
        AND (updated_at IS NULL OR new.created_at >= CAST(updated_at AS INTEGER) + 1);
END;
"""

# Version 6: a text message's record may be compact (aniki.sessions._codec_compact): its
# fields joined by a separator, the content last as it is, read with one split instead of a
# JSON parse. No table changes: the version keeps out an older aniki, which would read such
# records as damaged.
_V6 = """
-- Version 6: a message's record may be compact. No table changes.
"""

MIGRATIONS: list[str] = [_V1, _V2, _V3, _V4, _V5, _V6]

_HEADER = b"SQLite format 3\x00"


def schema_version() -> int:
    """The schema version this aniki writes."""
    return len(MIGRATIONS)


def damage_hint(path: Path) -> str:
    """What to do about a damaged database file (said by every damage error)."""
    return (
        "aniki will not read or write it. Restore it from a backup, or move it aside (aniki "
        f"then starts a new file) and salvage what is left with: sqlite3 '{path}' .recover "
        "| sqlite3 recovered.db"
    )


def check_header(path: Path, label: str) -> None:
    """Refuse a file that is not a SQLite database or whose header is damaged (a missing or
    empty one is fine). Reads the first 100 bytes and the size; writes nothing."""
    if not path.parent.is_dir():
        raise StoreUnavailableError(
            f"the directory {path.parent} does not exist; create it first", store=label
        )
    try:
        with path.open("rb") as file:
            header = file.read(100)
            size = os.fstat(file.fileno()).st_size
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreUnavailableError(
            f"cannot read the database file ({exc}); check that it is a file aniki may read",
            store=label,
        ) from exc
    if not header:
        return
    if not header.startswith(_HEADER) and not _HEADER.startswith(header):
        raise CorruptStoreError(
            "the file is not a SQLite database; pass the path of an aniki store or a new file",
            store=label,
        )
    problem = header_problem(header, size)
    if problem is not None:
        raise CorruptStoreError(
            f"the database file is damaged: {problem}; {damage_hint(path)}", store=label
        )


def header_problem(header: bytes, size: int) -> str | None:
    """What is wrong with a SQLite file's first 100 bytes and its size (``None``: nothing)."""
    if len(header) < 100:
        return f"it is cut short ({size} bytes, less than a header)"
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size > 65536 or page_size & (page_size - 1):
        return f"its header gives an impossible page size ({page_size})"
    if header[18] not in (1, 2) or header[19] not in (1, 2) or header[18] != header[19]:
        return f"its header gives unknown journal versions ({header[18]}, {header[19]})"
    if header[21:24] != b"\x40\x20\x20":
        return "its header's fixed payload fractions are wrong"
    encoding = int.from_bytes(header[56:60], "big")
    app_id = int.from_bytes(header[68:72], "big")
    if encoding not in (0, 1, 2, 3) or (app_id == APPLICATION_ID and encoding not in (0, 1)):
        return f"its header gives a wrong text encoding ({encoding})"
    if size % page_size:
        return f"it is cut short or padded ({size} bytes is not a whole number of pages)"
    return None


def statements(step: str) -> list[str]:
    """The SQL statements of a migration step, in order. A ``;`` ends a statement only where
    SQLite says it does: not inside a trigger's body, a string or a comment."""
    found, pending = [], ""
    for piece in step.split(";"):
        pending += piece
        if sqlite3.complete_statement(pending + ";"):
            if pending.strip():
                found.append(pending)
            pending = ""
        else:
            pending += ";"
    if pending.rstrip(";").strip():
        found.append(pending.rstrip(";"))
    return found


@functools.lru_cache(maxsize=8)
def _expected_schema(steps: tuple[str, ...]) -> frozenset[tuple[str, str, str | None]]:
    """What ``sqlite_master`` holds after ``steps``: built once in memory and compared."""
    conn = sqlite3.connect(":memory:")
    try:
        for step in steps:
            for statement in statements(step):
                conn.execute(statement)
        return frozenset(row for row in _schema_rows(conn) if _ours(row[1]))
    finally:
        conn.close()


def _schema_rows(conn: sqlite3.Connection) -> list[tuple[str, str, str | None]]:
    rows = conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
    return [(str(kind), str(name), None if sql is None else str(sql)) for kind, name, sql in rows]


def _check_pages(conn: sqlite3.Connection, path: Path, label: str) -> None:
    try:
        size = path.stat().st_size
    except OSError:
        return  # not there yet: a new file
    if not size or size > QUICK_CHECK_LIMIT:
        return
    rows = conn.execute("PRAGMA quick_check(1)").fetchall()
    if rows != [("ok",)]:
        found = str(rows[0][0]) if rows else "no answer"
        raise CorruptStoreError(
            f"the database file is damaged (quick_check: {found[:200]}); {damage_hint(path)}",
            store=label,
        )


def _check_schema(conn: sqlite3.Connection, version: int, path: Path, label: str) -> None:
    """An aniki store's own objects (named ``aniki_*``, with their automatic indexes) must be
    exactly those its schema version creates; objects of other names are left alone."""
    if version < 1:  # aniki writes the version together with the tables: never 0 or less
        raise CorruptStoreError(
            f"the database file is damaged: it is marked as an aniki store but gives schema "
            f"version {version}; {damage_hint(path)}",
            store=label,
        )
    expected = _expected_schema(tuple(MIGRATIONS[:version]))
    actual = {row for row in _schema_rows(conn) if _ours(row[1])}
    differing = (expected - actual) | (actual - expected)
    if differing:
        names = ", ".join(sorted({name for _, name, _ in differing}))
        raise CorruptStoreError(
            f"the database file is damaged: its schema is not the one aniki created ({names} "
            f"missing or changed); {damage_hint(path)}",
            store=label,
        )


def _ours(name: str) -> bool:
    return name.startswith(("aniki_", "sqlite_autoindex_aniki_"))


def prepare_schema(conn: sqlite3.Connection, path: Path, label: str) -> None:
    """Check what the file holds; create or migrate the schema when it is (or is becoming) ours.

    Raises :class:`~aniki.CorruptStoreError` before writing anything when a check fails.
    """
    for attempt in range(2):
        app_id, version, tables = _inspect(conn, path, label)
        if app_id == APPLICATION_ID and version == schema_version():
            return
        if app_id == APPLICATION_ID and version > schema_version():
            raise SchemaVersionError(
                f"the store has schema version {version}, newer than {schema_version()} which "
                "this aniki understands; upgrade aniki (pip install -U aniki-sdk)",
                store=label,
            )
        if app_id != APPLICATION_ID and (app_id != 0 or tables):
            raise CorruptStoreError(
                "the file is a SQLite database of another application (tables: "
                f"{', '.join(sorted(tables)[:5]) or 'none'}); aniki will not write to it: "
                "use a separate file for sessions",
                store=label,
            )
        if attempt == 0:
            _migrate(conn, path, label)
    raise StoreError("the schema could not be prepared; retry", store=label)


def _migrate(conn: sqlite3.Connection, path: Path, label: str) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        app_id, version, tables = _inspect(
            conn, path, label
        )  # another process may have done it meanwhile
        if app_id == 0 and not tables:
            version = 0
        elif app_id != APPLICATION_ID or version >= schema_version():
            conn.execute("ROLLBACK")
            return
        for step in MIGRATIONS[version:]:
            for statement in statements(step):
                conn.execute(statement)
        conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version={schema_version()}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _inspect(conn: sqlite3.Connection, path: Path, label: str) -> tuple[int, int, list[str]]:
    """``application_id``, ``user_version`` and table names, once the pages and (for an
    aniki store) the schema passed their checks."""
    # One snapshot: another process may be creating the schema right now.
    own_transaction = not conn.in_transaction
    if own_transaction:
        conn.execute("BEGIN")
    try:
        _check_pages(conn, path, label)
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if app_id == APPLICATION_ID and version <= schema_version():
            _check_schema(conn, version, path, label)
        if app_id == APPLICATION_ID and conn.execute("PRAGMA encoding").fetchone()[0] != "UTF-8":
            raise CorruptStoreError(
                f"the database file is damaged: its text encoding is not UTF-8; "
                f"{damage_hint(path)}",
                store=label,
            )
    finally:
        if own_transaction and conn.in_transaction:
            conn.execute("COMMIT")
    return app_id, version, [str(row[0]) for row in rows]
