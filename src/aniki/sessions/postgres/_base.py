"""What both PostgreSQL session classes share beyond their methods (which
:mod:`aniki.sessions._flow_store` gives them): the constructor (checking the arguments), the
deadline of a call, when a failed attempt is made again, the errors a caller sees, and the
sibling a fork returns."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

from ..._secrets import hide_password
from ...errors import UserError
from ._core import DEFAULT_TIMEOUT, PostgresCore, check_timeout, import_psycopg, translate
from ._drive import arm, disarm

__all__ = ["DEFAULT_TABLE", "PostgresBase", "check_pool", "sets_connect_timeout"]

DEFAULT_TABLE = "aniki_messages"

B = TypeVar("B", bound="PostgresBase[Any]")
P = TypeVar("P")
"""The pool class: psycopg_pool's sync or async one."""


class PostgresBase(Generic[P]):
    """Construction, deadlines and error handling shared by the sync and async classes.

    Every call has a deadline ``timeout`` seconds after it starts. Waiting for a pooled
    connection and connecting take at most the time left (connecting in whole seconds, at
    least 2: libpq's rule, unless the DSN sets ``connect_timeout``); the statements run
    under an alarm (see ``_drive``) that cuts the connection when the time is up.
    """

    _pool_class: str

    def __init__(
        self,
        id: str,
        dsn: str | None = None,
        *,
        table: str = DEFAULT_TABLE,
        pool: P | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self._psycopg = import_psycopg()
        if (dsn is None) == (pool is None):
            raise UserError(
                f"{type(self).__name__} needs a dsn (postgresql://user@host/db) or a pool=, "
                "not both"
            )
        if pool is not None:
            check_pool(pool, self._pool_class)
        elif not isinstance(dsn, str):
            raise UserError(
                "dsn must be a string: a URL (postgresql://user:password@host:5432/db) or "
                f"key=value pairs (host=... dbname=...), got {type(dsn).__name__}"
            )
        self._timeout = check_timeout(timeout)
        conninfo: str = cast(Any, pool).conninfo if pool is not None else str(dsn)
        self._fixed_connect_timeout = sets_connect_timeout(conninfo, self._psycopg)
        self._dsn = conninfo
        self._pool = pool
        self._table = table
        self._broke_idle = False  # the last call's connection had died while idle
        self._timed_out = False  # the last call's deadline cut its connection
        store = f"{hide_password(conninfo)} (table {table!r})"
        self._core = PostgresCore(id, table=table, store=store, conninfo=conninfo)
        self._lock = self._new_lock()

    def _new_lock(self) -> Any:
        """The lock that lets one call at a time use this instance's connection."""
        raise NotImplementedError

    def _sibling(self: B, session_id: str) -> B:
        """Session ``session_id`` in the same store, opened as this one was (a fork's result)."""
        dsn = None if self._pool is not None else self._dsn
        return type(self)(
            session_id, dsn, table=self._table, pool=self._pool, timeout=self._timeout
        )

    def _start(self) -> float:
        """A call's deadline, its attempts' marks cleared."""
        self._broke_idle = self._timed_out = False
        return time.monotonic() + self._timeout

    def _again(self, exc: Exception, read: bool) -> bool:
        """Whether an attempt that failed with ``exc`` is made once more (within the call's
        deadline), having done what the next one needs."""
        if isinstance(exc, self._psycopg.errors.UndefinedTable):
            # Dropped since this process created them: create them again.
            self._core.mark_ready(False)
            return True
        # A write may have committed before its connection broke. A read on a connection that
        # died while idle (a server restart, a proxy's timeout) changed nothing: once more, on
        # a fresh connection.
        return (
            isinstance(exc, self._psycopg.OperationalError)
            and read
            and self._broke_idle
            and not self._timed_out
        )

    def _left(self, deadline: float) -> float:
        """Seconds left before ``deadline``; an ``OperationalError`` when none are."""
        left = deadline - time.monotonic()
        if left <= 0:
            self._timed_out = True
            raise self._psycopg.OperationalError("no time left for another attempt")
        return left

    def _connect_options(self, deadline: float) -> dict[str, Any]:
        """How this instance's own connection is made: in autocommit mode, in the time left."""
        left = self._left(deadline)
        if self._fixed_connect_timeout:
            return {"autocommit": True}
        return {"autocommit": True, "connect_timeout": max(2, math.ceil(left))}

    def _watch(self, conn: Any, deadline: float, *, reused: bool) -> _Watch:
        """Run the block with ``conn`` cut at ``deadline`` (see ``_drive``), and note what
        happened: whether the deadline cut it (the caller then closes it), and whether, broken,
        it had died while idle (it had served before, ``reused``, and is closed now).

        The block gets a function that renews the deadline, ``timeout`` seconds from then: a
        flow in several transactions (a prune) calls it after each COMMIT, so that each of
        them, not the whole, is bounded."""
        return _Watch(self, conn, deadline, reused)

    def _error(self, exc: Exception) -> Exception:
        return translate(
            exc,
            self._core.store,
            timeout=self._timeout,
            timed_out=self._timed_out,
            dsn_connect_timeout=self._fixed_connect_timeout,
        )


class _Watch:
    """:meth:`PostgresBase._watch`'s context manager, which is also the renewing function (a
    class: it is entered on every call of a session)."""

    __slots__ = ("_alarm", "_conn", "_reused", "_session")

    def __init__(self, session: PostgresBase[Any], conn: Any, deadline: float, reused: bool):
        self._session = session
        self._conn = conn
        self._reused = reused
        self._alarm = arm(conn, deadline)

    def __enter__(self) -> Callable[[], None]:
        return self

    def __call__(self) -> None:
        if disarm(self._alarm):
            self._session._timed_out = True  # its socket is shut: the next statement fails
        else:
            self._alarm = arm(self._conn, time.monotonic() + self._session._timeout)

    def __exit__(self, kind: type[BaseException] | None, exc: object, tb: object) -> None:
        session = self._session
        if kind is not None and issubclass(kind, session._psycopg.OperationalError):
            session._broke_idle = self._reused and self._conn.closed
        if disarm(self._alarm):
            session._timed_out = True


def check_pool(pool: object, expected: str) -> None:
    """:class:`~aniki.UserError` unless ``pool`` is a pool of the ``expected`` class."""
    if expected == "AsyncConnectionPool":
        from ._pool import AsyncConnections

        if isinstance(pool, AsyncConnections):  # an asynchronous open_store's
            return
    try:
        import psycopg_pool
    except ModuleNotFoundError as exc:
        raise UserError(
            f"pool= needs the {exc.name!r} package: pip install 'aniki-sdk[postgres]'"
        ) from exc
    if not isinstance(pool, getattr(psycopg_pool, expected)):
        raise UserError(
            f"pool must be a psycopg_pool.{expected} (or pass a dsn instead), got "
            f"{type(pool).__name__}"
        )


def sets_connect_timeout(conninfo: str, psycopg: Any) -> bool:
    """Whether the DSN sets ``connect_timeout``; :class:`~aniki.UserError` when it is invalid."""
    try:
        return "connect_timeout" in psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        pass  # raised below, outside this handler: the driver's error can quote the password
    raise UserError(
        f"invalid PostgreSQL DSN {hide_password(conninfo)!r}: expected a URL "
        "(postgresql://user:password@host:5432/db) or key=value pairs (host=... dbname=...)"
    )
