"""The PostgreSQL store (needs the ``postgres`` extra; ``psycopg`` is imported on first use).

- ``session.py``: :class:`PostgresSession` (and :class:`AsyncPostgresSession`, from
  ``_async_session.py``); ``_base.py``: what both do around a flow (arguments, deadlines,
  errors); the methods both share are ``sessions/_flow_store.py``'s
- ``_core.py``: the state and logic both share: statements, cache, the flow of each operation
- ``_edits.py``: the flows of ``fork`` and ``undo``
- ``_blobs.py``: attachments kept apart, once per content, with the links that free them
- ``_flow.py``: a flow and its steps; ``_sql.py``: the tables and statements
- ``_drive.py``: running a flow on a connection, and the deadline that ends a hung call
- ``_pool.py``: the connection pool of an asynchronous ``open_store``
"""

from .session import AsyncPostgresSession, PostgresSession

__all__ = ["AsyncPostgresSession", "PostgresSession"]
