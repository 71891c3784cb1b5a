"""What ``RedisSession`` and ``AsyncRedisSession`` share, without I/O.

One session keeps four keys. The id sits between braces so that, on a Redis Cluster, all
four hash to one slot and a script may touch them together::

    {prefix}{<id>}:msgs     list   one JSON text per message, oldest first
    {prefix}{<id>}:info     hash   gen (a random token, new after every clear, every undo
                                   and a fork into the session), v (schema version), and
                                   the session's info: title, owner, tags, created_at,
                                   updated_at, count (see ``_catalog``)
    {prefix}{<id>}:meta     hash   derived state: one JSON text per key (a run's journal,
                                   summaries, cuts, held approvals)
    {prefix}{<id>}:batches  zset   tokens of the last 32 appends and undos, so a resent one
                                   is not applied twice

and, when its records name attachments, a fifth that no ttl expires, so that a sweep can
release the attachments of a session that expired (``_blob_lua``)::

    {prefix}{<id>}:blobs    set    the hashes of the blobs its records name

The prefix's catalog (sorted sets of its sessions by ``updated_at``: all, per owner, per tag)
is kept in step by every write script; listing, prune and delete read it (``_catalog``).

Every operation is one Lua script, so it is atomic and takes one round trip. Before its first
write, each script checks that the keys it touches hold what aniki writes (else
:class:`~aniki.CorruptStoreError`) and that the schema version is not newer than this aniki's
(else :class:`~aniki.SchemaVersionError`), so a refused write never changes anything.

Reads are incremental: a session instance caches the history it has read with the ``gen`` token
it read it under; the read script returns only the messages past the cached count when the token
still matches, and the whole list when another process cleared (or undid a turn of) the session
in between. ``fork`` and ``undo`` are in ``_edits``.

An operation is a generator (a *flow*, see :mod:`aniki.sessions._driver`) that yields
:class:`Eval` or :class:`Pipeline` steps (``_steps``) and receives their replies; the sync and
async classes only run the steps. The appends that follow a named message, or read back, are
built from ``append``, ``_append_read`` and ``read`` by
:class:`~aniki.sessions._flow_store.FlowCore`.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from ...errors import UserError
from ...messages import Message
from .._args import check_meta_key, check_session_id
from .._codec import SCHEMA_VERSION, decode_meta, encode_meta
from .._history_cache import HistoryCache
from ..memory import meta_json
from . import _scripts as scripts
from ._attachments import decoded, fetch, records_and_blobs
from ._catalog import CatalogCore
from ._client import DEFAULT_TIMEOUT, check_url, import_redis
from ._guarded import guarded, settled
from ._plain import PLAIN_APPEND, PLAIN_APPEND_READ, plain_args
from ._steps import RAW, Eval, Flow, Pipeline
from ._steps import text as _text

__all__ = [
    "DEFAULT_TIMEOUT",  # with check_url and import_redis: from _client, for SessionStore
    "RAW",
    "Eval",
    "Flow",
    "Pipeline",
    "RedisCore",
    "check_url",
    "import_redis",
    "new_token",
]

SWAP_ROUNDS = 3
"""Tries of a meta compare-and-swap whose stored text keeps changing to equal values."""

_MOVED = 2
"""An append-after script's status when another message (or none) is last: nothing written."""


_MAX_TTL_MS = 2**53  # Redis refuses an expiry past its 64-bit clock; this is ~285,000 years


def _ttl_ms(ttl: object) -> int:
    if ttl is None:
        return 0
    seconds = ttl.total_seconds() if isinstance(ttl, timedelta) else ttl
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not math.isfinite(seconds)
        or not 0 < seconds * 1000 <= _MAX_TTL_MS
    ):
        raise UserError(
            "ttl must be a positive, finite number of seconds (such as ttl=86400) or a "
            f"positive timedelta, or None for no expiry; got {ttl!r}"
        )
    return max(1, math.ceil(seconds * 1000))


