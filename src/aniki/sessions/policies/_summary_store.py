"""Where a summarizing session reads and writes: the history and the summary's record.

:class:`SummaryStore` wraps the inner store for :class:`~aniki.sessions.SummarizingSession`:
every call is awaited, a sync store's in a worker thread (or on the loop, when the store can
tell that a call is short), so the policy never blocks the event loop. The summary's record
lives in the store's per-session meta under :data:`~._summary.SUMMARY_KEY`, in this object
over a store without meta. Over a store with a compare-and-swap on its meta, a summary is
stored only over the record it was made from (or one covering fewer messages), and the
readers of one session take turns making the next one (:mod:`._summary_claim`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...messages import Message
from .. import _session_io as session_io
from .._capabilities import capabilities_of
from ..base import AsyncSession, Session
from ._summary import SUMMARY_KEY, Summary
from ._summary_claim import Claims, Lease

__all__ = ["SummaryStore"]

_ROUNDS = 8
"""How often a save tries again after another reader's summary replaced the record."""


class SummaryStore:
    """The inner store of a summarizing session, its calls awaited.

    Example::

        store = SummaryStore(SQLiteSession("chat-42"))
        record = await store.load()
        history = await store.fetch(None)
    """

    def __init__(self, inner: Session | AsyncSession) -> None:
        self.inner = inner
        """The wrapped store, which holds the whole history."""
        can = capabilities_of(inner)
        # A sync store's calls run in a worker thread, so they never block the event loop.
        self._blocking = can.blocking
        self.limited = can.limited
        """Whether the store reads its last N messages (``get_messages(limit=...)``)."""
        self._now = can.try_now  # a short call of a store that can tell, on the loop instead
        self._meta = (can.get_meta, can.set_meta) if can.get_meta and can.set_meta else None
        self._swap_meta = can.swap_meta if self._meta is not None else None
        self._claims = Claims(self.load, self._swap) if self._swap_meta else None
        self.summary: Summary | None = None
        """The last summary stored: the record itself over a store without meta."""

    @property
    def has_meta(self) -> bool:
        """Whether the summary's record lives in the store (else in this object only)."""
        return self._meta is not None

    async def io(self, work: Callable[[], Any]) -> Any:
        """``work()``, a call to the inner store: in a worker thread for a sync store that
        does I/O, awaited on the loop for an async one."""
        return await session_io.call(self._blocking, work, self._now)

    async def fetch(self, limit: int | None) -> Sequence[Message]:
        """The last ``limit`` messages (``None``: all)."""
        inner: Any = self.inner
        if limit is not None and self.limited:
            messages: Sequence[Message] = await self.io(lambda: inner.get_messages(limit=limit))
        else:
            messages = await self.io(inner.get_messages)
        return messages

    async def load(self, key: str = SUMMARY_KEY) -> Any:
        """The raw meta value under ``key`` (``None`` over a store without meta)."""
        if self._meta is None:
            return None
        get_meta = self._meta[0]
        return await self.io(lambda: get_meta(key))

    def read(self, record: Any) -> Summary | None:
        """The summary the record ``load()`` returned holds (over a store without meta, the
        one kept here)."""
        return Summary.from_record(record) if self._meta is not None else self.summary

    async def forget(self) -> None:
        """Delete the stored summary."""
        self.summary = None
        if self._meta is not None:
            set_meta = self._meta[1]
            await self.io(lambda: set_meta(SUMMARY_KEY, None))

    async def _swap(self, key: str, expected: Any, value: Any) -> bool:
        assert self._swap_meta is not None
        swap = self._swap_meta
        return bool(await self.io(lambda: swap(key, expected, value)))

    async def save(self, summary: Summary, base: Any) -> Summary | None:
        """Store ``summary``, made over the stored record ``base``; ``None`` when done.

        With a compare-and-swap, a summary replaces only the record it was made over, or one
        covering fewer messages: a stored summary never regresses. When the stored one
        covers as much, it is returned instead, and ``summary`` is dropped.
        """
        self.summary = summary
        if self._meta is None:
            return None
        record = summary.to_record()
        if self._swap_meta is None:
            set_meta = self._meta[1]
            await self.io(lambda: set_meta(SUMMARY_KEY, record))
            return None
        for _ in range(_ROUNDS):
            if await self._swap(SUMMARY_KEY, base, record):
                return None
            base = await self.load()
            stored = Summary.from_record(base)
            if stored is not None and stored.covered >= summary.covered:
                return stored
        return Summary.from_record(base) or summary  # not stored: the read starts again

    async def claim(self, loaded: Summary | None, record: Any, started: float) -> Lease | str:
        """The right to summarize now, or why not (see :meth:`Claims.claim`).

        Over a store without ``_swap_meta`` every reader summarizes (an empty lease).
        """
        if self._claims is None:
            return Lease(None)
        return await self._claims.claim(loaded.covered if loaded else 0, record, started)

    async def renew(self, lease: Lease) -> bool:
        """Extend the claim after progress; ``False`` when another reader took it over."""
        return self._claims is None or await self._claims.renew(lease)

    async def release(self, lease: Lease) -> None:
        """Give the claim back."""
        if self._claims is not None:
            await self._claims.release(lease)
