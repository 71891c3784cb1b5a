"""Claims on making a session's next summary, so that many readers make it once.

A claim is a :class:`~aniki.sessions.policies._summary.Claim` record in the store's
per-session meta, taken and given back with the store's compare-and-swap (``_swap_meta``).
Its holder renews it while it works; a reader that finds a live claim waits until it is
given back, renewed or lapsed, then reads the history again (and finds the new summary).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from ._summary import CLAIM_KEY, SUMMARY_KEY, Claim

__all__ = ["LEASE", "Claims", "Lease"]

LEASE = 30.0
"""Seconds a claim lasts unless renewed (it is, every third of that)."""

Get = Callable[[str], Awaitable[Any]]
Swap = Callable[[str, Any, Any], Awaitable[bool]]


class Lease:
    """A claim held while a summary is made (``claim`` is ``None`` once lost or given back)."""

    def __init__(self, claim: Claim | None) -> None:
        self.claim = claim
        self.lost = False
        """Whether another reader took the claim over (it thought this one gone)."""
        self.keeper: asyncio.Future[None] | None = None


class Claims:
    """Takes, renews and gives back the claim of one session, through ``get`` and ``swap``
    (its store's ``get_meta`` and ``_swap_meta``, awaited)."""

    def __init__(self, get: Get, swap: Swap) -> None:
        self._get = get
        self._swap = swap

    async def claim(self, covered: int, record: Any) -> Lease | None:
        """A lease to summarize the history whose stored summary record is ``record``
        (covering ``covered`` messages); ``None`` after waiting for another reader's."""
        now = time.time()
        current = await self._get(CLAIM_KEY)
        held = Claim.from_record(current)
        if held is not None and held.expires > now:
            await self._wait(current, held)
            return None
        claim = Claim(uuid.uuid4().hex, covered, now + LEASE)
        if not await self._swap(CLAIM_KEY, current, claim.to_record()):
            return None  # another reader claimed it first: read again, and wait for it there
        lease = Lease(claim)
        if await self._get(SUMMARY_KEY) != record:  # a summary was stored meanwhile: use it
            await self.release(lease)
            return None
        lease.keeper = asyncio.ensure_future(self._keep(lease))
        return lease

    async def _wait(self, current: Any, held: Claim) -> None:
        """Until the claim ``current`` is given back, renewed or lapses (its holder may store
        several summaries, one per chunk, before it gives the claim back)."""
        pause = 0.02
        while time.time() < held.expires:
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.25)
            if await self._get(CLAIM_KEY) != current:
                return

    async def _keep(self, lease: Lease) -> None:
        """Renew the lease while its summary is being made, so that it never lapses then."""
        while lease.claim is not None:
            await asyncio.sleep(LEASE / 3)
            old = lease.claim
            new = Claim(old.owner, old.covered, time.time() + LEASE)
            if not await self._swap(CLAIM_KEY, old.to_record(), new.to_record()):
                lease.claim, lease.lost = None, True
                return
            lease.claim = new

    async def release(self, lease: Lease) -> None:
        """Give the claim back (a claim that cannot be given back lapses by itself)."""
        if lease.keeper is not None:
            lease.keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await lease.keeper
        claim, lease.claim = lease.claim, None
        if claim is not None:
            with contextlib.suppress(Exception):
                await self._swap(CLAIM_KEY, claim.to_record(), None)
