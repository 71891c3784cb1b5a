"""A stored summary is a hint: one whose boundary starts no valid view is treated as none.

A summary lives in the store's per-session meta (``aniki.summary``), where anything may be
written: by hand, by another version, by a tool that edits the store. Whatever the meta holds,
the view a ``SummarizingSession`` returns is valid for a provider (no tool result without the
assistant message that called it, no call without all its results). A record whose boundary
falls inside a tool exchange, past the end, at a message no longer stored, or that cannot be
read is ignored: the view is what it would be with no summary stored, and the policy
summarizes afresh when the history needs it. A summary that does start a valid view is reused.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import pytest

from aniki import Message
from aniki.sessions import InMemorySession
from aniki.sessions.policies import SummarizingSession
from aniki.sessions.policies._summary import CLAIM_KEY, SUMMARY_KEY, Claim, Summary, summary_message
from aniki.tokens import EstimatingCounter

from .histories import assistant, result, user
from .stores import Store, resolve
from .summaries import Summarizer, tagged
from .test_cut_hints import assert_valid

COUNTER = EstimatingCounter()
BUDGET = 300


def last_turn(tag: str) -> list[Message]:
    """A question answered with three parallel tool calls, then a reply."""
    return [
        user(f"look these up {tag}"),
        assistant("", f"x{tag}", f"y{tag}", f"z{tag}"),
        result(f"x{tag}", "found x"),
        result(f"y{tag}", "found y"),
        result(f"z{tag}", "found z"),
        assistant(f"all found {tag}"),
    ]


def conversation(turns: int) -> list[Message]:
    messages: list[Message] = []
    for t in range(turns):
        messages.append(user(f"question {t} " + "word " * 12))
        if t % 2:
            messages += [assistant("", f"call{t}"), result(f"call{t}", f"found {t} " * 6)]
        messages.append(assistant(f"answer {t} " + "word " * 12))
    return messages


SHORT = tagged([user("hello"), assistant("hi"), *last_turn("s")])
"""Fits the budget: with no summary, the view is the whole history."""
LONG = tagged([*conversation(10), *last_turn("l")])
"""Over the budget: with no summary, the policy summarizes it."""
UNDONE = tagged([*conversation(10), *last_turn("l"), *last_turn("u")])
"""``LONG`` and one more turn, to be undone."""


def policy(inner: Any, summarizer: Summarizer) -> SummarizingSession:
    return SummarizingSession(inner, summarizer.agent, BUDGET, counter=COUNTER)


def index_of(history: Sequence[Message], role: str, text: str) -> int:
    return next(i for i, m in enumerate(history) if m.role == role and m.content.endswith(text))


def forged(stored: Sequence[Message], covered: int, text: str = "a forged summary") -> Any:
    """A well-formed record standing for ``stored[:covered]``, as a hand would write it."""
    return Summary.covering(text, covered, stored[covered - 1]).to_record()


def hostile_summaries(stored: Sequence[Message]) -> dict[str, Any]:
    """Meta values whose boundary starts no valid view, or that hold no summary at all."""
    first = index_of(stored, "tool", "found x")  # the last turn's first tool result
    valid = forged(stored, first - 1)  # up to the last turn's question: a valid start
    nested: Any = "deep"
    for _ in range(100):
        nested = [nested]
    return {
        "ending just before a tool result": forged(stored, first),
        "ending in the middle of a tool-call group": forged(stored, first + 1),
        "ending before the group's last result": forged(stored, first + 2),
        "past the end": {**forged(stored, len(stored)), "covered": len(stored) + 5},
        "with a huge count": {**valid, "covered": 10**30},
        "with a count of zero": {**valid, "covered": 0},
        "with a negative count": {**valid, "covered": -3},
        "with a count as text": {**valid, "covered": str(first - 1)},
        "with a count as a flag": {**valid, "covered": True},
        "with a count as a fraction": {**valid, "covered": first - 1.0},
        "at an unknown message": {**valid, "anchor": "0" * 32},
        "with a text that is a number": {**valid, "text": 42},
        "with a size as text": {**valid, "anchor_size": str(valid["anchor_size"])},
        "without an anchor": {k: v for k, v in valid.items() if k != "anchor"},
        "of a future version": {**valid, "version": 99},
        "as a string": "aniki.summary of 3 messages",
        "as a huge string": "a forged summary " * 20_000,
        "as a number": 3,
        "as a list": [3, 4],
        "nested deep": nested,
    }


async def fill(store: Store, name: str, history: Sequence[Message]) -> Any:
    inner = store.open(name)
    await resolve(inner.add_messages(history))
    return inner


async def without_summary(history: Sequence[Message]) -> tuple[tuple[Message, ...], Summarizer]:
    """The view of ``history`` with nothing stored in meta, and the summarizer calls made."""
    summarizer = Summarizer()
    inner = InMemorySession()
    inner.add_messages(history)
    return tuple(await policy(inner, summarizer).get_messages()), summarizer


@pytest.mark.parametrize("history", [SHORT, LONG], ids=["fits", "over"])
async def test_a_summary_that_starts_no_valid_view_is_ignored(
    store: Store, history: list[Message]
) -> None:
    if not store.has_meta:
        pytest.skip("a store without meta keeps the summary in memory")
    expected, fresh = await without_summary(history)
    for number, case in enumerate(hostile_summaries(history)):
        inner = await fill(store, f"summary-hints-{number}", history)
        # A record names its last message by fingerprint, which includes the stored id.
        value = hostile_summaries(await resolve(inner.get_messages()))[case]
        await resolve(inner.set_meta(SUMMARY_KEY, value))
        summarizer = Summarizer()
        view = tuple(await policy(inner, summarizer).get_messages())
        assert_valid(view)
        assert view == expected, f"a summary {case}: {[m.content[:30] for m in view]}"
        assert summarizer.folded == fresh.folded, f"a summary {case}: not summarized afresh"
        assert summarizer.previous == fresh.previous
        again = Summarizer()
        assert tuple(await policy(inner, again).get_messages()) == expected, case
        assert again.calls == 0, f"a summary {case}: the new summary was not reused"


async def test_a_reader_that_already_read_ignores_a_hostile_summary(store: Store) -> None:
    # A reader that knows the history's length looks for the summary in the recent window
    # only: what it finds there is a hint too.
    if not store.has_meta:
        pytest.skip("a store without meta keeps the summary in memory")
    cases = list(hostile_summaries(LONG))[:5]
    for number, case in enumerate(cases):
        inner = await fill(store, f"summary-hints-read-{number}", LONG)
        summarizer = Summarizer()
        reader = policy(inner, summarizer)
        await reader.get_messages()
        assert summarizer.calls >= 1
        value = hostile_summaries(await resolve(inner.get_messages()))[case]
        await resolve(inner.set_meta(SUMMARY_KEY, value))
        made = summarizer.calls
        view = tuple(await reader.get_messages())
        assert_valid(view)
        assert view[0] == summary_message(f"summary number {summarizer.calls}"), case
        assert summarizer.previous[made] is None, f"a summary {case} was folded on"
        assert summarizer.folded[made][0] == 0, f"a summary {case}: not summarized afresh"
        assert view[1:] == tuple(LONG[len(LONG) - len(view) + 1 :]), case


@pytest.mark.parametrize("covered", ["through the question", "through the reply"])
async def test_a_summary_of_an_undone_turn_is_ignored(store: Store, covered: str) -> None:
    if not store.has_meta:
        pytest.skip("a store without meta keeps the summary in memory")
    inner = await fill(store, f"summary-hints-undo-{covered[-5:]}", UNDONE)
    if not callable(getattr(inner, "undo", None)):
        pytest.skip("a store without undo()")
    stored = await resolve(inner.get_messages())
    question = len(LONG)  # the turn undone next: a valid summary until it is gone
    end = question + 1 if covered == "through the question" else len(stored)
    await resolve(inner.set_meta(SUMMARY_KEY, forged(stored, end)))
    await resolve(inner.undo())
    summarizer = Summarizer()
    view = tuple(await policy(inner, summarizer).get_messages())
    assert_valid(view)
    expected, fresh = await without_summary(LONG)
    assert view == expected
    assert summarizer.folded == fresh.folded


async def test_a_summary_at_a_valid_start_is_reused(store: Store) -> None:
    if not store.has_meta:
        pytest.skip("a store without meta keeps the summary in memory")
    # Written by hand, at a boundary no exchange crosses: it is used as it is.
    inner = await fill(store, "summary-hints-valid", SHORT)
    stored = await resolve(inner.get_messages())
    covered = index_of(stored, "user", "look these up s") + 1
    await resolve(inner.set_meta(SUMMARY_KEY, forged(stored, covered, "they said hello")))
    summarizer = Summarizer()
    view = tuple(await policy(inner, summarizer).get_messages())
    assert view == (summary_message("they said hello"), *SHORT[covered:])
    assert summarizer.calls == 0
    # Made by the policy, over tool exchanges: reused by another reader, and after a restart.
    inner = await fill(store, "summary-hints-made", LONG)
    maker = Summarizer()
    first = policy(inner, maker)
    view = tuple(await first.get_messages())
    assert view[0].role == "system" and maker.calls >= 1
    opened = store.open("summary-hints-made") if store.persistent else inner
    later = Summarizer()
    assert tuple(await policy(opened, later).get_messages()) == view
    question = tagged([*LONG, user("and now?")])[-1]
    await resolve(inner.add_messages([question]))
    made = maker.calls
    assert tuple(await first.get_messages()) == (*view, question)
    assert maker.calls == made and later.calls == 0


async def test_readers_over_a_hostile_summary_make_one_fresh_summary(store: Store) -> None:
    if not store.has_meta:
        pytest.skip("a store without meta keeps the summary in memory")
    if store.kind == "async_memory":
        pytest.skip("a store without compare-and-swap: its readers do not coordinate")
    inner = await fill(store, "summary-hints-readers", LONG)
    stored = await resolve(inner.get_messages())
    await resolve(inner.set_meta(SUMMARY_KEY, forged(stored, index_of(stored, "tool", "found x"))))
    summarizer = Summarizer()
    readers = [
        policy(store.open("summary-hints-readers") if store.persistent else inner, summarizer)
        for _ in range(4)
    ]
    views = await asyncio.gather(*(reader.get_messages() for reader in readers))
    for view in views:  # a reader may return a summary that the claim's holder then extends
        assert_valid(view)
        assert view[0].role == "system", [m.content[:24] for m in view]
    folded = summarizer.all_folded()
    assert sorted(folded) == sorted(set(folded)), f"folded more than once: {summarizer.folded}"
    expected, fresh = await without_summary(LONG)
    assert summarizer.folded == fresh.folded
    assert tuple(await readers[0].get_messages()) == expected


@pytest.mark.parametrize("ahead", [3600.0, 1e12], ids=["an hour", "ages"])
async def test_a_claim_due_to_outlast_any_lease_is_taken_over(store: Store, ahead: float) -> None:
    if not store.has_meta:
        pytest.skip("a store without meta keeps no claim")
    expected, fresh = await without_summary(LONG)
    inner = await fill(store, f"summary-claim-{ahead}", LONG)
    claim = Claim("someone", 0, time.time() + ahead).to_record()
    await resolve(inner.set_meta(CLAIM_KEY, claim))
    summarizer = Summarizer()
    started = time.monotonic()
    view = tuple(await policy(inner, summarizer).get_messages())
    # A claim a reader honours holds each new reader for up to a third of a lease (10 s).
    assert time.monotonic() - started < 5, "the read waited on a claim no reader could hold"
    assert view == expected
    assert summarizer.folded == fresh.folded, "not summarized: the hostile claim was honoured"
