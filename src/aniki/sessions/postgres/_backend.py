"""How ``postgresql://`` and ``postgres://`` URLs open (see :mod:`aniki.sessions.url`):
sessions from the URL, and a store whose sessions share one pool."""

from __future__ import annotations

import importlib

from ...errors import UserError
from .._backends import Backend, Shared
from .._server_backend import ServerBackend, ServerShared
from . import AsyncPostgresSession, PostgresSession
from ._base import sets_connect_timeout
from ._core import import_psycopg
from ._pool import AsyncConnections
from ._sql import check_table


class _Postgres(ServerBackend):
    def store(
        self, url: str, *, asynchronous: bool, max_connections: int, options: dict[str, str]
    ) -> Shared:
        if "table" in options:
            check_table(options["table"])  # now, not on the first session's first call
        return super().store(
            url, asynchronous=asynchronous, max_connections=max_connections, options=options
        )

    def shared(
        self, url: str, *, asynchronous: bool, max_connections: int, options: dict[str, str]
    ) -> Shared:
        psycopg = import_psycopg()
        try:
            pools = importlib.import_module("psycopg_pool")
        except ModuleNotFoundError as exc:
            raise UserError(
                f"a postgresql: store needs the {exc.name!r} package: "
                "pip install 'aniki-sdk[postgres]'"
            ) from None
        fixed = sets_connect_timeout(url, psycopg)  # a UserError for a bad DSN
        if asynchronous:
            # Not psycopg_pool's: lending a connection cost it twice the statement's CPU.
            lender = AsyncConnections(url, max_size=max_connections, connect_timeout=not fixed)
            return _AsyncPool(AsyncPostgresSession, options, "pool", lender)
        pool = pools.ConnectionPool(
            url,
            min_size=1,
            max_size=max_connections,
            open=False,
            name="aniki",
            kwargs={"autocommit": True},  # no switching it on and off per call
        )
        pool.open(wait=False)
        return ServerShared(PostgresSession, options, "pool", pool)


class _AsyncPool(ServerShared):
    """An async store's pool: its sessions are handed out once the store is opened (``async
    with``, ``await store.open()``)."""

    opened = False

    async def open_async(self) -> None:
        self.opened = True  # its connections are made as the sessions need them


def _parse(dsn: str) -> object:
    """psycopg's own parser (``ImportError`` when psycopg is not installed)."""
    from psycopg.conninfo import conninfo_to_dict

    return conninfo_to_dict(dsn)


BACKEND: Backend = _Postgres(
    "PostgreSQL", PostgresSession, AsyncPostgresSession, option="table", parse=_parse
)
