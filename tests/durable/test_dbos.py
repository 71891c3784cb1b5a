"""aniki.durable on DBOS, on SQLite and on PostgreSQL: a durable run writes the history a plain
run writes; a run killed inside a tool resumes on recovery without repeating the recorded model
calls and tool calls; a run held for approval waits for ``decide`` and goes on.

Run as ``python -m tests.durable.test_dbos SYSTEM_DB STORE RUN_ID LOG`` it is the worker
process the crash test kills.
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from dbos import DBOS

from aniki import Agent, Message, Runner, tool
from aniki.durable import DurableAgent, SessionOpener
from aniki.messages import MessageLike, ToolCall
from aniki.providers.base import ModelRequest, ModelResponse
from aniki.sessions import SQLiteSession, open_session
from aniki.testing import MockProvider

from ..servers import postgres_dsn

ROOT = Path(__file__).resolve().parents[2]
LOG_ENV = "ANIKI_DURABLE_TEST_LOG"
KILL_ENV = "ANIKI_DURABLE_TEST_KILL"
APPEND_KILL_ENV = "ANIKI_DURABLE_TEST_KILL_AFTER_APPEND"


def _log(line: str) -> None:
    """Append ``line`` to the side-effect log (one line per side effect)."""
    with open(os.environ[LOG_ENV], "a", encoding="utf-8") as log:
        log.write(line + "\n")
        log.flush()
        os.fsync(log.fileno())


def _reply(request: ModelRequest) -> ModelResponse:
    """Ask for ``first``, then ``second``, then answer in text: logs each call."""
    answered = sum(1 for m in request.messages if m.role == "tool")
    _log(f"model {answered}")
    if answered == 0:
        return ModelResponse(tool_calls=(ToolCall("call_1", "first", '{"x": 2}'),))
    if answered == 1:
        return ModelResponse(tool_calls=(ToolCall("call_2", "second"),))
    return ModelResponse(content="done")


def first(x: int) -> str:
    """Double x."""
    _log("first")
    return str(2 * x)


def second() -> str:
    """Say ok; the first call dies by SIGKILL when the kill marker file does not exist yet."""
    _log("second start")
    marker = os.environ.get(KILL_ENV)
    if marker and not os.path.exists(marker):
        Path(marker).touch()
        os.kill(os.getpid(), signal.SIGKILL)
    _log("second done")
    return "ok"


class _DiesAfterAppend(SQLiteSession):
    """Dies by SIGKILL right after appending the answer to ``call_2``, before DBOS records
    the write (once: while the marker file does not exist)."""

    def add_messages(self, messages: Iterable[MessageLike]) -> None:
        batch = list(messages)
        super().add_messages(batch)
        marker = os.environ.get(APPEND_KILL_ENV)
        answers = [m.tool_call_id for m in batch if isinstance(m, Message)]
        if marker and "call_2" in answers and not os.path.exists(marker):
            Path(marker).touch()
            os.kill(os.getpid(), signal.SIGKILL)


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    _log(f"refund {order}")
    return f"refunded {order}"


def _agent(name: str = "Durable") -> Agent[Any]:
    return Agent(name, model="m", provider=MockProvider(handler=_reply), tools=[first, second])


def _launch(system_db: str) -> None:
    DBOS(
        config={
            "name": "aniki-durable-test",
            "system_database_url": system_db,
            "log_level": "WARNING",
            "notification_listener_polling_interval_sec": 0.05,
        }
    )
    DBOS.launch()


@pytest.fixture(
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(system database URL, session store URL): SQLite files, or a fresh PostgreSQL
    database for both, dropped afterwards."""
    os.environ[LOG_ENV] = str(tmp_path / "effects.log")
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'dbos.sqlite'}", f"sqlite:///{tmp_path / 'store.db'}"
    else:
        base = postgres_dsn()
        name = f"aniki_durable_{uuid.uuid4().hex[:10]}"
        admin = base.rsplit("/", 1)[0] + "/postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        url = base.rsplit("/", 1)[0] + "/" + name
        try:
            yield url, url
        finally:
            DBOS.destroy(destroy_registry=True)
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    DBOS.destroy(destroy_registry=True)
    os.environ.pop(LOG_ENV, None)
    os.environ.pop(KILL_ENV, None)


def _effects() -> list[str]:
    log = Path(os.environ[LOG_ENV])
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def _run_child(
    system_db: str, store: str, marker: Path, where: str = KILL_ENV
) -> subprocess.CompletedProcess[bytes]:
    """Run the worker that dies by SIGKILL inside ``second``, or after the append of its
    answer with ``where=APPEND_KILL_ENV`` (see :func:`_child`)."""
    return subprocess.run(
        [sys.executable, "-m", "tests.durable.test_dbos", system_db, store, "run-k"],
        cwd=ROOT,
        env={**os.environ, where: str(marker)},
        capture_output=True,
        timeout=60,
    )


async def _plain_history() -> tuple[Message, ...]:
    """The history a plain run (no DBOS) writes for the same message."""
    session = open_session("memory:", "plain")
    await Runner().run(_agent(), message="go", session=session)
    return tuple(session.get_messages())


