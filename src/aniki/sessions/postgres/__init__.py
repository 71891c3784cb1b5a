"""The PostgreSQL store (needs the ``postgres`` extra; ``psycopg`` is imported on first use).

- ``session.py``: :class:`PostgresSession` and :class:`AsyncPostgresSession`
- ``_core.py``: the state and logic both share: statements, cache, the flow of each operation
- ``_sql.py``: the tables and statements
- ``_drive.py``: running a flow on a connection, and the deadline that ends a hung call
"""

from .session import AsyncPostgresSession, PostgresSession

__all__ = ["AsyncPostgresSession", "PostgresSession"]
