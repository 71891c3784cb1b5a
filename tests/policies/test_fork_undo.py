"""fork and undo under the policies: a stored summary or cut is carried into a fork that
still holds what it stands for, and dropped where the history no longer does."""

from __future__ import annotations

from pathlib import Path

from aniki import Message
from aniki.sessions import SQLiteSession
from aniki.sessions.policies import SummarizingSession, TokenBudgetSession
from aniki.sessions.policies._summary import SUMMARY_KEY
from aniki.tokens import EstimatingCounter

from .histories import assistant, user
from .summaries import Summarizer, tagged

COUNTER = EstimatingCounter()
BUDGET = 300


def turns(count: int) -> list[Message]:
    messages = []
    for t in range(count):
        messages += [
            user(f"question {t} " + "word " * 20),
            assistant(f"answer {t} " + "word " * 20),
        ]
    return messages


def summarizing(inner: SQLiteSession, summarizer: Summarizer) -> SummarizingSession:
    return SummarizingSession(inner, summarizer.agent, BUDGET, counter=COUNTER)


async def test_a_whole_fork_carries_the_summary_and_reads_without_summarizing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "chat.db"
    first = Summarizer()
    session = summarizing(SQLiteSession("chat", db), first)
    await session.add_messages(tagged(turns(6)))
    view = await session.get_messages()
    assert first.calls >= 1 and view[0].content.startswith("Summary of the earlier")

    forked = SQLiteSession("chat", db).fork("branch")
    second = Summarizer()
    assert await summarizing(forked, second).get_messages() == view
    assert second.calls == 0  # the stored summary applies to the copy as it is


async def test_a_fork_before_the_summarized_part_ends_starts_its_summary_afresh(
    tmp_path: Path,
) -> None:
    db = tmp_path / "chat.db"
    first = Summarizer()
    session = summarizing(SQLiteSession("chat", db), first)
    await session.add_messages(tagged(turns(6)))
    await session.get_messages()
    summary = await session.summary()
    assert summary is not None and summary.covered >= 4
    stored = SQLiteSession("chat", db).get_messages()

    upto = stored[summary.covered - 3]  # inside what the summary stands for
    forked = SQLiteSession("chat", db).fork("branch", upto=upto.id)
    assert forked.get_meta(SUMMARY_KEY) is not None  # copied, but it no longer fits
    second = Summarizer()
    view = await summarizing(forked, second).get_messages()
    assert view == stored[: summary.covered - 2]  # fits the budget: no summary at all
    assert second.calls == 0


async def test_undo_of_summarized_messages_makes_the_next_read_summarize_again(
    tmp_path: Path,
) -> None:
    db = tmp_path / "chat.db"
    summarizer = Summarizer()
    session = summarizing(SQLiteSession("chat", db), summarizer)
    history = tagged(turns(6))
    await session.add_messages(history)
    await session.get_messages()
    summary = await session.summary()
    assert summary is not None
    for _ in range(len(history) // 2 - summary.covered // 2 + 1):  # into the summarized part
        await session.undo()
    remaining = SQLiteSession("chat", db).get_messages()
    assert len(remaining) < summary.covered
    view = await session.get_messages()
    assert view == remaining  # the old summary is not shown over a shorter history


def test_undo_through_a_token_budget_moves_the_view_back(tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    budget = TokenBudgetSession(SQLiteSession("chat", db), 400, counter=COUNTER)
    history = turns(12)
    for message in history:
        budget.add_message(message)
        budget.get_messages()
    removed = budget.undo()
    assert removed == tuple(history[-2:])
    view = budget.get_messages()
    fresh = TokenBudgetSession(SQLiteSession("chat", db), 400, counter=COUNTER).get_messages()
    assert view == fresh and view[-1] == history[-3]
    assert sum(COUNTER.count_message(m) for m in view) <= 400