def test_import_aniki_does_not_import_dbos() -> None:
    code = (
        "import sys, aniki; print('dbos' in sys.modules); "
        "import aniki.durable; print('dbos' in sys.modules)"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.split() == ["False", "True"]


async def test_durable_history_equals_a_plain_runs(backend: tuple[str, str]) -> None:
    system_db, store = backend
    durable = DurableAgent(_agent(), store)
    _launch(system_db)
    result = await durable.run("go", session_id="s1", run_id="run-1")
    assert result.content == "done"
    assert result.run_id == "run-1"
    stored = tuple(open_session(store, "s1").get_messages())
    assert stored == result.messages
    assert [m.role for m in stored] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert _effects() == ["model 0", "first", "model 1", "second start", "second done", "model 2"]
    again = await durable.run("go", session_id="s1", run_id="run-1")  # same id: the record
    assert again.messages == result.messages
    assert len(_effects()) == 6
    assert stored == await _plain_history()


async def test_a_queued_run_runs_and_its_result_is_read_by_id(backend: tuple[str, str]) -> None:
    system_db, store = backend
    durable = DurableAgent(_agent(), store)
    _launch(system_db)
    queue = await DBOS.register_queue_async("aniki-test", polling_interval_sec=0.1)
    run_id = await durable.enqueue(queue, "go", session_id="s-q", run_id="run-q")
    assert run_id == "run-q"
    result = await durable.result("run-q")
    assert result.content == "done" and result.run_id == "run-q"
    assert tuple(open_session(store, "s-q").get_messages()) == result.messages
    assert len(_effects()) == 6


async def test_a_run_killed_inside_a_tool_resumes_without_repeating_steps(
    backend: tuple[str, str], tmp_path: Path
) -> None:
    system_db, store = backend
    child = await asyncio.to_thread(_run_child, system_db, store, tmp_path / "killed")
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()[-2000:]
    assert _effects() == ["model 0", "first", "model 1", "second start"]

    durable = DurableAgent(_agent(), store)
    _launch(system_db)  # recovers the pending workflow
    result = await durable.result("run-k")
    assert result.content == "done"
    effects = _effects()
    assert effects.count("model 0") == 1 and effects.count("model 1") == 1
    assert effects.count("first") == 1
    assert effects[4:] == ["second start", "second done", "model 2"]
    stored = tuple(open_session(store, "s-k").get_messages())
    assert stored == result.messages == await _plain_history()


async def test_a_write_done_but_not_recorded_is_not_appended_again(tmp_path: Path) -> None:
    os.environ[LOG_ENV] = str(tmp_path / "effects.log")
    system_db, db = f"sqlite:///{tmp_path / 'dbos.sqlite'}", tmp_path / "store.db"
    try:
        child = await asyncio.to_thread(
            _run_child, system_db, str(db), tmp_path / "killed", APPEND_KILL_ENV
        )
        assert child.returncode == -signal.SIGKILL, child.stderr.decode()[-2000:]
        assert [m.tool_call_id for m in SQLiteSession("s-k", db).get_messages()][-1] == "call_2"

        durable = DurableAgent(_agent(), f"sqlite:///{db}")
        _launch(system_db)
        result = await durable.result("run-k")
        assert _effects().count("second done") == 1  # the tool step was recorded
        stored = SQLiteSession("s-k", db).get_messages()
        assert [m.tool_call_id for m in stored].count("call_2") == 1
        assert stored == result.messages == await _plain_history()
    finally:
        DBOS.destroy(destroy_registry=True)
        os.environ.pop(LOG_ENV, None)


async def test_a_run_held_for_approval_waits_for_decide(backend: tuple[str, str]) -> None:
    system_db, store = backend
    provider = MockProvider()
    provider.enqueue_response(
        tool_calls=[{"id": "call_r", "name": "refund", "arguments": '{"order": "42"}'}]
    )
    provider.enqueue_response(content="refunded")
    durable = DurableAgent(Agent("Refunds", model="m", provider=provider, tools=[refund]), store)
    _launch(system_db)
    run_id = await durable.start("refund 42", session_id="s-a", run_id="run-a")
    for _ in range(200):  # until the model call is recorded (at most 10 s)
        names = [s["function_name"] for s in await DBOS.list_workflow_steps_async(run_id)]
        if "aniki.model_call" in names:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    status = await (await DBOS.retrieve_workflow_async(run_id)).get_status()
    assert status.status == "PENDING"  # waiting in recv
    assert len(provider.requests) == 1
    assert _effects() == []  # not called before the decision
    await durable.decide(run_id, approve=["call_r"])
    result = await durable.result(run_id)
    assert result.content == "refunded"
    assert result.pending_approvals == ()
    assert _effects() == ["refund 42"]
    assert [m.content for m in result.messages if m.role == "tool"] == ["refunded 42"]


def _child(system_db: str, store: str, run_id: str) -> None:
    """The worker the crash test kills inside ``second``."""
    opener: str | SessionOpener = store
    if os.environ.get(APPEND_KILL_ENV):
        opener = functools.partial(_DiesAfterAppend, path=store.removeprefix("sqlite:///"))
    durable = DurableAgent(_agent(), opener)
    _launch(system_db)
    asyncio.run(durable.run("go", session_id="s-k", run_id=run_id))


if __name__ == "__main__":
    _child(*sys.argv[1:4])


def test_a_recorded_model_step_gives_back_the_whole_reply() -> None:
    from aniki.durable._steps import response_from_dict, response_to_dict

    reply = ModelResponse(
        content="Done.",
        tool_calls=(ToolCall("c1", "fetch", '{"order": "42"}'),),
        finish_reason="tool_calls",
        model="small-model",
        id="chatcmpl-7",
    )
    again = response_from_dict(response_to_dict(reply))
    assert (again.id, again.model, again.finish_reason) == (
        "chatcmpl-7",
        "small-model",
        "tool_calls",
    )
    assert again.content == "Done." and again.tool_calls == reply.tool_calls
    assert response_from_dict({**response_to_dict(reply), "id": None}).id is None
