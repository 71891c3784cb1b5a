"""A run stopped for approval in one process is resumed in another, on SQLite and
PostgreSQL: the held calls live in the store, not in the process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from aniki.sessions import open_session
from tests.servers import postgres_dsn, unique_name

from .scripted import REFUND, calls, roles

CHILD = Path(__file__).with_name("_child.py")


def _phase(url: str, session_id: str, phase: str, log: Path) -> object:
    done = subprocess.run(
        [sys.executable, str(CHILD), url, session_id, phase, str(log)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'chat.db'}"
    return postgres_dsn()


def test_approval_survives_a_process_restart(store_url: str, tmp_path: Path) -> None:
    log, chat = tmp_path / "calls.log", unique_name("approval")
    try:
        assert _phase(store_url, chat, "run", log) == [REFUND.id]
        assert calls(log) == [["lookup", "42"]]
        assert roles(open_session(store_url, chat).get_messages()) == ["user"]

        content = _phase(store_url, chat, "resume", log)
        assert content == "Done: refunded 42 | order 42: shipped"
        assert calls(log) == [["lookup", "42"], ["refund", "42"]]
        stored = open_session(store_url, chat).get_messages()
        assert roles(stored) == ["user", "assistant", "tool", "tool", "assistant"]
    finally:
        open_session(store_url, chat).clear()
