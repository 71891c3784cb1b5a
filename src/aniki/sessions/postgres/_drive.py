"""Running a PostgreSQL session's flow on one connection, sync or async, within a deadline.

A flow (see ``_flow``) yields queries; these drivers run them, on the loops of
:mod:`aniki.sessions._driver`, answering each query with its rows. Statements marked ``alone``
run as their own transactions on an autocommit connection (one round trip each); any other
flow runs between BEGIN and COMMIT, or, when a step is marked ``commits``, in several such
transactions, one after another (the deadline is then renewed at each COMMIT).

psycopg waits for a reply without any limit: a server that hangs, or a network that stops
delivering while the kernel still acknowledges what was sent, holds a call forever (server
settings such as ``statement_timeout`` need a server that still runs). :func:`arm` bounds the
wait from the client's side: when the deadline passes, one watchdog thread shuts the
connection's socket down, which wakes the waiting call (sync or async) with an
``OperationalError``; the connection is then dropped. A write cut off this way may or may not
have been committed, as with any connection lost before its reply.
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import itertools
import socket
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .. import _driver
from ._flow import Flow, Query

if TYPE_CHECKING:
    import psycopg

__all__ = ["Alarm", "adrive", "arm", "borrow_autocommit", "disarm", "drive"]

T = TypeVar("T")


def borrow_autocommit(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Whether to switch a pooled connection to autocommit while a session uses it.

    A pool's connections are in transaction mode unless it was made with
    ``kwargs={"autocommit": True}``; there every statement opens a transaction the session then
    commits, one round trip more each way. An idle connection is switched (a client-side flag,
    no I/O) and switched back before it returns to the pool; one in a transaction is left be.
    """
    if conn.autocommit:  # aniki's own pools' connections, always
        return False
    from psycopg.pq import TransactionStatus

    return conn.info.transaction_status == TransactionStatus.IDLE


def drive(
    conn: psycopg.Connection[Any], flow: Flow[T], committed: Callable[[], None] | None = None
) -> T:
    """Run ``flow`` on ``conn``; its result. ``committed`` is called after each transaction a
    step marked ``commits`` ended (the next begins with the step after it)."""
    try:
        first = next(flow)
    except StopIteration as done:
        return cast(T, done.value)
    if first.alone and conn.autocommit:  # each statement its own transaction: no BEGIN
        with conn.cursor() as cursor:

            def alone(step: Query) -> list[tuple[Any, ...]]:
                _check_alone(True, step)
                return _execute(conn, cursor, step)

            return _driver.drive(flow, alone, alone(first))
    began = False  # a transaction of the flow is open
    with contextlib.ExitStack() as transaction, conn.cursor() as cursor:

        def answer(step: Query) -> list[tuple[Any, ...]]:
            nonlocal began
            _check_alone(False, step)
            if not began:
                transaction.enter_context(conn.transaction())
                began = True
            rows = _execute(conn, cursor, step)
            if step.commits:
                began = False
                transaction.close()  # commits
                if committed is not None:
                    committed()
            return rows

        return _driver.drive(flow, answer, answer(first))


def _execute(
    conn: psycopg.Connection[Any], cursor: psycopg.Cursor[Any], step: Query
) -> list[tuple[Any, ...]]:
    """``step``'s statement run on ``cursor``: its rows (``[]`` when it returns none)."""
    if _first_use(conn, step):
        with conn.pipeline():  # Parse, Bind and Execute: one round trip
            cursor.execute(step.statement, step.params, binary=step.binary, prepare=True)
    else:
        cursor.execute(step.statement, step.params, binary=step.binary)
    return cursor.fetchall() if cursor.rownumber is not None else []


async def adrive(
    conn: psycopg.AsyncConnection[Any],
    flow: Flow[T],
    committed: Callable[[], None] | None = None,
) -> T:
    """:func:`drive` on an async connection."""
    try:
        first = next(flow)
    except StopIteration as done:
        return cast(T, done.value)
    if first.alone and conn.autocommit:  # each statement its own transaction: no BEGIN
        async with conn.cursor() as cursor:

            def alone(step: Query) -> Awaitable[list[tuple[Any, ...]]]:
                _check_alone(True, step)
                return _aexecute(conn, cursor, step)

            return await _driver.adrive(flow, alone, alone(first))
    began = False
    async with contextlib.AsyncExitStack() as transaction, conn.cursor() as cursor:

        async def answer(step: Query) -> list[tuple[Any, ...]]:
            nonlocal began
            _check_alone(False, step)
            if not began:
                await transaction.enter_async_context(conn.transaction())
                began = True
            rows = await _aexecute(conn, cursor, step)
            if step.commits:
                began = False
                await transaction.aclose()  # commits
                if committed is not None:
                    committed()
            return rows

        return await _driver.adrive(flow, answer, answer(first))


async def _aexecute(
    conn: psycopg.AsyncConnection[Any], cursor: psycopg.AsyncCursor[Any], step: Query
) -> list[tuple[Any, ...]]:
    """``step``'s statement run on ``cursor``: its rows (``[]`` when it returns none)."""
    if _first_use(conn, step):
        async with conn.pipeline():  # Parse, Bind and Execute: one round trip
            await cursor.execute(step.statement, step.params, binary=step.binary, prepare=True)
    else:
        await cursor.execute(step.statement, step.params, binary=step.binary)
    return await cursor.fetchall() if cursor.rownumber is not None else []


