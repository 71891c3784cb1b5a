"""``SummarizingSession``: older turns replaced by a stored summary, recent ones kept verbatim.

The read and the fold live here; what the tail after a summary sends (its old tool results
cleared) and what a fold reads, in :mod:`._summary_view`; where the history and the summary's
record are read and written, in :mod:`._summary_store`.
"""

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
from .._capabilities import capabilities_of
from .._reads import ReadInfo
from ..base import AsyncSession, Session
from ._checks import check_clearing, check_positive, check_session
from ._clearing import ClearToolResults
from ._policy import CountsTokens
from ._shorten import Shortener
from ._summarizer import Summarizer, summarize, summarize_in_place
from ._summary import (
    DEFAULT_PROMPT,
    Summary,
    find_summary,
    fits,
    place_summary,
    recent_window,
    summary_view,
)
from ._summary_claim import Lease
from ._summary_store import SummaryStore
from ._summary_view import Tail, known_turns, plan_fold

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

    With ``clear_tool_results`` (``True`` or a :class:`~aniki.sessions.ClearToolResults`), the
    kept messages' old tool results are sent as placeholders and their old attachments by
    name, in steps over turns counted from the start of the whole history (the summary keeps
    how many it covers), as the windows do; the budget counts the placeholders, and a fold
    reads them too. Over tool-heavy turns ``ClearToolResults(every=1)`` bills least: it lets
    the fewest whole results pile up, so summaries come least often. The stored summary is
    shared by every setting: it stands for the same messages whichever made it.

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

        session = SummarizingSession(SQLiteSession("chat-42"), None, 8_000, model="gpt-4o-mini",
                                     clear_tool_results=True)
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
        clear_tool_results: ClearToolResults | bool | None = None,
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
        self._clearing = check_clearing(clear_tool_results)
        self._counter = counter if counter is not None else counter_for_model(model)
        self._fit = Shortener(max_tokens - self.summary_tokens, lambda: self._counter)
        self._inner = inner
        self._store = SummaryStore(inner)
        self._counted: Summary | None = None  # the last summary whose turns are known here
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
        await self._store.io(lambda: self._inner.add_message(message))

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
        removed: tuple[Message, ...] = tuple(await self._store.io(undo))
        self._forget_reads()
        return removed

    async def clear(self) -> None:
        """Delete the inner store's history and the summary."""
        await self._store.io(self._inner.clear)
        self._forget_reads()
        await self._store.forget()

    def _forget_reads(self) -> None:
        self._total_hint = self._failed_at = self._previous_view = self._counted = None

    async def summary(self) -> Summary | None:
        """The stored summary, or ``None`` before the first one is made."""
        return self._store.read(await self._store.load())

    async def get_messages(self) -> tuple[Message, ...]:
        """The summary (when there is one) followed by the most recent messages that fit."""
        return await self._select(self._store.fetch, 0)

    def _add_then_get(self, messages: list[Message]) -> Any:
        # Append, then read, with the append fused into the first fetch when the inner store
        # can (see aniki.sessions._session_io); None, having written nothing, when it cannot.
        fused = capabilities_of(self._inner).add_then_get
        if fused is None:
            return None

        async def append_then_fetch(limit: int | None) -> Sequence[Message]:
            window = await self._store.io(
                lambda: fused(messages, limit) if limit is not None else fused(messages)
            )
            if window is None:  # the store below cannot fuse: nothing was written
                await self.add_messages(messages)
                return await self._store.fetch(limit)
            fetched: Sequence[Message] = window
            return fetched

        return self._select(append_then_fetch, len(messages))

    async def _select(self, first: Fetch, added: int) -> tuple[Message, ...]:
        """:meth:`get_messages`, whose first fetch is ``first`` (which may append ``added``
        messages before it reads)."""
        async with self._lock():
            started, cost, store = time.monotonic(), self._fit.synced().weigh, self._store
            for _ in range(_ROUNDS):
                record = await store.load()
                stored = known_turns(store.read(record), self._counted)
                loaded, tail, total = await self._read_tail(stored, first, added)
                first, added = store.fetch, 0  # the first fetch (maybe an append) is made
                self._total_hint = total
                summary = loaded
                if fits(summary, tail.sent, self.max_tokens, cost) or self._failed_at == total:
                    break
                lease = await store.claim(loaded, record, started)
                if lease == "busy":  # another reader's summary takes long: go on without it
                    break
                if isinstance(lease, str):  # another reader made or is making it: read again
                    continue
                try:
                    summary, tail, settled = await self._fold(loaded, record, tail, total, lease)
                finally:
                    await store.release(lease)
                if settled:
                    break
            sent = summary_view(summary, tail.sent, self.max_tokens, cost)
            view, shortened = self._fit.sent(sent)
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

    async def _read_tail(
        self, summary: Summary | None, first: Fetch, added: int
    ) -> tuple[Summary | None, Tail, int]:
        """The summary if it still applies (its end is in the history and starts a valid
        view: a stored summary is only a hint), the messages after it, and the history's length.

        When the last read's length is known, only the recent window is fetched and the
        summary's last message is looked for in it; anything unclear falls back to a full read,
        and so does a summary whose turns a clearing view needs and nobody counted yet (a
        record written before they were kept). ``first`` makes the first fetch, exactly once
        (it may append ``added`` messages).
        """
        hint, fetch = self._total_hint, self._store.fetch
        counted = summary is None or summary.turns is not None or self._clearing is None
        if summary is not None and self._store.limited and hint is not None and counted:
            wanted = recent_window(summary, hint + added)
            if wanted is not None:
                window = await first(wanted)
                if len(window) < wanted:  # the whole history
                    return self._tail(*place_summary(summary, window))
                after = find_summary(summary, window, hint)
                if after is not None:
                    return self._tail(summary, *after)
                return self._tail(*place_summary(summary, await fetch(None)))
        return self._tail(*place_summary(summary, await first(None)))

    def _tail(
        self, summary: Summary | None, after: Sequence[Message], total: int
    ) -> tuple[Summary | None, Tail, int]:
        """What :meth:`_read_tail` found, the messages after the summary made a :class:`Tail`;
        a summary whose turns are known is remembered with them."""
        if summary is not None and summary.turns is not None:
            self._counted = summary
        turns = 0 if summary is None else summary.turns
        return summary, Tail.of(after, turns, self._clearing), total

    async def _fold(
        self, summary: Summary | None, base: Any, tail: Tail, total: int, lease: Lease
    ) -> tuple[Summary | None, Tail, bool]:
        """Fold the messages before the recent ``keep_recent`` tokens into the summary.

        Returns the summary, the messages after it (on failure, as far as it got), and
        whether they are settled: ``False`` when another reader's summary took its place,
        to be read again.
        """
        cost = self._fit.weigh
        sent = self._fit.sent(tail.sent)[0]  # as a view sends it: cleared, then shortened
        plan = plan_fold(tail, cost, self.keep_recent, self.max_tokens)
        covered, done = summary.covered if summary else 0, 0
        # Without a summarizer, one fold is asked of the run's model in the conversation's
        # own terms (a prompt cache serves it); a long history, chunk by chunk, as transcripts.
        in_place = self.summarizer is None and len(plan.ends) == 1
        for end in plan.ends:
            previous = summary.text if summary else None
            try:
                if in_place:
                    text = await self._summarize(previous, sent, len(sent) - end)
                else:
                    text = await self._summarize(previous, sent[done:end], None)
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
            folded = tail.after(done)
            summary = Summary.covering(text, covered + done, tail.stored[done - 1], folded.turns)
            if await self._store.save(summary, base) is not None:
                return summary, folded, False
            base = summary.to_record()
            # Renewed on progress only: a hung summarizer lets the claim lapse.
            if done < plan.evicted and not await self._store.renew(lease):
                break  # another reader took over: it goes on from this summary
        return summary, tail.after(done), True

    async def _summarize(
        self, previous: str | None, messages: Sequence[Message], kept: int | None
    ) -> str:
        """The summary of ``previous`` and ``messages``: as a transcript (``kept`` is
        ``None``), or by the run's model in place, of all but the last ``kept`` messages."""
        share, counter = self.summary_tokens, self._counter
        if kept is not None:
            return await summarize_in_place(
                self.prompt, previous, messages, kept, share=share, counter=counter
            )
        return await summarize(
            self.summarizer, self.prompt, previous, messages, share=share, counter=counter
        )

    def __repr__(self) -> str:
        clearing = self._clearing
        option = "" if clearing is None else f", clear_tool_results={clearing!r}"
        return f"SummarizingSession({self._inner!r}, max_tokens={self.max_tokens}{option})"
