"""A Redis store's catalog: each session's info and the sorted sets that list, prune and
delete sessions without a scan. The flows both Redis session classes run (no I/O).

The keys (beside each session's four, see ``_core``)::

    {prefix}{<id>}:info          hash  title, owner, tags (a JSON list), created_at,
                                       updated_at (whole microseconds since the epoch), count
    {prefix}catalog:all          zset  every session written since its last clear, scored
                                       by updated_at
    {prefix}catalog:owner:<o>    zset  the sessions whose owner is <o>, likewise
    {prefix}catalog:tag:<t>      zset  the sessions tagged <t>, likewise
    {prefix}catalog:labels       hash  id -> owner NUL tags, for the sessions that have
                                       either: how to take a session that expired out of
                                       its owner's and tags' sets
    {prefix}catalog:expiry       zset  the sessions written with a ttl, scored by when
                                       their keys expire (ms, the server's clock)
    {prefix}catalog:layout       str   set once the sessions of the previous layout are filed

Every write script (append, the fused append and read, the append after a named message,
undo, clear, replace, fork, set_info) updates the info hash and the sets in the same script
(``_index_lua``), so they never disagree. A listing reads the set its query names, newest
first, a page per script, with the infos of that page; a member whose session has expired
(a ttl) is dropped from every set on the way, and the blobs it named are released. A prune or
a delete removes, per script, at most :data:`~aniki.sessions._catalog.PRUNE_BATCH` sessions,
each whole.

A session that expires takes none of that with it: Redis deletes its keys, not its place in
the sets, nor its ledger of blobs (see ``_blob_lua``), nor the blobs only it named when one of
them was kept without expiry (another session without a ttl named it once). So a prune or a
delete first sweeps the ``expiry`` set, a batch of sessions per script: each session due to
expire by then whose keys are gone is taken out of every set and its blobs are released.

On a Redis Cluster a session's keys and the catalog's lie in different slots, which no
script may span: there the info hash is kept, and listing, prune and delete are refused.

A prefix written by the previous aniki (no ``updated_at``, no sets) is filed once, by the
first listing, prune or delete that finds no ``layout`` marker: a SCAN of the prefix's info
keys, and a script per batch that files each session with its count and times taken from its
messages (a session a new write filed meanwhile is left alone).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from ...errors import StoreError, UserError
from .._catalog import KEEP, PRUNE_BATCH, InfoChange, Keep, Listing
from .._codec import SCHEMA_VERSION
from .._flow_store import FlowCore
from ..base import SessionInfo
from ._catalog_scripts import BACKFILL, INFO, LIST, NOT_MIGRATED, PRUNE, SET_INFO, SWEEP
from ._scripts import Script
from ._steps import Eval, Flow, Pipeline, refusal, text

__all__ = ["CatalogCore", "micros", "now_micros"]

PAGE = 200
"""Members a listing script reads at most (it reads on in the next script)."""
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_GLOB_SPECIAL = re.compile(rb"([*?\[\]\\])")
_INFO_SUFFIX = b"}:info"


def now_micros() -> int:
    """Now, in whole microseconds since the epoch: how the scripts keep times."""
    return time.time_ns() // 1000


def micros(when: datetime) -> int:
    """``when`` (aware) in whole microseconds since the epoch, exactly."""
    return (when - _EPOCH) // timedelta(microseconds=1)


class CatalogCore(FlowCore[Eval | Pipeline]):
    """The catalog flows of a Redis session's core: ``info``, ``set_info``, and the store's
    listing, prune and delete (which any session of the store runs)."""

    prefix: bytes
    """The key prefix."""
    keys: tuple[bytes, ...]
    """The session's four keys: msgs, info, meta, batches."""
    write_keys: tuple[bytes, ...]
    """What a write script runs over: :attr:`keys`, and the set of all sessions when the
    catalog is kept."""
    catalog: bytes | None
    """``<prefix>catalog:``, the start of the catalog's keys; ``None`` on a Redis Cluster."""
    ttl_ms: int
    """The expiry a write sets, in milliseconds (0: none)."""

    def check(self, reply: Sequence[Any]) -> None:
        """Raise the error a script's refusal stands for (see ``_scripts``); else nothing."""
        refusal(reply, self.id, self.store)

    def info(self) -> Flow[SessionInfo]:
        reply = yield Eval(INFO, self.keys, (SCHEMA_VERSION,))
        self.check(reply)
        return _info(self.id, reply[1])

    def set_info(self, change: InfoChange) -> Flow[None]:
        tags: str | Keep | None = change.tags if change.tags is KEEP else None
        if isinstance(change.tags, tuple) and change.tags:
            tags = json.dumps(list(change.tags), ensure_ascii=False, separators=(",", ":"))
        args = (SCHEMA_VERSION, self.ttl_ms, str(now_micros()))
        fields = (*_op(change.title), *_op(change.owner), *_op(tags))
        self.check((yield Eval(SET_INFO, self.write_keys, (*args, *fields))))

    def list_sessions(self, listing: Listing) -> Flow[list[SessionInfo]]:
        base = self._catalog()
        scan, key = "all", base + b"all"
        if listing.owner is not None:
            scan, key = "owner", base + b"owner:" + listing.owner.encode("utf-8")
        elif listing.tag is not None:
            scan, key = "tag", base + b"tag:" + listing.tag.encode("utf-8")
        after = None if listing.updated_after is None else micros(listing.updated_after)
        low = "-inf" if after is None else f"({after}"
        position = ("", "")
        if listing.cursor is not None:
            when, ident = listing.cursor
            if after is not None and micros(when) <= after:
                return []  # nothing sorts after the cursor and is newer than updated_after
            position = (str(micros(when)), ident)
        found: list[SessionInfo] = []
        while True:
            left = PAGE if listing.limit is None else min(PAGE, listing.limit - len(found))
            query = (scan, listing.owner or "", listing.tag or "", low, *position, left)
            reply = yield from self._over_catalog(LIST, key, query)
            found += [_info(text(entry[0]), entry[1:]) for entry in reply[4]]
            if listing.limit is not None and len(found) >= listing.limit:
                return found[: listing.limit]
            if int(reply[1]):
                return found
            position = (text(reply[2]), text(reply[3]))

    def prune(self, cutoff: datetime, owner: str | None) -> Flow[int]:
        return (yield from self._remove(owner, micros(cutoff)))

    def delete_sessions(self, owner: str) -> Flow[int]:
        return (yield from self._remove(owner, None))

    def _remove(self, owner: str | None, cutoff: int | None) -> Flow[int]:
        """Remove the sessions (of ``owner``) last written before ``cutoff`` (all when
        ``None``), a batch per script; how many went."""
        base = self._catalog()
        yield from self._sweep(base)
        key = base + (b"all" if owner is None else b"owner:" + owner.encode("utf-8"))
        bound, cut = ("+inf", "") if cutoff is None else (f"({cutoff}", str(cutoff))
        removed = 0
        while True:
            reply = yield from self._over_catalog(
                PRUNE, key, (owner or "", bound, cut, PRUNE_BATCH)
            )
            removed += int(reply[1])
            if int(reply[2]) < PRUNE_BATCH:
                return removed

    def _sweep(self, base: bytes) -> Flow[None]:
        """Forget the sessions that expired, a batch per script: out of every set, with
        the blobs only they named. They went by their ttl, so a prune does not count them."""
        args = (SCHEMA_VERSION, self.prefix, PRUNE_BATCH)
        while True:
            reply = yield Eval(SWEEP, (base + b"expiry",), args)
            self.check(reply)
            if int(reply[2]) < PRUNE_BATCH:
                return

    def _over_catalog(self, script: Script, key: bytes, args: tuple[str | int, ...]) -> Flow[Any]:
        """Run a listing or prune script over the set ``key``; when the prefix has not been
        filed yet (the previous layout wrote it), file it first, then run it again."""
        base = self._catalog()
        step = Eval(script, (key, base + b"layout"), (SCHEMA_VERSION, self.prefix, *args))
        reply = yield step
        if int(reply[0]) == NOT_MIGRATED:
            yield from self._migrate(base)
            reply = yield step
            if int(reply[0]) == NOT_MIGRATED:
                raise StoreError(
                    f"the Redis key {(base + b'layout').decode('utf-8', 'replace')!r} vanished "
                    "while aniki filed the sessions; is another program deleting keys under "
                    "this prefix? Try again",
                    store=self.store,
                )
        self.check(reply)
        return reply

    def _migrate(self, base: bytes) -> Flow[None]:
        """File the sessions the previous layout wrote, then set the layout marker."""
        pattern = _GLOB_SPECIAL.sub(rb"\\\1", self.prefix) + b"{*" + _INFO_SUFFIX
        start, cursor = len(self.prefix) + 1, 0
        while True:
            ((cursor, keys),) = yield Pipeline((("SCAN", cursor, "MATCH", pattern, "COUNT", 1000),))
            ids = [found for found in (_id_of(key, start) for key in keys) if found is not None]
            for at in range(0, len(ids), PRUNE_BATCH):
                args: tuple[bytes | str | int, ...] = (SCHEMA_VERSION, self.prefix)
                args += tuple(ids[at : at + PRUNE_BATCH])
                self.check((yield Eval(BACKFILL, (base + b"all",), args)))
            if int(cursor) == 0:
                break
        yield Pipeline((("SET", base + b"layout", "1"),))

    def _catalog(self) -> bytes:
        if self.catalog is None:
            raise UserError(
                "listing, prune and delete_sessions are not available on a Redis Cluster: the "
                "catalog they read would lie in another hash slot than each session, and no "
                "script may span two slots; use a single Redis server (with replicas) for "
                "sessions you list"
            )
        return self.catalog


def _op(value: str | Keep | None) -> tuple[str, str]:
    """A ``set_info`` field as SET_INFO takes it: an op and a value."""
    if value is KEEP:
        return ("", "")
    return ("d", "") if value is None else ("s", value)


def _info(session_id: str, fields: Sequence[Any] | None) -> SessionInfo:
    """The info a script described as ``{count, updated_at, title, owner, tags,
    created_at}`` (``None``: never written)."""
    if not fields:
        return SessionInfo(session_id, 0, None)
    count, updated, title, owner, tags, created = fields
    return SessionInfo(
        session_id,
        int(count),
        _time(updated),
        title=None if title is None else text(title),
        owner=None if owner is None else text(owner),
        tags=() if tags is None else tuple(json.loads(text(tags))),
        created_at=_time(created),
    )


def _time(value: bytes | str | None) -> datetime | None:
    return None if value is None else _EPOCH + timedelta(microseconds=int(text(value)))


def _id_of(key: bytes | str, start: int) -> str | None:
    raw = key if isinstance(key, bytes) else key.encode("utf-8")
    try:
        return raw[start : -len(_INFO_SUFFIX)].decode("utf-8")
    except UnicodeDecodeError:  # not a key aniki wrote
        return None
