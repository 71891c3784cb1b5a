"""``RunResult.context_reports``: one report per model call, saying what was sent and why."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from aniki import (
    Agent,
    ContextReport,
    InMemorySession,
    Runner,
    SQLiteSession,
    SummarizingSession,
    TokenBudgetSession,
    Usage,
    WindowedSession,
    tool,
)
from aniki.testing import MockProvider
from aniki.tokens import EstimatingCounter

from .helpers import MODES, drive


@tool
def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: What to look up.
    """
    return f"{topic}: found"


def script(provider: MockProvider, turn: int) -> None:
    provider.enqueue_response(
        tool_calls=[{"id": f"c{turn}", "name": "lookup", "arguments": {"topic": f"t{turn}"}}],
        usage={"input_tokens": 50, "output_tokens": 5, "requests": 1, "cache_read_tokens": 40},
    )
    provider.enqueue_response(f"answer {turn}")  # reports no usage


@pytest.mark.parametrize("mode", MODES)
async def test_one_report_per_model_call_says_what_was_sent(mode: str) -> None:
    provider = MockProvider()
    counter = EstimatingCounter()
    session = InMemorySession()
    agent = Agent(
        "Helper",
        "Answer briefly.",
        model="mock",
        provider=provider,
        tools=[lookup],
        session=session,
    )
    script(provider, 0)
    result = await drive(mode, Runner(), agent, message="question 0")
    reports = result.context_reports
    assert len(reports) == len(provider.requests) == 2
    for report, request in zip(reports, provider.requests, strict=True):
        assert isinstance(report, ContextReport)
        history = request.messages[1:]
        assert report.sent_messages == len(history)
        assert report.summarized_messages == 0
        assert report.tokens.instructions == counter.count_message(request.messages[0])
        assert report.tokens.history == sum(counter.count_message(m) for m in history)
        assert report.tokens.tools > 0
        assert report.tokens.total == (
            report.tokens.instructions + report.tokens.tools + report.tokens.history
        )
        assert report.prefix_kept is True  # a bare store sends its whole history
    assert reports[0].stored_messages == 1
    # A stream keeps the tool turn out of the store until it completes; a run stores it.
    assert reports[1].stored_messages == (1 if mode == "stream" else 3)
    assert reports[0].usage == Usage(
        input_tokens=50, output_tokens=5, requests=1, cache_read_tokens=40
    )
    assert reports[1].usage is None  # the provider reported nothing: not a zero


async def test_a_window_reports_where_its_cut_moved() -> None:
    provider = MockProvider()
    session = WindowedSession(InMemorySession(), 6)  # trim_to 3
    agent = Agent("Helper", model="mock", provider=provider, session=session)
    runner = Runner()
    kept: list[bool | None] = []
    sent: list[int] = []
    for turn in range(6):
        provider.enqueue_response(f"answer {turn}")
        result = await runner.run(agent, message=f"question {turn}")
        [report] = result.context_reports
        kept.append(report.prefix_kept)
        sent.append(report.sent_messages)
        assert report.sent_messages == len(provider.requests[-1].messages)  # no instructions
    # Requests hold 1, 3, 5 messages; the fourth would hold 7 > 6, so the cut moves and
    # leaves 3; then 5; then 7 > 6 again.
    assert sent == [1, 3, 5, 3, 5, 3]
    assert kept == [True, True, True, False, True, False]


async def test_a_summary_is_reported_apart_from_the_history() -> None:
    summarizer = Agent("Summarizer", model="mock", provider=MockProvider(handler=lambda r: "gist"))
    counter = EstimatingCounter()
    inner = InMemorySession()
    session = SummarizingSession(inner, summarizer, 120, counter=counter)
    provider = MockProvider(handler=lambda request: "an answer " * 8)
    agent = Agent("Helper", "Be brief.", model="mock", provider=provider, session=session)
    runner = Runner()
    reports = []
    for turn in range(8):
        result = await runner.run(agent, message=f"question {turn} " + "words " * 10)
        reports += result.context_reports
    summary = await session.summary()
    assert summary is not None
    last = reports[-1]
    assert last.summarized_messages == summary.covered
    assert last.tokens.summary > 0
    assert last.stored_messages == len(inner.get_messages()) - 1  # before this reply
    assert last.sent_messages + last.summarized_messages == last.stored_messages
    assert any(report.prefix_kept is False for report in reports)  # a new summary


