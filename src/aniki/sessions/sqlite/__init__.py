"""The SQLite store, aniki's embedded default.

- ``session.py``: :class:`SQLiteSession`
- ``store.py``: :class:`SQLiteStore`, a database file of sessions (listing, pruning them)
- ``aio.py``: :class:`AsyncSQLiteSession`, the async twin (calls run on a worker thread)
- ``_db.py``: one connection per file and process: transactions, the queries, damage
- ``_sql.py``: the SQL text and the layout of message keys
- ``_connect.py``: opening a file: checked, migrated, WAL mode
- ``_errors.py``: what each ``sqlite3`` error means, with advice
- ``_edits.py``: ``fork``, ``undo`` and appends after a named message
- ``_pages.py``: a page of the history, read by key
- ``_info.py``: a session's info (title, owner, tags, times, count), kept in its row
- ``_listing.py``: the listing by index, and prune and delete in batches
- ``_blobs.py``: attachments kept apart, once per content, with the links that free them
- ``_schema.py``: the checks a file passes before use, and the schema's migrations
- ``_options.py``: the database path and the options, checked
"""

from .aio import AsyncSQLiteSession
from .session import SQLiteSession
from .store import SQLiteStore

__all__ = ["AsyncSQLiteSession", "SQLiteSession", "SQLiteStore"]