class RedisCore(CatalogCore):
    """The state and pure logic of one Redis session: keys, cache, and the flow of each call
    (those of its info and of the store's catalog in :class:`~._catalog.CatalogCore`)."""

    def __init__(
        self, session_id: str, *, store: str, prefix: str, ttl: object, indexed: bool = True
    ) -> None:
        self.id = check_session_id(session_id)
        if not isinstance(prefix, str):
            raise UserError(f"prefix must be a string, got {type(prefix).__name__}")
        try:
            self.prefix = prefix.encode("utf-8")
        except UnicodeEncodeError:
            raise UserError(f"prefix {prefix!r} is not valid text (a lone surrogate)") from None
        self.store = store
        self.ttl_ms = _ttl_ms(ttl)
        base = self.prefix + b"{" + self.id.encode("utf-8")
        self.keys = (base + b"}:msgs", base + b"}:info", base + b"}:meta", base + b"}:batches")
        # Without `indexed` (a Redis Cluster client) the catalog's keys are in other slots.
        self.catalog = self.prefix + b"catalog:" if indexed else None
        self.write_keys = self.keys if self.catalog is None else (*self.keys, self.catalog + b"all")
        self.cache: HistoryCache[str] = HistoryCache()
        """The history this instance has read, by ``gen`` token (position: messages read)."""

    # --- flows -----------------------------------------------------------------------

    def append(self, messages: Sequence[Message], after: str | None = None) -> Flow[bool]:
        """Append ``messages``; with ``after`` (an id, or ``''`` for none), only after the
        message with that id: whether they were appended."""
        if not messages:
            return True
        batch = records_and_blobs(messages, apart=self.catalog is not None)
        if after is None and batch[0] == 0:  # no attachment: the plain script (see _plain)
            script, args = PLAIN_APPEND, plain_args(self, self.ttl_ms, new_token(), batch[1:])
        else:
            script = scripts.APPEND if after is None else scripts.APPEND_AFTER
            args = self._append_args(batch, *(() if after is None else (after,)))
            script, args = guarded(self, script, args)
        reply = yield Eval(script, self.write_keys, args)
        self.check(reply)
        settled(self, reply)
        if int(reply[0]) == _MOVED:
            return False
        count, gen = int(reply[1]), _text(reply[2])
        # Extend the cache only when our batch sits right after it; otherwise the next read
        # fetches whatever another writer added in between.
        cache = self.cache
        if cache.generation in (None, gen) and cache.position + len(messages) == count:
            cache.generation = gen
            cache.extend(messages, count)
        return True

    def _append_read(
        self, messages: Sequence[Message], limit: int | None, after: str | None
    ) -> Flow[tuple[Message, ...] | None]:
        cache = self.cache
        tail = limit if limit is not None and cache.generation is None else 0
        between: tuple[str | int, ...] = (cache.generation or "", cache.position, tail)
        batch = records_and_blobs(messages, apart=self.catalog is not None)
        if after is None and batch[0] == 0:  # no attachment: the plain script (see _plain)
            script = PLAIN_APPEND_READ
            args = plain_args(self, self.ttl_ms, new_token(), batch[1:], between)
        else:
            script = scripts.APPEND_READ if after is None else scripts.APPEND_READ_AFTER
            args = self._append_args(batch, *between, *(() if after is None else (after,)))
            script, args = guarded(self, script, args)
        reply = yield Eval(script, self.write_keys, args)
        self.check(reply)
        settled(self, reply)
        if int(reply[0]) == _MOVED:
            return None
        count, gen, start, records = int(reply[1]), _text(reply[2]), int(reply[3]), reply[4]
        if start < 0:  # a resent batch, applied before: where it sits is unknown here
            return (yield from self.read(limit))
        found = yield from self._decoded(records)
        if tail:
            return tuple(found)
        if start == 0:  # everything before the batch came back: a first read, or cleared since
            cache.reset(gen)
        cache.extend(found, start + len(found))
        cache.extend(messages, count)
        return cache.view(limit)

    def read(self, limit: int | None) -> Flow[tuple[Message, ...]]:
        if limit is not None and limit <= 0:
            return ()
        cache = self.cache
        if limit is not None and cache.generation is None:
            # Nothing cached yet: fetch only the tail, not the whole history, so that a policy
            # over a freshly opened session costs the size of its window.
            reply = yield Eval(scripts.TAIL, self.keys, (SCHEMA_VERSION, limit))
            self.check(reply)
            return tuple((yield from self._decoded(reply[1])))
        args = (SCHEMA_VERSION, cache.generation or "", cache.position)
        reply = yield Eval(scripts.READ, self.keys, args)
        self.check(reply)
        gen, start, records = _text(reply[1]) or None, int(reply[2]), reply[3]
        if start == 0:  # the whole list came back: a first read, or cleared since
            cache.reset(gen)
        if records:
            found = yield from self._decoded(records)
            cache.extend(found, start + len(found))
        return cache.view(limit)

    def clear(self) -> Flow[None]:
        self.check((yield Eval(scripts.CLEAR, self.write_keys, (SCHEMA_VERSION,))))
        self.cache.reset()

    def replace(self, messages: Sequence[Message]) -> Flow[None]:
        """:meth:`clear`, then :meth:`append`, in one script."""
        if not messages:
            return (yield from self.clear())
        batch = records_and_blobs(messages, apart=self.catalog is not None)
        self.check((yield Eval(scripts.REPLACE, self.write_keys, self._append_args(batch))))
        self.cache.reset()

    def get_meta(self, key: str) -> Flow[Any]:
        reply = yield Eval(scripts.GET_META, self.keys, (SCHEMA_VERSION, check_meta_key(key)))
        self.check(reply)
        return decode_meta(reply[1], store=self.store) if reply[1] else None

    def set_meta(self, key: str, value: Any) -> Flow[None]:
        check_meta_key(key)
        text = "" if value is None else encode_meta(key, value)
        args = (SCHEMA_VERSION, self.ttl_ms, key, text)
        reply = yield Eval(scripts.SET_META, self.write_keys, args)  # its ttl reaches the blobs
        self.check(reply)

    def swap_meta(self, key: str, expected: Any, value: Any) -> Flow[bool]:
        """Set ``key`` to ``value`` only if it holds ``expected`` (compared as JSON).

        The script compares exact texts; when the stored text differs but holds an equal
        value (another key order), the swap is tried again with that text.
        """
        check_meta_key(key)
        text = "" if value is None else encode_meta(key, value)
        guess = "" if expected is None else encode_meta(key, expected)
        for _ in range(SWAP_ROUNDS):
            args = (SCHEMA_VERSION, self.ttl_ms, key, guess, text)
            reply = yield Eval(scripts.SWAP_META, self.write_keys, args)
            self.check(reply)
            if int(reply[1]) == 1:
                return True
            stored = _text(reply[2])
            current = meta_json(key, decode_meta(stored, store=self.store)) if stored else None
            if current != meta_json(key, expected):
                return False
            guess = stored
        return False  # rewritten with equal values each time: let the caller read again

    # --- helpers ---------------------------------------------------------------------

    def _decoded(self, records: Sequence[Any]) -> Flow[list[Message]]:
        """The messages ``records`` hold, with the blobs they name (read in one more round
        trip, only when some record names one)."""
        blobs = yield from fetch(self.prefix, records)
        return decoded(records, blobs, store=self.store)

    def _append_args(
        self, batch: Sequence[str | int | bytes], *between: str | int
    ) -> tuple[bytes | str | int, ...]:
        """An append's ARGV: version, a fresh token, now (in microseconds, then in
        milliseconds), the ttl, ``between`` (what the script takes besides), then ``batch``:
        the blobs and the records (from ``_attachments.records_and_blobs``)."""
        now = time.time_ns()
        head = (SCHEMA_VERSION, new_token(), str(now // 1000), now // 1_000_000, self.ttl_ms)
        return (*head, *between, *batch)


def new_token() -> str:
    """A batch's token: 128 random bits as hex (a fifth of ``uuid4().hex``'s time)."""
    return os.urandom(16).hex()