async def test_a_persistent_store_counts_its_messages(tmp_path: Path) -> None:
    provider = MockProvider()
    session = SQLiteSession("reports", tmp_path / "r.db")
    agent = Agent("Helper", model="mock", provider=provider, session=session)
    for turn in range(3):
        provider.enqueue_response(f"answer {turn}")
        result = await Runner().run(agent, message=f"question {turn}")
        assert result.context_reports[0].stored_messages == 2 * turn + 1


async def test_a_budget_counts_with_its_own_counter() -> None:
    class Words:
        def count_message(self, message: object) -> int:
            return 100

    provider = MockProvider()
    provider.enqueue_response("ok")
    session = TokenBudgetSession(InMemorySession(), 1000, counter=Words())
    agent = Agent("Helper", model="mock", provider=provider, session=session)
    result = await Runner().run(agent, message="hi")
    assert result.context_reports[0].tokens.history == 100


async def test_each_call_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    provider = MockProvider()
    provider.enqueue_response("ok", usage={"input_tokens": 20, "requests": 1})
    agent = Agent("Helper", "Be brief.", model="mock", provider=provider)
    with caplog.at_level(logging.DEBUG, logger="aniki.context"):
        await Runner().run(agent, message="a secret question")
    [record] = [r for r in caplog.records if r.name == "aniki.context"]
    text = record.getMessage()
    assert "call 1" in text and "1 of 1 messages sent" in text and "20 input tokens" in text
    assert "secret" not in text  # figures only, never what was said


def test_a_report_describes_itself() -> None:
    from aniki import ContextTokens

    report = ContextReport(
        stored_messages=None,
        sent_messages=4,
        summarized_messages=10,
        tokens=ContextTokens(instructions=5, tools=0, summary=20, history=40),
        prefix_kept=False,
        usage=Usage(input_tokens=200, requests=1, cache_read_tokens=150),
    )
    assert report.describe() == (
        "4 of ? messages sent, 10 summarized, ~65 tokens, prefix changed, "
        "200 input tokens billed, 75% from cache"
    )


async def test_each_request_counts_only_what_the_last_one_did_not_send(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A conversation's reports stay exact while each request counts only its new messages:
    # turn 60 costs what turn 2 did (the flat per-turn cost sessions promise).
    from aniki._run import reports

    counted: list[int] = []

    class Counting(EstimatingCounter):
        def count_message(self, message: object) -> int:
            counted.append(1)
            return super().count_message(message)  # type: ignore[arg-type]

    counter = Counting()
    monkeypatch.setitem(reports._COUNTERS, "counted-model", counter)
    session = SQLiteSession("flat", path=tmp_path / "c.db")
    provider = MockProvider(handler=lambda request: "r" * 80)
    agent = Agent("A", "Be brief.", model="counted-model", provider=provider)
    runner = Runner()
    per_turn = []
    for turn in range(60):
        counted.clear()
        result = await runner.run(agent, message=f"turn {turn} " + "u" * 80, session=session)
        per_turn.append(len(counted))
        [report] = result.context_reports
        sent = provider.requests[-1].messages[1:]
        assert report.tokens.history == sum(counter.count_message(m) for m in sent)
        if turn == 30:
            counter.observe(raw_estimate=1000, reported=1300)  # calibration changes the counts
            assert counter.factor == 1.3
    assert per_turn[1] <= 4, per_turn  # the instructions, the new user message, little else
    assert max(per_turn[2:31] + per_turn[32:]) == per_turn[1], per_turn
