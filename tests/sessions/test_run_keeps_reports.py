"""A run keeps each model call's ``ContextReport`` on the assistant message that call wrote,
so the report survives a restart: a new session object over the same store reads it back."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from aniki import Agent, ContextReport, Message, Runner, RunResult, ToolCall, Usage, tool
from aniki.providers.base import ModelRequest
from aniki.sessions import EncryptedSession, FileSession, SQLiteSession
from aniki.testing import MockProvider, MockReply

from ..core.helpers import MODES, drive
from ..servers import (
    delete_redis_prefix,
    drop_postgres_tables,
    postgres_dsn,
    redis_url,
    unique_name,
)

STORES = ["sqlite", "file", "encrypted", "redis", "postgres"]
KEY = EncryptedSession.generate_key()


@pytest.fixture(params=STORES)
def reopen(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Any]]:
    """Opens a new session object over one store's ``chat`` each time it is called, as a
    restarted process would."""
    kind: str = request.param
    opened: list[Any] = []
    cleanup: Callable[[], None] = lambda: None  # noqa: E731
    if kind == "sqlite":
        make: Callable[[], Any] = lambda: SQLiteSession("chat", tmp_path / "chat.db")  # noqa: E731
    elif kind == "file":
        make = lambda: FileSession("chat", tmp_path / "sessions")  # noqa: E731
    elif kind == "encrypted":
        make = lambda: EncryptedSession(SQLiteSession("chat", tmp_path / "sealed.db"), KEY)  # noqa: E731
    elif kind == "redis":
        from aniki.sessions.redis import RedisSession

        url, prefix = redis_url(), unique_name("reports") + ":"
        make = lambda: RedisSession("chat", url, prefix=prefix)  # noqa: E731
        cleanup = lambda: delete_redis_prefix(prefix)  # noqa: E731
    else:
        from aniki.sessions.postgres import PostgresSession

        dsn, table = postgres_dsn(), unique_name("reports")
        make = lambda: PostgresSession("chat", dsn, table=table)  # noqa: E731
        cleanup = lambda: drop_postgres_tables(table)  # noqa: E731

    def fresh() -> Any:
        session = make()
        opened.append(session)
        return session

    yield fresh
    for session in opened:
        close = getattr(session, "close", None) or getattr(session.inner, "close", None)
        if close is not None:
            close()
    cleanup()


@tool
def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: What to look up.
    """
    return f"{topic}: found"


def scripted(provider: MockProvider, turn: int) -> None:
    """A tool turn that reports usage, then an answer that reports none."""
    provider.enqueue_response(
        tool_calls=[{"id": f"c{turn}", "name": "lookup", "arguments": {"topic": f"t{turn}"}}],
        usage={
            "input_tokens": 50 + turn,
            "output_tokens": 5,
            "requests": 1,
            "cache_read_tokens": 40,
        },
    )
    provider.enqueue_response(f"answer {turn}", usage=None if turn == 0 else {"requests": 1})


def assistants(session: Any) -> list[Message]:
    return [m for m in session.get_messages() if m.role == "assistant"]


@pytest.mark.parametrize("mode", MODES)
async def test_each_assistant_message_keeps_its_calls_report(
    reopen: Callable[[], Any], mode: str
) -> None:
    provider = MockProvider()
    reports: list[ContextReport] = []
    for turn in range(2):
        agent = Agent("Helper", "Answer briefly.", model="mock", provider=provider, tools=[lookup])
        scripted(provider, turn)
        result = await drive(mode, Runner(), agent, message=f"question {turn}", session=reopen())
        assert len(result.context_reports) == 2
        mine = [m for m in result.new_messages if m.role == "assistant"]
        assert [m.context for m in mine] == list(result.context_reports)
        reports += result.context_reports

    stored = assistants(reopen())  # a new session object: what a restarted process reads
    assert [m.context for m in stored] == reports  # each with its usage
    assert [m.context.usage if m.context else None for m in stored] == [m.usage for m in stored]
    assert stored[0].usage == Usage(
        input_tokens=50, output_tokens=5, requests=1, cache_read_tokens=40
    )
    assert stored[1].context is not None and stored[1].context.usage is None
    assert all(m.model == "mock" for m in stored)


def test_reports_reach_the_store_from_run_sync(tmp_path: Path) -> None:
    provider = MockProvider()
    scripted(provider, 1)
    agent = Agent("Helper", model="mock", provider=provider, tools=[lookup])
    result = Runner().run_sync(agent, message="q", session=SQLiteSession("sync", tmp_path / "s.db"))
    stored = assistants(SQLiteSession("sync", tmp_path / "s.db"))
    assert [m.context for m in stored] == list(result.context_reports)


_REFUND = ToolCall("call_refund", "refund", '{"order_id": "42"}')


