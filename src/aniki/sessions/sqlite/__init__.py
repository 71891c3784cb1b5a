"""The SQLite store, aniki's embedded default.

- ``session.py``: :class:`SQLiteSession` and :class:`SQLiteStore`
- ``aio.py``: :class:`AsyncSQLiteSession`, the async twin (calls run on a worker thread)
- ``_db.py``: one connection per file and process: the queries, damage, errors
- ``_schema.py``: the checks a file passes before use, and the schema's migrations
"""

from .aio import AsyncSQLiteSession
from .session import SQLiteSession, SQLiteStore

__all__ = ["AsyncSQLiteSession", "SQLiteSession", "SQLiteStore"]
