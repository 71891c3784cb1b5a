"""What a ``sqlite3`` error means for a store: damage, or one kind of trouble, with advice.

Every error is translated by SQLite's result code (:func:`result_code`): damage (corrupt
pages, a file that is not a database, rows that break aniki's own constraints, text that is
not UTF-8) is :class:`~aniki.CorruptStoreError`; a lock, a full disk, missing permissions or
a failing disk are :class:`~aniki.StoreUnavailableError`, each with its own advice
(:func:`store_error`).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ...errors import CorruptStoreError, StoreError, StoreUnavailableError
from ._schema import damage_hint, header_problem

__all__ = ["DB_ERRORS", "LOCKED_CODES", "result_code", "store_error"]

DB_ERRORS = (sqlite3.Error, UnicodeDecodeError)
"""What a call into ``sqlite3`` raises for the file: its errors, and a message it could not
decode (SQLite quotes a damaged schema's text, which need not be UTF-8)."""

# SQLite's primary result codes (https://sqlite.org/rescode.html) and what each one means here.
_DAMAGE_CODES = frozenset({11, 19, 20, 24, 26})  # CORRUPT CONSTRAINT MISMATCH FORMAT NOTADB
LOCKED_CODES = frozenset({5, 6})  # BUSY LOCKED
_FULL = 13
_NO_PERMISSION_CODES = frozenset({3, 8, 23})  # PERM READONLY AUTH
_CANTOPEN = 14
_IOERR = 10
_NOMEM = 7
_TEXT_CODES = (  # for Python versions whose sqlite3 errors carry no result code
    ("malformed", 11),
    ("not a database", 26),
    ("corrupt", 11),
    ("unsupported file format", 24),
    ("could not decode", 11),
    ("constraint", 19),
    ("locked", 5),
    ("busy", 5),
    ("disk is full", _FULL),
    ("permission denied", 3),
    ("readonly", 8),
    ("read-only", 8),
    ("unable to open", _CANTOPEN),
    ("i/o error", _IOERR),
    ("out of memory", _NOMEM),
)


def result_code(exc: sqlite3.Error) -> int | None:
    """SQLite's primary result code for ``exc`` (``None``: an error of Python's module)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF != 1:
        return code & 0xFF
    # SQLITE_ERROR (1) is generic: its text says more (a damaged schema is reported so).
    lowered = str(exc).lower()
    return next((value for text, value in _TEXT_CODES if text in lowered), code)


def store_error(
    exc: sqlite3.Error | UnicodeDecodeError, label: str, timeout: float, path: Path
) -> StoreError:
    """The aniki error for ``exc``: damage, or the one kind of trouble it is, with advice."""
    if isinstance(exc, UnicodeDecodeError):
        # The sqlite3 module decodes SQLite's messages as UTF-8; one quoting a damaged
        # schema (a flipped byte in its text) cannot be decoded.
        return CorruptStoreError(
            "the database file is damaged: SQLite found text that is not UTF-8 in its "
            f"schema; {damage_hint(path)}",
            store=label,
        )
    text = str(exc)
    code = result_code(exc)
    if code == _IOERR:  # a failing disk, or a file cut short: the file's size tells them apart
        code = 11 if _file_problem(path) is not None else _IOERR
    if code in _DAMAGE_CODES:
        return CorruptStoreError(
            f"the database file is damaged ({text}); {damage_hint(path)}", store=label
        )
    if code in LOCKED_CODES:
        advice = (
            f"stayed locked by another connection for {timeout:g} s ({text}); retry, or "
            "raise timeout="
        )
    elif code == _FULL:
        advice = f"cannot grow ({text}): the disk is full; free some space, then retry"
    elif code in _NO_PERMISSION_CODES:
        advice = (
            f"may not be written ({text}); check the permissions of the file, its -wal and "
            "-shm files and its directory"
        )
    elif code == _CANTOPEN:
        advice = (
            f"cannot be opened ({text}); check that it is a file and that aniki may create "
            "files in its directory (the -wal and -shm files)"
        )
    elif code == _IOERR:
        advice = f"could not be read or written ({text}): the disk or file system failed"
    elif code == _NOMEM:
        advice = f"could not be used ({text}): out of memory"
    else:
        return StoreError(f"the database failed: {text}", store=label)
    return StoreUnavailableError(f"the database file {advice}", store=label)


def _file_problem(path: Path) -> str | None:
    try:
        with path.open("rb") as file:
            header = file.read(100)
            return header_problem(header, os.fstat(file.fileno()).st_size) if header else None
    except OSError:
        return None