def approval_model(request: ModelRequest) -> MockReply:
    if request.messages[-1].role == "user":
        return MockReply(tool_calls=(_REFUND,), usage=Usage(input_tokens=30, requests=1))
    return MockReply("refunded", usage=Usage(input_tokens=60, requests=1))


@tool(requires_approval=True)
def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id: The order.
    """
    return f"refunded {order_id}"


@pytest.mark.parametrize("mode", ["run", "stream"])
async def test_a_held_turn_keeps_its_report_until_it_is_resumed(tmp_path: Path, mode: str) -> None:
    def agent() -> Agent:
        return Agent(
            "Support", model="m", provider=MockProvider(handler=approval_model), tools=[refund]
        )

    path = tmp_path / "held.db"
    held = await drive(
        mode, Runner(), agent(), message="Refund 42", session=SQLiteSession("c", path)
    )
    assert held.pending_approvals == (_REFUND,) and len(held.context_reports) == 1
    # A new process resumes it: the held assistant message is read back from the store's meta.
    done = await Runner().resume(agent(), approve=[_REFUND.id], session=SQLiteSession("c", path))
    stored = assistants(SQLiteSession("c", path))
    assert [m.context for m in stored] == [*held.context_reports, *done.context_reports]
    assert stored[0].context is not None
    assert stored[0].context.usage == Usage(input_tokens=30, requests=1)


async def test_a_handoff_keeps_each_agents_reports(tmp_path: Path) -> None:
    def billing_model(request: ModelRequest) -> MockReply:
        return MockReply("Billing here.", usage=Usage(input_tokens=9, requests=1))

    def triage_model(request: ModelRequest) -> MockReply:
        return MockReply(tool_calls=(ToolCall("h1", "transfer_to_billing", "{}"),))

    billing = Agent("Billing", "Invoices.", model="b", provider=MockProvider(handler=billing_model))
    triage = Agent(
        "Triage", model="t", provider=MockProvider(handler=triage_model), handoffs=[billing]
    )
    path = tmp_path / "handoff.db"
    result = await Runner().run(triage, message="charged twice", session=SQLiteSession("h", path))
    stored = assistants(SQLiteSession("h", path))
    assert [m.model for m in stored] == ["t", "b"]
    assert [m.context for m in stored] == list(result.context_reports)


async def test_after_an_output_retry_the_stored_reply_keeps_the_last_calls_report(
    tmp_path: Path,
) -> None:
    provider = MockProvider()
    provider.enqueue_response("not json", usage={"requests": 1, "input_tokens": 10})
    provider.enqueue_response(json.dumps({"n": 3}), usage={"requests": 1, "input_tokens": 20})
    agent = Agent(
        "A",
        model="m",
        provider=provider,
        output_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
        output_retries=1,
    )
    path = tmp_path / "retry.db"
    result = await Runner().run(agent, message="give n", session=SQLiteSession("r", path))
    assert len(result.context_reports) == 2  # the reply that did not fit is never stored
    [stored] = assistants(SQLiteSession("r", path))
    assert stored.context == result.context_reports[-1]
    assert stored.context is not None and stored.context.usage == Usage(requests=1, input_tokens=20)


async def test_an_odd_counter_never_fails_the_run(tmp_path: Path) -> None:
    """A custom counter that breaks its contract (a negative count) leaves the report on the
    result only: the reply is stored without it rather than the run failing."""
    from aniki import TokenBudgetSession

    class Negative:
        def count_message(self, message: Message) -> int:
            return -1

    provider = MockProvider()
    provider.enqueue_response("hi")
    path = tmp_path / "odd.db"
    session = TokenBudgetSession(SQLiteSession("o", path), 1000, counter=Negative())
    result: RunResult = await Runner().run(
        Agent("A", model="m", provider=provider), message="q", session=session
    )
    assert result.content == "hi" and len(result.context_reports) == 1
    [stored] = assistants(SQLiteSession("o", path))
    assert stored.content == "hi" and stored.context is None


async def test_an_encrypted_store_keeps_the_report_sealed(tmp_path: Path) -> None:
    provider = MockProvider()
    scripted(provider, 1)
    agent = Agent("Helper", model="mock", provider=provider, tools=[lookup])
    inner = SQLiteSession("sealed", tmp_path / "sealed.db")
    result = await Runner().run(agent, message="q", session=EncryptedSession(inner, KEY))
    raw = inner.get_messages()
    assert all(m.context is None and m.usage is None for m in raw)
    assert not any("sent_messages" in m.content for m in raw)
    reopened = EncryptedSession(SQLiteSession("sealed", tmp_path / "sealed.db"), KEY)
    assert [m.context for m in assistants(reopened)] == list(result.context_reports)
