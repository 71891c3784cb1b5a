"""Running a PostgreSQL session's flow on one connection, sync or async.

A flow (see ``_postgres_core``) yields queries; these drivers run them. Statements marked
``alone`` run as their own transactions on an autocommit connection (one round trip each);
any other flow runs between BEGIN and COMMIT.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ._postgres_core import Flow, Query

if TYPE_CHECKING:
    import psycopg

__all__ = ["adrive", "borrow_autocommit", "drive"]

T = TypeVar("T")


def borrow_autocommit(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Whether to switch a pooled connection to autocommit while a session uses it.

    A pool's connections are in transaction mode unless it was made with
    ``kwargs={"autocommit": True}``; there every statement opens a transaction the session then
    commits, one round trip more each way. An idle connection is switched (a client-side flag,
    no I/O) and switched back before it returns to the pool; one in a transaction is left be.
    """
    from psycopg.pq import TransactionStatus

    return not conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE


def drive(conn: psycopg.Connection[Any], flow: Flow[T]) -> T:
    """Run ``flow`` on ``conn``; its result."""
    try:
        step = next(flow)
    except StopIteration as done:
        return cast(T, done.value)
    alone = step.alone and conn.autocommit
    with contextlib.nullcontext() if alone else conn.transaction(), conn.cursor() as cursor:
        try:
            while True:
                _check_alone(alone, step)
                cursor.execute(step.statement, step.params)
                step = flow.send(cursor.fetchall() if cursor.rownumber is not None else [])
        except StopIteration as done:
            return cast(T, done.value)


def _check_alone(alone: bool, step: Query) -> None:
    if alone and not step.alone:
        raise RuntimeError("a flow that began with a lone statement yielded one needing BEGIN")


async def adrive(conn: psycopg.AsyncConnection[Any], flow: Flow[T]) -> T:
    """:func:`drive` on an async connection."""
    try:
        step = next(flow)
    except StopIteration as done:
        return cast(T, done.value)
    alone = step.alone and conn.autocommit
    async with (
        contextlib.nullcontext() if alone else conn.transaction(),
        conn.cursor() as cursor,
    ):
        try:
            while True:
                _check_alone(alone, step)
                await cursor.execute(step.statement, step.params)
                step = flow.send(await cursor.fetchall() if cursor.rownumber is not None else [])
        except StopIteration as done:
            return cast(T, done.value)
