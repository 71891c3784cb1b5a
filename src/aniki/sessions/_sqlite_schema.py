"""The schema of a SQLite session store: recognising a file, creating and migrating tables.

Opening never modifies a file it does not recognise: the header, ``application_id`` and
``user_version`` are read first, and only an empty database or an aniki store is written.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..errors import CorruptStoreError, SchemaVersionError, StoreError, StoreUnavailableError

__all__ = ["APPLICATION_ID", "MIGRATIONS", "check_header", "prepare_schema", "schema_version"]

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
MIGRATIONS: list[str] = [_V1]

_HEADER = b"SQLite format 3\x00"


def schema_version() -> int:
    """The schema version this aniki writes."""
    return len(MIGRATIONS)


def check_header(path: Path, label: str) -> None:
    """Refuse a file that is not a SQLite database (a missing one is fine)."""
    if not path.parent.is_dir():
        raise StoreUnavailableError(
            f"the directory {path.parent} does not exist; create it first", store=label
        )
    try:
        with path.open("rb") as file:
            header = file.read(len(_HEADER))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreUnavailableError(f"cannot read the database file: {exc}", store=label) from exc
    if header and header != _HEADER:
        raise CorruptStoreError(
            "the file is not a SQLite database; pass the path of an aniki store or a new file",
            store=label,
        )


def prepare_schema(conn: sqlite3.Connection, label: str) -> None:
    """Check what the file holds; create or migrate the schema when it is (or is becoming) ours."""
    for attempt in range(2):
        app_id, version, tables = _inspect(conn)
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
            _migrate(conn, label)
    raise StoreError("the schema could not be prepared; retry", store=label)


def _migrate(conn: sqlite3.Connection, label: str) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        app_id, version, tables = _inspect(conn)  # another process may have done it meanwhile
        if app_id == 0 and not tables:
            version = 0
        elif app_id != APPLICATION_ID or version >= schema_version():
            conn.execute("ROLLBACK")
            return
        for step in MIGRATIONS[version:]:
            for statement in step.split(";"):
                if statement.strip():
                    conn.execute(statement)
        conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version={schema_version()}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _inspect(conn: sqlite3.Connection) -> tuple[int, int, list[str]]:
    # One snapshot: another process may be creating the schema right now.
    own_transaction = not conn.in_transaction
    if own_transaction:
        conn.execute("BEGIN")
    try:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        if own_transaction:
            conn.execute("COMMIT")
    return int(app_id), int(version), [str(row[0]) for row in rows]
