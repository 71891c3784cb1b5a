"""``SummarizingSession``: older turns replaced by a stored summary, recent ones kept verbatim."""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, ClassVar

from ...errors import UserError
from ...messages import Message, MessageLike, to_message
from ...tokens import TokenCounter, counter_for_model
from .. import _session_io as session_io
from .._capabilities import ReadInfo, capabilities_of
from ..base import AsyncSession, Session
from ._checks import check_positive, check_session
from ._policy import CountsTokens
from ._select import select_start
from ._shorten import Shortener
from ._summarizer import Summarizer, summarize, summarize_in_place
from ._summary import (
    DEFAULT_PROMPT,
    SUMMARY_KEY,
    Summary,
    chunk_ends,
    find_summary,
    fits,
    place_summary,
    recent_window,
    summary_view,
)
from ._summary_claim import Claims, Lease

__all__ = ["SummarizingSession"]

logger = logging.getLogger("aniki")

_ROUNDS = 8
"""How often a read starts again after another reader's summary changed what it read."""

Fetch = Callable[[int | None], Awaitable[Sequence[Message]]]
"""Reads the last N messages (``None``: all) of the inner store."""


class SummarizingSession(CountsTokens):
    """A view of a session whose older part is replaced by a summary once it grows too long.

    While the history fits ``max_tokens`` it is returned as it is. When a read finds it over
    the budget, the ``summarizer`` agent folds the oldest messages into a summary, keeping the
    most recent ``keep_recent`` tokens verbatim (``None``: the run's own model, asked with the
    run's instructions, tools and history, which a prompt cache serves); the summary then
    takes at most ``max_tokens / 2 - keep_recent`` tokens, so the next summary comes only
    after about half a budget of new conversation. A read returns one system message holding
    the summary, then the kept messages, never splitting a tool exchange; one larger than what
    a summary leaves of the budget (``max_tokens - summary_tokens``) is sent shortened to fit.

    The summary is stored beside the history (the store's ``get_meta`` / ``set_meta``, under
    ``"aniki.summary"``) with how many messages it covers and a fingerprint of the last of
    them, so it is reused after a restart and dropped if the history is cleared or replaced
    (or if, written by hand, it would end inside a tool exchange);
    a store without ``get_meta`` keeps it in memory only. Each summary folds the previous one
    and the newly evicted messages, never the whole history. If the summarizer fails, a
    warning is logged, the read falls back to the most recent messages that fit, and the
    summary is tried again once the history has grown. The stored history is never rewritten.

    Readers share the work: over a store with a compare-and-swap on its meta (``_swap_meta``,
    as the built-in stores have), the first reader to find the history over budget claims the
    summary (under ``"aniki.summary.claim"``) and the others — objects, threads, processes —
    wait for it and reuse its summary; a summary is stored only over the one it extends, so
    the stored one never covers fewer messages. A claim lasts 30 s and is renewed only as
    summaries are stored; a read waits 10 s at most for another's summary, and returns the
    most recent messages that fit meanwhile. Without it, readers do not coordinate.

    Example::

        session = SummarizingSession(SQLiteSession("chat-42"), None, 8_000, model="gpt-4o-mini")
        await Runner().run(Agent("Assistant", model="gpt-4o-mini", session=session), message="Hi")
    """

    DEFAULT_PROMPT = DEFAULT_PROMPT
    """The summarizer's default instructions (``prompt=`` replaces them)."""
    blocking = False  # awaited on the loop: it calls a sync store in a worker thread itself

    # What it can do only when its inner store can (see aniki.sessions._capabilities).
    _INNER_DECIDES: ClassVar[frozenset[str]] = frozenset({"add_then_get", "undo"})
    _last_read: ReadInfo | None = None  # what the last read saw, for the run's reports

    def __init__(
        self,
        inner: Session | AsyncSession,
        summarizer: Summarizer | None,
        max_tokens: int,
        *,
        keep_recent: int | None = None,
        prompt: str = DEFAULT_PROMPT,
        model: str | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        check_session(inner)
        self.max_tokens = check_positive("max_tokens", max_tokens)
        """The most tokens a read returns (unless the last exchange alone is larger)."""
        keep = max_tokens // 4 if keep_recent is None else keep_recent
        if not isinstance(keep, int) or not 0 < keep < max_tokens // 2:
            raise UserError(
                f"keep_recent must be a whole number of tokens between 1 and "
                f"max_tokens // 2 - 1 = {max_tokens // 2 - 1}, got {keep_recent!r}"
            )
        self.keep_recent = keep
        """Tokens of the most recent messages kept verbatim when a summary is made."""
        self.summarizer = summarizer
        """The agent that writes summaries (run on a fresh in-memory session each time);
        ``None``: the model of the run reading the session, asked in the conversation's own
        terms, so that a prompt cache serves the request."""
        self.prompt = prompt
        """The summarizer's instructions."""
        self._counter = counter if counter is not None else counter_for_model(model)
        self._fit = Shortener(max_tokens - self.summary_tokens, lambda: self._counter)
        self._inner = inner
        can = capabilities_of(inner)
        # A sync store's calls run in a worker thread, so they never block the event loop.
        self._blocking, self._limited = can.blocking, can.limited
        self._now = can.try_now  # a short call of a store that can tell, on the loop instead
        self._meta = (can.get_meta, can.set_meta) if can.get_meta and can.set_meta else None
        self._swap_meta = can.swap_meta if self._meta is not None else None
        self._claims = Claims(self._load_record, self._swap) if self._swap_meta else None
        self._summary: Summary | None = None  # the record, for stores without get_meta
        self._total_hint: int | None = None
        self._previous_view: tuple[Message, ...] | None = None
        self._failed_at: int | None = None
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def inner(self) -> Session | AsyncSession:
        """The wrapped store, which holds the whole history."""
        return self._inner

    @property
    def id(self) -> str:
        """The inner store's id."""
        return str(self._inner.id)

    @property
    def summary_tokens(self) -> int:
        """The most tokens a summary may take: ``max_tokens // 2 - keep_recent``."""
        return self.max_tokens // 2 - self.keep_recent

    async def add_message(self, message: MessageLike) -> None:
        """Append one message to the inner store."""
        await self._io(lambda: self._inner.add_message(message))

    async def add_messages(self, messages: Iterable[MessageLike]) -> None:
        """Append a batch: atomically when the inner store has ``add_messages``."""
        await session_io.append(self._inner, [to_message(message) for message in messages])

    async def undo(self) -> tuple[Message, ...]:
        """Remove the last turn from the inner store (its ``undo()``) and return it. A summary
        that covered part of it no longer matches the history: the next read makes a new one.
        """
        undo = capabilities_of(self._inner).undo
        if undo is None:
            raise UserError(f"{type(self._inner).__name__} has no undo(); it cannot remove a turn")
        removed: tuple[Message, ...] = tuple(await self._io(undo))
        self._total_hint = self._failed_at = self._previous_view = None
        return removed

    async def clear(self) -> None:
        """Delete the inner store's history and the summary."""
        await self._io(self._inner.clear)
        self._summary = None
        self._total_hint = self._failed_at = self._previous_view = None
        if self._meta is not None:
            set_meta = self._meta[1]
            await self._io(lambda: set_meta(SUMMARY_KEY, None))

    async def summary(self) -> Summary | None:
        """The stored summary, or ``None`` before the first one is made."""
        if self._meta is None:
            return self._summary
        return Summary.from_record(await self._load_record())

    async def get_messages(self) -> tuple[Message, ...]:
        """The summary (when there is one) followed by the most recent messages that fit."""
        return await self._select(self._fetch, 0)

    def _add_then_get(self, messages: list[Message]) -> Any:
        # Append, then read, with the append fused into the first fetch when the inner store
        # can (see aniki.sessions._session_io); None, having written nothing, when it cannot.
        fused = capabilities_of(self._inner).add_then_get
        if fused is None:
            return None

        async def append_then_fetch(limit: int | None) -> Sequence[Message]:
            window = await self._io(
                lambda: fused(messages, limit) if limit is not None else fused(messages)
            )
            if window is None:  # the store below cannot fuse: nothing was written
                await self.add_messages(messages)
                return await self._fetch(limit)
            fetched: Sequence[Message] = window
            return fetched

        return self._select(append_then_fetch, len(messages))

    async def _select(self, first: Fetch, added: int) -> tuple[Message, ...]:
        """:meth:`get_messages`, whose first fetch is ``first`` (which may append ``added``
        messages before it reads)."""
        async with self._lock():
            started, cost = time.monotonic(), self._fit.synced().weigh
            for _ in range(_ROUNDS):
                record = await self._load_record()
                loaded, tail, total = await self._read_tail(
                    Summary.from_record(record) if self._meta else self._summary, first, added
                )
                first, added = self._fetch, 0  # the first fetch (maybe an append) is made
                self._total_hint = total
                summary = loaded
                if fits(summary, tail, self.max_tokens, cost) or self._failed_at == total:
                    break
                lease = await self._claim(loaded, record, started)
                if lease == "busy":  # another reader's summary takes long: go on without it
                    break
                if isinstance(lease, str):  # another reader made or is making it: read again
                    continue
                try:
                    summary, tail, settled = await self._fold(loaded, record, tail, total, lease)
                finally:
                    await self._release(lease)
                if settled:
                    break
            view, shortened = self._fit.sent(summary_view(summary, tail, self.max_tokens, cost))
            previous, self._previous_view = self._previous_view, view
            kept = view[: len(previous)] == previous if previous is not None else True
            self._last_read = ReadInfo(
                stored=total,
                summarized=summary.covered if summary else 0,
                prefix_kept=kept and summary is loaded,
                summary=summary is not None,
                shortened=shortened,
            )
            return view

    def _lock(self) -> asyncio.Lock:
        # One lock per event loop: run_sync() gives each call a loop of its own.
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        return lock

    async def _load_record(self, key: str = SUMMARY_KEY) -> Any:
        """The raw meta value under ``key`` (``None`` over a store without meta)."""
        if self._meta is None:
            return None
        get_meta = self._meta[0]
        return await self._io(lambda: get_meta(key))

    async def _swap(self, key: str, expected: Any, value: Any) -> bool:
        assert self._swap_meta is not None
        swap = self._swap_meta
        return bool(await self._io(lambda: swap(key, expected, value)))

    async def _save(self, summary: Summary, base: Any) -> Summary | None:
        """Store ``summary``, made over the stored record ``base``; ``None`` when done.

        With a compare-and-swap, a summary replaces only the record it was made over, or one
        covering fewer messages: a stored summary never regresses. When the stored one
        covers as much, it is returned instead, and ``summary`` is dropped.
        """
        self._summary = summary
        if self._meta is None:
            return None
        record = summary.to_record()
        if self._swap_meta is None:
            set_meta = self._meta[1]
            await self._io(lambda: set_meta(SUMMARY_KEY, record))
            return None
        for _ in range(_ROUNDS):
            if await self._swap(SUMMARY_KEY, base, record):
                return None
            base = await self._load_record()
            stored = Summary.from_record(base)
            if stored is not None and stored.covered >= summary.covered:
                return stored
        return Summary.from_record(base) or summary  # not stored: the read starts again

    async def _claim(self, loaded: Summary | None, record: Any, started: float) -> Lease | str:
        """The right to summarize now, or why not (see :meth:`Claims.claim`).

        Over a store without ``_swap_meta`` every reader summarizes (an empty lease).
        """
        if self._claims is None:
            return Lease(None)
        return await self._claims.claim(loaded.covered if loaded else 0, record, started)

    async def _release(self, lease: Lease) -> None:
        if self._claims is not None:
            await self._claims.release(lease)

    async def _fetch(self, limit: int | None) -> Sequence[Message]:
        inner: Any = self._inner
        if limit is not None and self._limited:
            messages: Sequence[Message] = await self._io(lambda: inner.get_messages(limit=limit))
        else:
            messages = await self._io(inner.get_messages)
        return messages

    async def _io(self, work: Callable[[], Any]) -> Any:
        """``work()``, a call to the inner store: in a worker thread for a sync store that
        does I/O, awaited on the loop for an async one."""
        return await session_io.call(self._blocking, work, self._now)

    async def _read_tail(
        self, summary: Summary | None, first: Fetch, added: int
    ) -> tuple[Summary | None, Sequence[Message], int]:
        """The summary if it still applies (its end is in the history and starts a valid
        view: a stored summary is only a hint), the messages after it, and the history's length.

        When the last read's length is known, only the recent window is fetched and the
        summary's last message is looked for in it; anything unclear falls back to a full read.
        ``first`` makes the first fetch, exactly once (it may append ``added`` messages).
        """
        hint = self._total_hint
        if summary is not None and self._limited and hint is not None:
            wanted = recent_window(summary, hint + added)
            if wanted is not None:
                window = await first(wanted)
                if len(window) < wanted:  # the whole history
                    return place_summary(summary, window)
                after = find_summary(summary, window, hint)
                if after is not None:
                    return summary, *after
                return place_summary(summary, await self._fetch(None))
        return place_summary(summary, await first(None))

    async def _fold(
        self,
        summary: Summary | None,
        base: Any,
        tail: Sequence[Message],
        total: int,
        lease: Lease,
    ) -> tuple[Summary | None, Sequence[Message], bool]:
        """Fold the messages before the recent ``keep_recent`` tokens into the summary.

        Returns the summary, the messages after it (on failure, as far as it got), and
        whether they are settled: ``False`` when another reader's summary took its place,
        to be read again.
        """
        cost, sent = self._fit.weigh, self._fit.sent(tail)[0]  # as a view sends it
        keep_from = select_start(tail, self.keep_recent, cost)
        evicted = tail[:keep_from]
        covered = summary.covered if summary else 0
        done = 0
        ends = chunk_ends(evicted, cost, self.max_tokens)
        # Without a summarizer, one fold is asked of the run's model in the conversation's
        # own terms (a prompt cache serves it); a long history, chunk by chunk, as transcripts.
        in_place, kept = self.summarizer is None and len(ends) == 1, len(tail) - len(evicted)
        share, counter = self.summary_tokens, self._counter
        for end in ends:
            previous = summary.text if summary else None
            try:
                if in_place:
                    text = await summarize_in_place(
                        self.prompt, previous, sent, kept, share=share, counter=counter
                    )
                else:
                    text = await summarize(
                        self.summarizer,
                        self.prompt,
                        previous,
                        sent[done:end],
                        share=share,
                        counter=counter,
                    )
            except Exception as exc:  # any failure: the run goes on without a new summary
                self._failed_at = total
                logger.warning(
                    "summarizing session %r failed (%s: %s); using the most recent messages "
                    "that fit and trying again once the history grows",
                    self.id,
                    type(exc).__name__,
                    exc,
                )
                break
            done = end
            summary = Summary.covering(text, covered + done, evicted[done - 1])
            if await self._save(summary, base) is not None:
                return summary, tail[done:], False
            base = summary.to_record()
            claims = self._claims  # renewed on progress only: a hung summarizer lets it lapse
            if claims and done < len(evicted) and not await claims.renew(lease):
                break  # another reader took over: it goes on from this summary
        return summary, tail[done:], True

    def __repr__(self) -> str:
        return f"SummarizingSession({self._inner!r}, max_tokens={self.max_tokens})"
