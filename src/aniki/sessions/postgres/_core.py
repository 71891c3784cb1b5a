"""What ``PostgresSession`` and ``AsyncPostgresSession`` share, without I/O.

The tables and the statements over them are in ``_sql`` (their set-up in ``_schema``); fork
and undo in ``_edits``; info, listing and retention in ``_catalog``.

Why appends stay in order without a timestamp: an append (one statement) first upserts the
session's row, which locks it until commit, and only then takes its ``seq`` values: appends to
one session commit in ``seq`` order, so a reader that has seen ``seq <= n`` can ask for ``seq >
n`` and miss nothing. A read returns the session's ``generation`` in the same statement (one
snapshot): when another process cleared the session since, the whole history is read again.

A run's answers are appended under its turn guard (:mod:`aniki.sessions._guard`): once its
first write learned the generation, an append without attachments updates the session's row
only while it holds that generation (one statement checks and writes); any other runs in a
transaction that the flow rolls back when the generation returned is not the run's.
Attachment bytes are kept apart from the records, once per content (``_blobs``): an append
whose messages carry none, and a read of records naming none, run as they would without.

An operation is a generator (a *flow*, see ``_flow``) that yields :class:`Query` steps and
receives their rows; the sync and async classes run each flow in one transaction: a single
statement marked ``alone`` is its own transaction, several run between BEGIN and COMMIT. The
appends that follow a named message, or read back, are built from ``append``, ``_append_read``
and ``read`` by :class:`~aniki.sessions._flow_store.FlowCore`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ...errors import StoreError, StoreUnavailableError, UserError
from ...messages import Message
from .._args import check_meta_key, check_seconds, check_session_id
from .._blobs import MARK
from .._catalog import InfoChange, Listing
from .._codec import decode_meta, decode_records, encode_meta
from .._flow_store import FlowCore
from .._guard import HistoryMoved, admit, expected_mark
from .._history_cache import HistoryCache
from .._pages import Page
from ..base import SessionInfo
from ..memory import meta_json
from . import _blobs, _catalog, _edits, _pages, _schema
from ._blobs import blob_statements, records_of
from ._flow import Flow, Query
from ._sql import check_table, statements

__all__ = [
    "DEFAULT_TIMEOUT",
    "Flow",
    "PostgresCore",
    "Query",
    "check_timeout",
    "import_psycopg",
    "translate",
]

SWAP_ROUNDS = 3
"""Tries of a meta compare-and-swap whose stored text keeps changing to equal values."""

DEFAULT_TIMEOUT = 10.0
"""Seconds one call may take: waiting for a pooled connection, connecting, the statements."""


def check_timeout(timeout: object) -> float:
    """``timeout`` as seconds; :class:`~aniki.UserError` unless a finite number above 0."""
    return check_seconds(timeout, name="timeout", waits_for="PostgreSQL")


_READY: set[tuple[str, str]] = set()  # (conninfo, table) set up and checked by this process


class PostgresCore(FlowCore[Query]):
    """The state and pure logic of one PostgreSQL session: statements, cache, and flows."""

    def __init__(self, session_id: str, *, table: str, store: str, conninfo: str) -> None:
        self.id = check_session_id(session_id)
        self.store = store
        self._table = check_table(table)
        self._sql = statements(self._table)
        self._blob_sql = blob_statements(self._table)
        self._ready_key = (conninfo, table)
        self._cache: HistoryCache[int] = HistoryCache()  # position = last seq read

    # --- table setup, once per process and store ---------------------------------------

    @property
    def ready(self) -> bool:
        return self._ready_key in _READY

    def mark_ready(self, ready: bool) -> None:
        if ready:
            _READY.add(self._ready_key)
        else:
            _READY.discard(self._ready_key)

    def setup(self) -> Flow[None]:
        """Make the tables if absent, bring an older layout up to date, and check their
        version, under a lock (safe when several processes start at once; see ``_schema``)."""
        return _schema.setup(self._table, store=self.store)

    # --- operations ------------------------------------------------------------------

    def append(self, messages: Sequence[Message], after: str | None = None) -> Flow[bool]:
        """Append ``messages``; with ``after`` (an id, or ``''`` for none), only after the
        message with that id, checked in the same statement: whether they were appended."""
        if not messages:
            return True
        records, blobs = records_of(messages)
        params = {"sid": self.id, "n": len(messages), **_batch(records, after)}
        if after is not None:
            statement = self._sql.append_after
        else:
            statement = self._sql.append_one if len(messages) == 1 else self._sql.append
        statement, alone = self._guard(statement, params, bool(blobs))
        rows = yield Query(statement, params, alone=alone, prepare=True)
        if not rows:  # another message is last, or (guarded) the history moved: none written
            if "expect" in params:
                raise HistoryMoved
            return False
        ((generation, count, last),) = rows
        admit(self, generation)  # under a turn guard: refused, it rolls the append back
        if blobs:
            yield from _blobs.put(self._blob_sql, self.id, records, blobs, last)
        # Extend the cache only when our batch sits right after it; otherwise the next read
        # fetches whatever another writer added in between.
        cache = self._cache
        if cache.generation in (None, generation) and len(cache) + len(messages) == count:
            cache.generation = generation
            cache.extend(messages, last)
        return True

    def _append_read(
        self, messages: Sequence[Message], limit: int | None, after: str | None
    ) -> Flow[tuple[Message, ...] | None]:
        # One statement, unless another append committed while this one waited for the
        # session's row (or took the blobs of the messages read with it): then a read afresh.
        cache = self._cache
        tail = limit if limit is not None and cache.generation is None else 0
        records, blobs = records_of(messages)
        params = {
            "sid": self.id,
            "n": len(messages),
            **_batch(records, after),
            "gen": -1 if cache.generation is None else cache.generation,
            "after": cache.position,
            "limit": limit,
        }
        statement = self._fused(after is not None, bool(tail), len(messages) == 1)
        statement, alone = self._guard(statement, params, bool(blobs))
        rows = yield Query(statement, params, alone=alone, prepare=True)
        if not rows:  # another message is last, or (guarded) the history moved: none written
            if "expect" in params:
                raise HistoryMoved
            return None
        generation, count, last, generation_before, count_before = rows[0][:5]
        admit(self, generation)  # under a turn guard: refused, it rolls the append back
        if blobs:
            yield from _blobs.put(self._blob_sql, self.id, records, blobs, last)
        if (
            generation_before not in (None, generation)
            or (count_before or 0) + len(messages) != count
        ):
            return (yield from self.read(limit))
        earlier = [(seq, text) for *_, seq, text in rows if seq is not None]
        if tail:
            earlier.reverse()
        window = yield from self._messages([text for _, text in earlier])
        if window is None:  # a blob went since, with the messages naming it
            return (yield from self.read(limit))
        if tail:
            return tuple([*window, *messages][-tail:])
        if generation != cache.generation:  # a first read, or cleared since
            cache.reset(generation)
        if earlier:
            cache.extend(window, earlier[-1][0])
        cache.extend(messages, last)
        return cache.view(limit)

    def _guard(self, statement: bytes, params: dict[str, Any], blobs: bool) -> tuple[bytes, bool]:
        """The statement and whether it runs alone: under a guard that knows the generation,
        one without blobs or ``after`` checks it (``expect``); any other guarded append runs
        in a transaction that :func:`admit` rolls back."""
        mark = expected_mark(self)
        if mark is None or blobs or (guarded := self._sql.guarded.get(statement)) is None:
            return statement, mark is None and not blobs
        params["expect"] = mark
        return guarded, True

    def _fused(self, after: bool, tail: bool, one: bool) -> bytes:
        """The statement of an append read back: after a named message, of the tail only,
        of one message."""
        sql = self._sql
        if after:
            return sql.append_tail_after if tail else sql.append_read_after
        if tail:
            return sql.append_tail_one if one else sql.append_tail
        return sql.append_read_one if one else sql.append_read

    def _messages(self, texts: list[str]) -> Flow[list[Message] | None]:
        """The messages ``texts`` hold, with the blobs they name (read in one more statement
        when one does); ``None`` when such a blob went since the rows were read."""
        if not any(MARK in text for text in texts):
            return decode_records(texts, store=self.store)
        return (yield from _blobs.load(self._blob_sql, texts, store=self.store))

    def read(self, limit: int | None) -> Flow[tuple[Message, ...]]:
        if limit is not None and limit <= 0:
            return ()
        cache = self._cache
        if limit is not None and cache.generation is None:
            # Nothing cached yet: fetch only the tail, not the whole history, so that a policy
            # over a freshly opened session costs the size of its window.
            params: dict[str, Any] = {"sid": self.id, "limit": limit}
            tail = yield Query(self._sql.tail, params, alone=True, prepare=True)
            window = yield from self._messages([text for (text,) in reversed(tail)])
            if window is None:  # a blob went between the two statements: both again, at once
                tail, blobs = yield from _blobs.again(self._blob_sql, self._sql.tail, params, 1)
                texts = [text for (text,) in reversed(tail)]
                window = _blobs.decoded(texts, blobs, store=self.store)
            return tuple(window)
        gen = -1 if cache.generation is None else cache.generation
        params = {"sid": self.id, "gen": gen, "after": cache.position}
        rows = yield Query(self._sql.read, params, alone=True, prepare=True)
        new = [(seq, text) for _, seq, text in rows if seq is not None]
        decoded = yield from self._messages([text for _, text in new])
        if decoded is None:  # as above
            rows, blobs = yield from _blobs.again(self._blob_sql, self._sql.read, params, 3)
            new = [(seq, text) for _, seq, text in rows if seq is not None]
            decoded = _blobs.decoded([text for _, text in new], blobs, store=self.store)
        generation = rows[0][0] if rows else None
        if generation != cache.generation:  # a first read, or cleared since
            cache.reset(generation)
        if new:
            cache.extend(decoded, new[-1][0])
        return cache.view(limit)

    def clear(self) -> Flow[None]:
        """Delete the history (with the blobs no other message names) and the meta."""
        params = {"sid": self.id}
        yield Query(self._sql.clear[0], params)  # the session's row first: see _sql
        yield from _blobs.unlink(self._blob_sql, self._blob_sql.clear, params)  # and messages
        yield Query(self._sql.clear[2], params)
        self._cache.reset()

    def replace(self, messages: Sequence[Message]) -> Flow[None]:
        """:meth:`clear`, then :meth:`append`, in one transaction."""
        yield from self.clear()
        yield from self.append(messages)

    def get_meta(self, key: str) -> Flow[Any]:
        rows = yield Query(self._sql.get_meta, {"sid": self.id, "key": _meta_key(key)}, alone=True)
        return decode_meta(rows[0][0], store=self.store) if rows else None

    def set_meta(self, key: str, value: Any) -> Flow[None]:
        params = {"sid": self.id, "key": _meta_key(key)}
        if value is None:
            yield Query(self._sql.delete_meta, params, alone=True)
        else:
            yield Query(
                self._sql.set_meta, {**params, "value": encode_meta(key, value)}, alone=True
            )

    def swap_meta(self, key: str, expected: Any, value: Any) -> Flow[bool]:
        """Set ``key`` to ``value`` only if it holds ``expected`` (compared as JSON).

        Each try is one statement comparing exact texts; when the stored text differs but
        holds an equal value (another key order), the swap is tried again with that text.
        """
        params: dict[str, Any] = {"sid": self.id, "key": _meta_key(key)}
        text = None if value is None else encode_meta(key, value)
        guess = None if expected is None else encode_meta(key, expected)
        q = self._sql
        for _ in range(SWAP_ROUNDS):
            if guess is None and text is None:  # absent, and to stay absent
                rows = yield Query(q.get_meta, params, alone=True)
                return not rows
            if guess is None:
                statement, values = q.swap_in_meta, {"value": text}
            elif text is None:
                statement, values = q.swap_out_meta, {"expected": guess}
            else:
                statement, values = q.swap_meta, {"expected": guess, "value": text}
            if (yield Query(statement, {**params, **values}, alone=True)):
                return True
            rows = yield Query(q.get_meta, params, alone=True)
            stored = rows[0][0] if rows else None
            current = (
                None if stored is None else meta_json(key, decode_meta(stored, store=self.store))
            )
            if current != meta_json(key, expected):
                return False
            guess = stored
        return False  # rewritten with equal values each time: let the caller read again

    def fork(self, target: str, upto: str | None) -> Flow[None]:
        """Copy this history (through message ``upto``) and meta into session ``target``."""
        return _edits.fork(self._sql, self._blob_sql, self.id, target, upto, store=self.store)

    def undo(self) -> Flow[tuple[Message, ...]]:
        """Remove the last turn; what was removed."""
        removed = yield from _edits.undo(self._sql, self._blob_sql, self.id, store=self.store)
        if removed:
            self._cache.reset()  # the session's generation changed: the next read starts over
        return removed

    def page(self, start: int, limit: int) -> Flow[Page]:
        """Messages ``start`` to ``start + limit`` in one statement; caches nothing."""
        return _pages.page(self._sql, self._blob_sql, self.id, start, limit, store=self.store)

    def info(self) -> Flow[SessionInfo]:
        return _catalog.info(self._table, self.id)

    def set_info(self, change: InfoChange) -> Flow[None]:
        return _catalog.set_info(self._table, self.id, change)

    def list_sessions(self, listing: Listing) -> Flow[list[SessionInfo]]:
        return _catalog.list_sessions(self._table, listing)

    def prune(self, cutoff: datetime, owner: str | None) -> Flow[int]:
        return _catalog.prune(self._table, cutoff, owner)

    def delete_sessions(self, owner: str) -> Flow[int]:
        return _catalog.delete_sessions(self._table, owner)


def _meta_key(key: str) -> str:
    if "\x00" in check_meta_key(key):
        raise UserError("a meta key must not contain NUL characters (PostgreSQL text cannot)")
    return key


def import_psycopg() -> Any:
    """The ``psycopg`` package, or :class:`~aniki.UserError` saying how to install it."""
    try:
        import psycopg
    except ModuleNotFoundError as exc:
        raise UserError(
            f"PostgreSQL sessions need the {exc.name!r} package: pip install 'aniki-sdk[postgres]'"
        ) from exc
    return psycopg


def translate(
    exc: Exception,
    store: str,
    *,
    timeout: float,
    timed_out: bool = False,
    dsn_connect_timeout: bool = False,
) -> StoreError:
    """A psycopg (or psycopg_pool) exception as the aniki error a caller can act on.

    ``timed_out``: the call's deadline cut its connection; ``dsn_connect_timeout``: the DSN
    sets ``connect_timeout`` itself (so connecting is bounded by that, not by ``timeout``).
    """
    import psycopg

    text = " ".join(str(exc).split()) or type(exc).__name__
    longer = f"wait longer with timeout= (now {timeout:g} s)"
    if timed_out or type(exc).__name__ == "ConnectionTimeout":
        if isinstance(exc, psycopg.errors.ConnectionTimeout) and dsn_connect_timeout:
            longer = "raise connect_timeout in the DSN"
        return StoreUnavailableError(
            f"PostgreSQL did not answer in time ({text}); check that the server is running "
            f"and reachable, or {longer}",
            store=store,
        )
    if isinstance(exc, psycopg.OperationalError):
        if "database" in text and "does not exist" in text:
            hint = "create it (CREATE DATABASE ...) or fix the database name in the DSN"
        elif "password" in text or ("role" in text and "does not exist" in text):
            hint = "check the user name and password in the DSN"
        elif type(exc).__name__ in {"PoolTimeout", "TooManyRequests"}:
            hint = (
                "no pooled connection became free in time (the pool is full, or cannot "
                f"connect); enlarge the pool's max_size, or {longer}"
            )
        else:
            hint = "check that the server is running and the DSN's host, port and database"
        return StoreUnavailableError(f"cannot use PostgreSQL ({text}); {hint}", store=store)
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return StoreError(
            f"the PostgreSQL user lacks a privilege aniki needs ({text}); grant it, or have an "
            "owner create the tables once",
            store=store,
        )
    return StoreError(f"PostgreSQL failed: {text}", store=store)


def _batch(records: list[str], follows: str | None = None) -> dict[str, Any]:
    """An append's records as its statement takes them: one alone, more as an array (and
    always, with the id the append must follow: ``''`` for none, passed as NULL)."""
    if follows is not None:
        return {"records": records, "follows": follows or None}
    if len(records) == 1:
        return {"record": records[0]}
    return {"records": records}
