"""``SummarizingSession(clear_tool_results=...)``: the tail after the summary sends its old tool
results as placeholders (and old attachments by name), in steps over turns counted from the
start of the whole history, the summarized part included. Property-tested against a brute-force
oracle written from the documented rule, over random tool-heavy histories read after every
append, on the memory, SQLite and file stores, sync and async, with a new policy (and store)
object per read; then what a fold reads, old records, the meta key, and a run."""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aniki import Agent, Attachment, Message, Runner, ToolCall
from aniki.sessions import ClearToolResults, InMemorySession, SummarizingSession
from aniki.sessions.policies._summary import SUMMARY_KEY, Summary, summary_message
from aniki.sessions.sqlite import SQLiteSession
from aniki.testing import MockProvider, MockReply

from .histories import (
    allowed,
    as_sent,
    assert_provider_valid,
    assistant,
    expected_start,
    result,
    word_cost,
)
from .stores import make_store, resolve
from .summaries import tagged
from .test_clearing import WordCounter, placeholder
from .transcripts import entries_of, parse_request

TEXT = "the summary"
"""What the scripted summarizer always replies: the summary's message costs the same always."""


class Summarizer:
    """A summarizer agent that replies :data:`TEXT` and keeps what each request asked it to fold."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.agent = Agent("Summarizer", model="s", provider=MockProvider(handler=self._reply))

    def _reply(self, request: Any) -> str:
        self.requests.append(request.messages[-1].content)
        return TEXT

    def folded(self) -> list[tuple[str, ...]]:
        """Every message part the summarizer was given, in order, over every request."""
        return [entry for text in self.requests for entry in parse_request(text).entries]


# --- the oracle, from the documented rule ----------------------------------------------------


def cleared(history: Sequence[Message], rules: ClearToolResults | None) -> list[Message]:
    """``history`` as it is sent: at turn ``T`` (the user messages of the whole history), the
    results of at least ``min_chars`` characters of the turns up to ``L = ((T - keep) // every)
    * every`` replaced by their placeholders, the attachments of those turns by their names
    (the messages before the first user message count with the first turn; ``L = 0`` clears
    nothing)."""
    if rules is None:
        return list(history)
    line = max(0, (sum(m.role == "user" for m in history) - rules.keep_turns))
    line = line // rules.every * rules.every
    out, turn, names = [], 0, {}
    for message in history:
        turn += message.role == "user"
        for call in message.tool_calls:
            names[call.id] = call.name
        if line > 0 and turn <= line:
            if message.role == "tool" and len(message.content) >= rules.min_chars:
                text = placeholder(names[message.tool_call_id or ""], len(message.content))
                message = Message("tool", text, tool_call_id=message.tool_call_id)
            elif message.attachments:
                notes = [
                    f"[{a.kind} {a.name} cleared from the context to save space]"
                    for a in message.attachments
                ]
                content = "\n".join(part for part in (message.content, *notes) if part)
                message = Message(message.role, content, tool_calls=message.tool_calls)
        out.append(message)
    return out


def oracle(
    history: Sequence[Message], budget: int, keep: int, rules: ClearToolResults | None
) -> tuple[list[list[Message]], list[Message]]:
    """After each append: the view; and every message a fold gave the summarizer, in order.

    A read sends the summary's message, then the messages after it as :func:`cleared` sends
    them (each alone over what a summary leaves of the budget shortened, by the rule of
    ``test_oversize.py``). When they and the summary are over ``budget``, the summary folds
    all but the most recent ``keep`` tokens of them, as sent; then the view is the longest
    valid suffix that fits what the summary leaves."""
    allowance = budget - (budget // 2 - keep)
    head = summary_message(TEXT)
    covered, summarized, views, folded = 0, False, [], []
    for count in range(1, len(history) + 1):
        sent = as_sent(cleared(history[:count], rules), allowance)
        tail = sent[covered:]
        room = budget - (word_cost(head) if summarized else 0)
        if sum(map(word_cost, tail)) > room:
            evicted = expected_start(tail, keep, word_cost)
            if evicted:
                folded += tail[:evicted]
                covered, summarized, tail = covered + evicted, True, tail[evicted:]
                room = budget - word_cost(head)
        kept = tail[expected_start(tail, max(room, 0), word_cost) :]
        views.append(([head] if summarized else []) + kept)
    return views, folded


# --- the property ----------------------------------------------------------------------------

PERSISTENT = {"sqlite", "async_sqlite", "file", "async_file"}


@st.composite
def tool_heavy(draw: st.DrawFn) -> list[Message]:
    """3 to 12 turns of: a user message (sometimes with an attachment), zero to three chained
    rounds of single or parallel tool calls (results in any order, of any length, call ids
    sometimes reused across exchanges), then a reply (sometimes missing, as when a run
    stopped); sometimes a system message first."""
    fresh, words = itertools.count(), st.integers(min_value=1, max_value=60)
    sizes = st.integers(min_value=1, max_value=150)
    photo = Attachment("image/png", data=b"\x89PNG" + bytes(8), name="shot.png")
    messages = [Message("system", "be brief")] if draw(st.booleans()) else []
    for turn in range(draw(st.integers(min_value=3, max_value=12))):
        attached = (photo,) if draw(st.integers(min_value=0, max_value=4)) == 0 else ()
        messages.append(Message("user", f"u{turn} " + "word " * draw(words), attachments=attached))
        for _round in range(draw(st.integers(min_value=0, max_value=3))):
            width = draw(st.integers(min_value=1, max_value=3))
            if draw(st.integers(min_value=0, max_value=4)) == 0:
                pool = st.sampled_from(["r0", "r1", "r2", "r3"])
                ids = draw(st.lists(pool, min_size=width, max_size=width, unique=True))
            else:
                ids = [f"c{next(fresh)}" for _ in range(width)]
            messages.append(assistant("", *ids))
            for call_id in draw(st.permutations(ids)):
                messages.append(result(call_id, "result " * draw(sizes)))
        if draw(st.integers(min_value=0, max_value=5)) > 0:
            messages.append(assistant(f"a{turn} " + "reply " * draw(words)))
    return [
        replace(tagged_message, attachments=message.attachments)
        for tagged_message, message in zip(tagged(messages), messages, strict=True)
    ]


rules_strategy = st.builds(
    ClearToolResults,
    keep_turns=st.sampled_from([1, 1, 2, 3]),
    every=st.sampled_from([1, 2, 2, 3]),
    min_chars=st.sampled_from([0, 40, 150]),
)


async def replay(
    kind: str, folder: Path, history: list[Message], make: Any, fresh: bool
) -> list[tuple[Message, ...]]:
    store = make_store(kind, folder)
    inner = store.open("chat")
    policy, views = make(inner), []
    try:
        for message in history:
            await resolve(inner.add_message(message))
            if fresh:  # a new object per read: the summary and its turns come from meta
                inner = store.open("chat") if kind in PERSISTENT else inner
                policy = make(inner)
            views.append(await policy.get_messages())
    finally:
        await store.close()
    return views


def check(
    views: Sequence[tuple[Message, ...]], history: Sequence[Message], expected: list[Any]
) -> None:
    for count, (view, wanted) in enumerate(zip(views, expected, strict=True), start=1):
        assert list(view) == wanted, f"read {count}"
        assert_provider_valid(view)
        kept = len(view) - (view[0].role == "system" and view[0].content.startswith("Summary"))
        assert allowed(history[:count], count - kept)


def summarized_views(
    kind: str,
    history: list[Message],
    rules: ClearToolResults,
    data: st.DataObject,
    fresh: bool,
) -> None:
    """Reads ``history`` through the policy after every append; checks them against the
    oracle."""
    budget = data.draw(st.integers(min_value=60, max_value=1500), label="budget")
    keep = data.draw(st.integers(min_value=1, max_value=budget // 2 - 11), label="keep")
    fresh = fresh and kind != "plain"  # a store without meta keeps the summary in the object
    summarizer = Summarizer()

    def make(inner: Any) -> SummarizingSession:
        return SummarizingSession(
            inner,
            summarizer.agent,
            budget,
            keep_recent=keep,
            counter=WordCounter(),
            clear_tool_results=rules,
        )

    with tempfile.TemporaryDirectory() as folder:
        views = asyncio.run(replay(kind, Path(folder), history, make, fresh))
    expected, folded = oracle(history, budget, keep, rules)
    check(views, history, expected)
    # A fold reads the tail as it is sent: the placeholders, never the results they stand for.
    assert summarizer.folded() == entries_of(folded)


HYPOTHESES = given(tool_heavy(), rules_strategy, st.data(), st.booleans())


@pytest.mark.parametrize("kind", ["memory", "async_memory", "plain"])
@settings(max_examples=50, deadline=None)
@HYPOTHESES
def test_the_tail_after_a_summary_sends_old_results_cleared_in_steps(
    kind: str, history: list[Message], rules: ClearToolResults, data: st.DataObject, fresh: bool
) -> None:
    summarized_views(kind, history, rules, data, fresh)


@pytest.mark.parametrize("kind", ["sqlite", "async_sqlite", "file", "async_file"])
@settings(max_examples=15, deadline=None)
@HYPOTHESES
def test_every_reader_of_a_stored_history_sends_the_same_cleared_tail(
    kind: str, history: list[Message], rules: ClearToolResults, data: st.DataObject, fresh: bool
) -> None:
    summarized_views(kind, history, rules, data, fresh)


# --- what else it keeps ----------------------------------------------------------------------


def turns(count: int, size: int = 900) -> list[Message]:
    """Turns of a question, a tool call, its long result and a reply."""
    messages: list[Message] = []
    for t in range(count):
        call = ToolCall(f"c{t}", "read_file", "{}")
        messages += [
            Message("user", f"question {t} " + "word " * 8),
            Message("assistant", tool_calls=(call,)),
            Message("tool", f"file {t} " + "x" * size, tool_call_id=f"c{t}"),
            Message("assistant", f"answer {t} " + "word " * 8),
        ]
    return messages


def policy(inner: Any, summarizer: Summarizer, clearing: Any = True) -> SummarizingSession:
    return SummarizingSession(
        inner, summarizer.agent, 300, counter=WordCounter(), clear_tool_results=clearing
    )


async def test_a_summary_keeps_the_turns_it_covers_and_every_setting_reads_it() -> None:
    store, summarizer = InMemorySession("k"), Summarizer()
    history = turns(12, size=2000)
    for message in history:
        store.add_message(message)
        await policy(store, summarizer).get_messages()
    record = store.get_meta(SUMMARY_KEY)
    assert record["turns"] == sum(m.role == "user" for m in history[: record["covered"]])
    calls = len(summarizer.requests)
    # One key for every setting: a policy without clearing reads the same summary, as it is.
    plain = await policy(store, summarizer, clearing=None).get_messages()
    cleared_view = await policy(store, summarizer).get_messages()
    assert plain[0] == cleared_view[0] == summary_message(TEXT)
    assert len(summarizer.requests) == calls
    assert [m.content for m in plain[1:] if m.role == "tool"][-1].startswith("file 11")
    assert store.get_messages() == tuple(history)  # the store is untouched


async def test_a_record_written_before_turns_were_kept_is_counted_from_the_history() -> None:
    store, summarizer = InMemorySession("old"), Summarizer()
    history = turns(8)
    store.add_messages(history)
    # A summary of the first 5 turns, stored as an earlier version wrote it (no "turns").
    old = Summary.covering(TEXT, 20, store.get_messages()[19]).to_record()
    assert "turns" not in old
    store.set_meta(SUMMARY_KEY, old)
    rules = ClearToolResults(keep_turns=1, every=1)
    reader = policy(store, summarizer, rules)
    view = await reader.get_messages()
    again = await reader.get_messages()  # the count is known now: a recent window is read
    expected, _ = oracle_after(history, 20, rules)
    assert list(view) == list(again) == expected
    assert summarizer.requests == []  # the summary is reused as it is
    # A count the history contradicts (written by hand) is counted again by a whole read.
    store.set_meta(SUMMARY_KEY, {**old, "turns": 2})
    assert list(await policy(store, summarizer, rules).get_messages()) == expected
    for bad in (True, -1, 21, "5", 2.0):
        assert Summary.from_record({**old, "turns": bad}) == Summary.from_record(old)


def oracle_after(
    history: Sequence[Message], covered: int, rules: ClearToolResults
) -> tuple[list[Message], int]:
    """The view over ``history`` whose first ``covered`` messages a summary stands for,
    when all of the rest fits."""
    return [summary_message(TEXT), *cleared(history, rules)[covered:]], covered


async def test_a_run_sends_placeholders_and_the_summary_request_keeps_the_prefix(
    tmp_path: Path,
) -> None:
    db, requests, turn = tmp_path / "chat.db", [], 0

    def model(request: Any) -> Any:
        requests.append(request)
        last = request.messages[-1]
        if last.role == "user" and last.content.startswith("This message is from"):
            return MockReply("The user read many files.")
        if last.role == "user":
            return MockReply(tool_calls=(ToolCall(f"c{turn}", "read_file", "{}"),))
        return "read: " + "noted " * 40

    def read_file() -> str:
        """Read the file."""
        return f"file {turn} " + "lorem ipsum " * 100

    def session() -> SummarizingSession:
        return SummarizingSession(
            SQLiteSession("agent", db), None, 1_200, clear_tool_results=ClearToolResults(1, 2)
        )

    provider = MockProvider(handler=model)
    agent = Agent("A", "Be brief.", model="m", provider=provider, tools=[read_file])
    for turn in range(10):
        result = await Runner().run(agent, message=f"read file {turn}", session=session())
    asked = [i for i, r in enumerate(requests) if r.messages[-1].content.startswith("This")]
    assert asked, "the history never outgrew the budget"
    summary, previous = requests[asked[0]], requests[asked[0] - 1]
    # The summary request is the previous request, what was appended since and a question:
    # the placeholders it sent included, so the provider's cache serves it.
    assert summary.messages[: len(previous.messages)] == previous.messages
    assert any(m.content.startswith("[The result of read_file") for m in summary.messages)
    last = requests[-1].messages
    results = [m.content for m in last if m.role == "tool"]
    assert last[1].content.startswith("Summary of the earlier conversation:")
    # Turn 10 of 10: the line is at turn 8, so the results of turns 9 and 10 are whole.
    assert [r.startswith("[The result of read_file was cleared") for r in results] == [
        *[True] * (len(results) - 2),
        False,
        False,
    ]
    assert results[-2].startswith("file 8 ") and results[-1].startswith("file 9 ")
    stored = [m.content for m in SQLiteSession("agent", db).get_messages() if m.role == "tool"]
    assert [s.startswith(f"file {n} ") for n, s in enumerate(stored)] == [True] * 10
    # A restarted process sends the same view: the last request, then its reply.
    after = await session().get_messages()
    assert after == (*last[1:], Message("assistant", result.content))
