"""Summaries a prompt cache can serve: a ``SummarizingSession`` without a summarizer asks the
run's own model, with the run's instructions, tools and history followed by one question, so
the request is the previous one plus that question; every summarizer's calls are charged to
the run that read the session."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from aniki import Agent, Message, Runner, Usage
from aniki.sessions import InMemorySession, SummarizingSession
from aniki.testing import MockProvider, MockReply

ASK = "This message is from the application"


def _is_summary_request(request: Any) -> bool:
    last = request.messages[-1]
    return last.role == "user" and last.content.startswith(ASK)


def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city}: sunny"


def _conversation(requests: list[Any]) -> MockProvider:
    def reply(request: Any) -> Any:
        requests.append(request)
        if _is_summary_request(request):
            return MockReply("The user asked about many cities.", usage=Usage(100, 10, 1))
        return MockReply("Noted: " + "word " * 40, usage=Usage(50, 5, 1))

    return MockProvider(handler=reply)


async def test_the_summary_request_is_the_previous_request_plus_a_question() -> None:
    requests: list[Any] = []
    session = SummarizingSession(InMemorySession("s"), None, 600)
    agent = Agent(
        "Guide",
        "Answer about cities.",
        model="m",
        provider=_conversation(requests),
        tools=[lookup],
    )
    for n in range(12):
        result = await Runner().run(
            agent, message=f"Tell me about city number {n}.", session=session
        )
        if any(_is_summary_request(r) for r in requests):
            break
    else:
        raise AssertionError("the history never outgrew the budget")
    at = next(i for i, r in enumerate(requests) if _is_summary_request(r))
    summary, previous = requests[at], requests[at - 1]
    assert summary.tools == previous.tools and summary.model == "m"
    assert summary.messages[: len(previous.messages)] == previous.messages  # all cached
    # ...then the reply that took the history over the budget (the read after storing it
    # made the summary), and the question
    assert [m.role for m in summary.messages[len(previous.messages) :]] == ["assistant", "user"]
    assert "except its last" in summary.messages[-1].content
    # The summary call is the run's: 1 call for the answer, 1 for the summary.
    assert result.usage.requests == 2 and result.usage.input_tokens == 150
    after = await Runner().run(agent, message="And the next one?", session=session)
    sent = requests[-1].messages
    assert sent[1].role == "system" and sent[1].content.endswith("many cities.")
    report = after.context_reports[0]
    assert report.summarized_messages > 0 and not report.prefix_kept
    assert after.usage.requests == 1


async def test_an_agent_summarizers_calls_are_charged_to_the_run() -> None:
    def writer(request: Any) -> Any:
        return MockReply("A summary.", usage=Usage(300, 20, 1))

    summarizer = Agent("Summarizer", model="s", provider=MockProvider(handler=writer))
    session = SummarizingSession(InMemorySession("a"), summarizer, 300)
    answers = MockProvider(handler=lambda request: MockReply("ok " * 30, usage=Usage(40, 4, 1)))
    agent = Agent("A", model="m", provider=answers)
    charged = 0
    for n in range(12):
        result = await Runner().run(agent, message=f"question {n} " * 5, session=session)
        charged += result.usage.input_tokens == 340  # 40 for the answer, 300 for the summary
    assert charged >= 1


async def test_without_a_run_it_says_why_and_keeps_the_recent_messages(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = InMemorySession("x")
    for n in range(40):
        store.add_message(Message("user" if n % 2 == 0 else "assistant", f"message {n} " * 10))
    session = SummarizingSession(store, None, 400)
    with caplog.at_level(logging.WARNING, logger="aniki"):
        view = await session.get_messages()
    assert "read it through Runner.run, or give it a summarizer agent" in caplog.text
    assert view and view[-1].content.startswith("message 39") and len(view) < 40


async def test_a_long_history_is_folded_as_transcripts_by_the_runs_model() -> None:
    store = InMemorySession("long")
    for n in range(60):
        store.add_message(Message("user" if n % 2 == 0 else "assistant", f"line {n} " * 20))
    requests: list[Any] = []

    def reply(request: Any) -> Any:
        requests.append(request)
        return MockReply("folded", usage=Usage(20, 2, 1))

    session = SummarizingSession(store, None, 500)
    agent = Agent("A", "Be brief.", model="m", provider=MockProvider(handler=reply))
    result = await Runner().run(agent, message="and now?", session=session)
    folds = [r for r in requests if "<new_messages>" in r.messages[-1].content]
    assert len(folds) >= 2  # more than one budget's worth: chunk by chunk
    assert all(r.tools == () and len(r.messages) == 1 for r in folds)
    assert result.usage.requests == len(requests)
