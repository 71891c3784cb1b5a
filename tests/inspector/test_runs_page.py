"""The inspector's runs page: a session's run journal shown as data, over real HTTP."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from aniki import Agent, Runner, ToolCall, tool
from aniki.sessions import SQLiteSession
from aniki.testing import MockProvider, MockReply

pytest.importorskip("starlette", reason="the inspector needs the inspect extra")
pytest.importorskip("jinja2", reason="the inspector needs the inspect extra")

from aniki.inspector._serve import running

from .test_http import page, text_of

AGENT_NAME = "<b>Support</b> & co"


def _agent() -> Agent:
    @tool(requires_approval=True)
    def refund(order_id: str) -> str:
        """Refund an order."""
        return f"refunded {order_id}"

    @tool
    def lookup(order_id: str) -> str:
        """Look an order up."""
        return f"order {order_id}: shipped"

    def model(request: object) -> MockReply:
        return MockReply(
            tool_calls=(
                ToolCall("call_refund", "refund", '{"order_id": "42"}'),
                ToolCall("call_lookup", "lookup", '{"order_id": "42"}'),
            )
        )

    return Agent(
        AGENT_NAME, model="m", provider=MockProvider(handler=model), tools=[refund, lookup]
    )


def test_the_runs_page_shows_a_held_run_and_its_calls(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    result = asyncio.run(
        Runner().run(_agent(), message="Refund 42", session=SQLiteSession("chat", path))
    )
    assert result.pending_approvals
    with running(f"sqlite:///{path}") as address:
        html = page(address, "/runs?id=chat")
        nav = page(address, "/session?id=chat")
    assert 'href="/runs?id=chat"' in nav
    row = re.search(r'<tr class="run run-(\w+)">', html)
    assert row is not None and row.group(1) == "held"
    assert result.run_id in html
    assert "<b>Support</b>" not in html  # stored text is data, never markup
    shown = text_of(html)
    assert AGENT_NAME in shown
    assert "refund call_refund: waiting" in shown
    assert "lookup call_lookup: done" in shown


def test_a_session_without_tool_runs_says_so(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    agent = Agent("Plain", model="m", provider=MockProvider(handler=lambda r: "hello"))
    asyncio.run(Runner().run(agent, message="hi", session=SQLiteSession("chat", path)))
    with running(f"sqlite:///{path}") as address:
        html = page(address, "/runs?id=chat")
    assert "No run of this session has called a tool yet" in text_of(html)
