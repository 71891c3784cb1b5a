"""Claims on making a session's next summary, so that many readers make it once.

A claim is a :class:`~aniki.sessions.policies._summary.Claim` record in the store's
per-session meta, taken and given back with the store's compare-and-swap (``_swap_meta``).
It lasts :data:`LEASE` seconds, and its holder renews it only when it makes progress (each
time it stores a summary), never on a timer: a holder whose summarizer hangs lets its claim
lapse, however long its process lives. A reader that finds a live claim waits until it is
given back, taken over or lapsed, then reads the history again (and finds the new summary);
but a read waits a third of a lease at most, in all, and does not wait again for a claim it
gave up on, unchanged since: it reads on without the new summary meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from ._summary import CLAIM_KEY, SUMMARY_KEY, Claim

__all__ = ["LEASE", "Claims", "Lease"]

LEASE = 30.0
"""Seconds a claim lasts unless renewed (read when a :class:`Claims` is made)."""

Get = Callable[[str], Awaitable[Any]]
Swap = Callable[[str, Any, Any], Awaitable[bool]]


class Lease:
    """A claim held while a summary is made (``claim`` is ``None`` once lost or given back)."""

    def __init__(self, claim: Claim | None) -> None:
        self.claim = claim
        self.lost = False
        """Whether another reader took the claim over (it thought this one gone)."""


class Claims:
    """Takes, renews and gives back the claim of one session, through ``get`` and ``swap``
    (its store's ``get_meta`` and ``_swap_meta``, awaited)."""

    def __init__(self, get: Get, swap: Swap) -> None:
        self._get = get
        self._swap = swap
        self.lease = LEASE
        """Seconds a claim lasts unless renewed."""
        self._stalled: Any = None  # the claim record a read last gave up waiting for

    async def claim(
        self, covered: int, record: Any, started: float
    ) -> Lease | Literal["again", "busy"]:
        """A lease to summarize the history whose stored summary record is ``record``
        (covering ``covered`` messages), for a read that began at ``started`` (monotonic).

        ``"again"``: read again, another reader's summary may have changed the history's
        view. ``"busy"``: another reader's claim outlasted this read's patience (a third of a
        lease since ``started``), or did before, unchanged since: read on without waiting.
        """
        now = time.time()
        current = await self._get(CLAIM_KEY)
        held = Claim.from_record(current)
        # A claim due to run longer than a lease from now (with a lease's worth of clock
        # skew between machines) was not written by a reader: it is taken over, not waited on.
        if held is not None and now < held.expires <= now + 2 * self.lease:
            deadline = started + self.lease / 3
            if current != self._stalled and await self._wait(current, held, deadline):
                return "again"
            return "busy"
        claim = Claim(uuid.uuid4().hex, covered, now + self.lease)
        if not await self._swap(CLAIM_KEY, current, claim.to_record()):
            return "again"  # another reader claimed it first: read again, and wait for it there
        lease = Lease(claim)
        if await self._get(SUMMARY_KEY) != record:  # a summary was stored meanwhile: use it
            await self.release(lease)
            return "again"
        return lease

    async def _wait(self, current: Any, held: Claim, deadline: float) -> bool:
        """Until the claim ``current`` is given back, taken over or lapses (``True``), or
        until ``deadline`` (monotonic) passes first (``False``, the claim then stalled).

        Renewals by its holder (one per summary stored: a long history takes several) are
        waited through: the holder gives the claim back once its last summary is stored.
        """
        pause = 0.02
        while time.time() < held.expires:
            if time.monotonic() >= deadline:
                self._stalled = current
                return False
            await asyncio.sleep(min(pause, max(deadline - time.monotonic(), 0)))
            pause = min(pause * 2, 0.25)
            latest = await self._get(CLAIM_KEY)
            if latest != current:
                renewed = Claim.from_record(latest)
                if renewed is None or renewed.owner != held.owner:
                    return True
                current, held = latest, renewed
        return True

    async def renew(self, lease: Lease) -> bool:
        """Extend the claim by a lease from now, once its holder stored a summary (progress);
        ``False`` when another reader took it over meanwhile (it thought this one gone)."""
        old = lease.claim
        if old is None:
            return not lease.lost
        new = Claim(old.owner, old.covered, time.time() + self.lease)
        if not await self._swap(CLAIM_KEY, old.to_record(), new.to_record()):
            lease.claim, lease.lost = None, True
            return False
        lease.claim = new
        return True

    async def release(self, lease: Lease) -> None:
        """Give the claim back (a claim that cannot be given back lapses by itself)."""
        claim, lease.claim = lease.claim, None
        if claim is not None:
            with contextlib.suppress(Exception):
                await self._swap(CLAIM_KEY, claim.to_record(), None)