_PREPARED: weakref.WeakKeyDictionary[Any, set[bytes]] = weakref.WeakKeyDictionary()
"""The statements marked ``prepare`` each connection has run (and so psycopg prepared)."""


@functools.cache
def _pipelines() -> bool:
    """Whether this libpq has pipeline mode (14 or later); without, psycopg prepares a
    statement at its default threshold."""
    import psycopg

    return bool(psycopg.Pipeline.is_supported())


def _first_use(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any], step: Query) -> bool:
    """Whether ``step`` is a statement to prepare that ``conn`` has not run yet: it is then
    prepared now, in a pipeline that sends the Parse with the execution (one round trip, not
    two). Later uses find it prepared by psycopg. Should psycopg's cache have dropped it
    since (it keeps ``prepared_max``), the next use prepares it again on its own; a
    connection whose ``prepare_threshold`` is ``None`` prepares nothing either way."""
    if not step.prepare or not _pipelines():
        return False
    done = _PREPARED.get(conn)
    if done is None:
        done = _PREPARED[conn] = set()
    elif step.statement in done:
        return False
    done.add(step.statement)
    return True


def _check_alone(alone: bool, step: Query) -> None:
    if alone and not step.alone:
        raise RuntimeError("a flow that began with a lone statement yielded one needing BEGIN")


class Alarm:
    """Whether the deadline passed while the connection was in use (then its socket was shut)."""

    __slots__ = ("fired", "pending")

    def __init__(self) -> None:
        self.fired = False
        self.pending = True


class _Watchdog:
    """One daemon thread running the actions of armed alarms when their deadlines pass.

    Arming and disarming take a lock and push onto a heap: no thread per call. An action runs
    under the lock, so once :meth:`disarm` returns, the alarm can no longer touch the
    connection, which may go back to a pool and serve another call. A disarmed alarm stays
    in the heap until it comes first, or until the disarmed ones are half of it (then the
    heap is rebuilt without them): calls that end long before their deadline, thousands a
    second with a 10 s bound, keep the heap at about twice the calls in flight.
    """

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._heap: list[tuple[float, int, Alarm, Callable[[], None]]] = []
        self._order = itertools.count()
        self._stale = 0
        """Disarmed alarms still in the heap."""
        self._thread: threading.Thread | None = None
        """Started on first use; started again if it ever ended (after a fork, say)."""

    def arm(self, deadline: float, action: Callable[[], None]) -> Alarm:
        entry = Alarm()
        with self._lock:
            first = not self._heap or deadline < self._heap[0][0]
            heapq.heappush(self._heap, (deadline, next(self._order), entry, action))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._watch, name="aniki-postgres-timeouts", daemon=True
                )
                self._thread.start()
            elif first:
                self._lock.notify()
        return entry

    def disarm(self, entry: Alarm) -> bool:
        """Stop ``entry``; whether it had fired."""
        with self._lock:
            if entry.pending:
                entry.pending = False
                self._stale += 1
                if self._stale > _STALE_LEAST and 2 * self._stale > len(self._heap):
                    self._heap = [item for item in self._heap if item[2].pending]
                    heapq.heapify(self._heap)
                    self._stale = 0
            return entry.fired

    def _watch(self) -> None:
        with self._lock:
            while True:
                while self._heap and not self._heap[0][2].pending:
                    heapq.heappop(self._heap)  # disarmed: dropped lazily
                    self._stale -= 1
                if not self._heap:
                    self._lock.wait()
                    continue
                deadline, _, entry, action = self._heap[0]
                wait = deadline - time.monotonic()
                if wait > 0:
                    # Capped: a wait beyond the platform's longest raises OverflowError,
                    # which would end this thread and every alarm with it.
                    self._lock.wait(min(wait, _LONGEST_NAP))
                    continue
                heapq.heappop(self._heap)
                entry.pending, entry.fired = False, True
                with contextlib.suppress(Exception):
                    action()


_STALE_LEAST = 256
"""Disarmed alarms the heap may hold before it is ever rebuilt without them."""
_LONGEST_NAP = 3600.0
"""The watchdog wakes at least this often (seconds), whatever the next deadline."""

_WATCHDOG = _Watchdog()


def _shut(fileno: int) -> Callable[[], None]:
    def shut() -> None:
        # A duplicate of the descriptor: shutting it down ends the one connection they share,
        # and the waiting call sees the connection closed; closing the duplicate frees only it.
        with socket.fromfd(fileno, socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.shutdown(socket.SHUT_RDWR)

    return shut


def arm(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any], deadline: float) -> Alarm:
    """Shut ``conn``'s socket down at ``deadline`` (``time.monotonic()``) unless disarmed."""
    return _WATCHDOG.arm(deadline, _shut(conn.pgconn.socket))


def disarm(entry: Alarm) -> bool:
    """Stop ``entry``; whether it had fired (the connection is then unusable)."""
    return _WATCHDOG.disarm(entry)
