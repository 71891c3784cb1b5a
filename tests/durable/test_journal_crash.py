"""A run killed (SIGKILL) in a child process is finished by ``Runner.recover`` in this one.

The child's model asks for ``act`` (alone, or with ``next_step`` in the same turn); the child
kills itself inside ``act`` before its side effect, inside ``act`` after it, or inside
``next_step`` once ``act``'s result is recorded. Then ``recover`` must: never run a call
whose result was recorded, answer a claimed non-idempotent call with the "outcome is
unknown" message without running it, run a claimed idempotent one again (once), keep the
user message, and leave a history a provider accepts.

Run as a script, this module is that child: ``test_journal_crash.py child URL ID POINT
IDEMPOTENT LOG``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from aniki import Agent, Message, Runner, ToolCall, tool
from aniki._run.journal import KEY, runs_of
from aniki.providers.base import ModelRequest
from aniki.sessions import open_session
from aniki.testing import MockProvider, MockReply
from tests.durable.test_journal_races import check_history
from tests.servers import postgres_dsn, redis_url, unique_name

ROOT = Path(__file__).resolve().parents[2]
ACT = ToolCall("call_act", "act", "{}")
NEXT = ToolCall("call_next", "next_step", "{}")
POINTS = ("before", "after", "returned")
"""Where the child dies: in ``act`` before its side effect, in ``act`` after it, or in
``next_step`` after ``act``'s result was recorded."""
ASKED = "Do the thing"
UNKNOWN = "outcome of this call"


def effect(log: Path, name: str) -> None:
    """One side effect of tool ``name``: a line in ``log``, flushed to disk at once."""
    with log.open("a") as handle:
        handle.write(name + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def effects(log: Path) -> Counter[str]:
    """How many times each tool's side effect happened."""
    return Counter(log.read_text().split()) if log.exists() else Counter()


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def recorded(url: str, session_id: str, call_id: str) -> bool:
    """Whether the journal in the store holds a result for ``call_id``."""
    journal = open_session(url, session_id).get_meta(KEY) or {"runs": {}}
    return any(
        (turn.get("calls", {}).get(call_id) or {}).get("result")
        for entry in journal["runs"].values()
        for turn in entry.get("turns", ())
    )


def make_agent(
    log: Path, *, idempotent: bool, point: str, kill: bool, url: str = "", sid: str = ""
) -> Agent:
    """The agent of a trial; with ``kill``, its tools kill the process at ``point``."""

    @tool(idempotent=idempotent)
    def act() -> str:
        """Do the thing."""
        if kill and point == "before":
            die()
        effect(log, "act")
        if kill and point == "after":
            die()
        return "act done"

    @tool
    async def next_step() -> str:
        """Do the next thing."""
        if kill:
            for _ in range(500):
                if await asyncio.to_thread(recorded, url, sid, ACT.id):
                    break
                await asyncio.sleep(0.02)
            die()
        effect(log, "next")
        return "next done"

    calls = (ACT, NEXT) if point == "returned" else (ACT,)

    def model(request: ModelRequest) -> MockReply:
        if request.messages[-1].role == "user":
            return MockReply(tool_calls=calls)
        return MockReply(content="Finished")

    provider = MockProvider(handler=model)
    return Agent("Crashy", model="m", provider=provider, tools=[act, next_step])


@dataclass
class Trial:
    """What one crash trial left: the child's exit code, the side effects, the history."""

    point: str
    idempotent: bool
    returncode: int
    recovered: int
    again: int
    history: list[Message] = field(default_factory=list)
    effects: Counter[str] = field(default_factory=Counter)
    left: list[str] = field(default_factory=list)
    """The states of the runs the journal still shows as not ended."""


def kill_child(url: str, sid: str, point: str, idempotent: bool, log: Path) -> int:
    """Run the agent in a child process that kills itself at ``point``; its exit code."""
    args = [sys.executable, __file__, "child", url, sid, point, str(int(idempotent)), str(log)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.run(args, capture_output=True, text=True, timeout=60, env=env)
    return child.returncode


def run_trial(url: str, point: str, idempotent: bool, log: Path) -> Trial:
    """Kill a child at ``point``, recover here, and report what was left."""
    sid = unique_name("crash")
    returncode = kill_child(url, sid, point, idempotent, log)
    agent = make_agent(log, idempotent=idempotent, point=point, kill=False)
    session = open_session(url, sid)
    try:
        done = Runner().recover_sync(agent, session=session)
        again = Runner().recover_sync(agent, session=session)
        left = [i.state for i in asyncio.run(runs_of(session)) if i.state != "done"]
        return Trial(
            point,
            idempotent,
            returncode,
            len(done),
            len(again),
            list(session.get_messages()),
            effects(log),
            left,
        )
    finally:
        session.clear()
        close = getattr(session, "close", None)
        if close is not None:
            close()


def problems(trial: Trial) -> list[str]:
    """Every rule the recovered trial breaks (empty: none)."""
    found: list[str] = []
    if trial.returncode != -signal.SIGKILL:
        found.append(f"the child was not killed (exit code {trial.returncode})")
    if trial.recovered != 1 or trial.again != 0 or trial.left:
        found.append(f"recover finished {trial.recovered}, then {trial.again}; {trial.left}")
    try:
        check_history(trial.history)
    except AssertionError as error:
        found.append(f"invalid history: {error}")
    if not trial.history or trial.history[0].content != ASKED:
        found.append("the user message was lost")
    answers = {m.tool_call_id: str(m.content) for m in trial.history if m.role == "tool"}
    act_answer = answers.get(ACT.id, "")
    if trial.point == "returned":
        expect_act = 1
        if act_answer != "act done":
            found.append(f"act's recorded result was not used: {act_answer!r}")
        if UNKNOWN not in answers.get(NEXT.id, ""):
            found.append(f"next_step not answered as unknown: {answers.get(NEXT.id)!r}")
    elif trial.idempotent:
        expect_act = 1 if trial.point == "before" else 2  # run again once after the crash
        if act_answer != "act done":
            found.append(f"idempotent act was not run again: {act_answer!r}")
    else:
        expect_act = 0 if trial.point == "before" else 1
        if UNKNOWN not in act_answer:
            found.append(f"claimed act not answered as unknown: {act_answer!r}")
    if trial.effects["act"] != expect_act or trial.effects["next"] != 0:
        found.append(f"side effects {dict(trial.effects)}, expected act={expect_act}, next=0")
    if not trial.history or trial.history[-1].content != "Finished":
        found.append("the model did not go on to its answer")
    return found


@pytest.fixture(
    params=[
        "sqlite",
        "file",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'chat.db'}"
    if request.param == "file":
        return f"file://{tmp_path / 'chats'}"
    return redis_url() if request.param == "redis" else postgres_dsn()


@pytest.mark.parametrize("idempotent", [False, True], ids=["once", "idempotent"])
@pytest.mark.parametrize("point", POINTS)
def test_recover_after_a_kill(store_url: str, point: str, idempotent: bool, tmp_path: Path) -> None:
    trial = run_trial(store_url, point, idempotent, tmp_path / "effects.log")
    assert problems(trial) == [], (trial.history, trial.effects)
    if idempotent and point == "after":
        # The side effect happened, then the process died before its result was recorded:
        # an idempotent tool is run again, so the effect appears twice (never more).
        assert trial.effects["act"] == 2


def test_a_fork_of_a_cut_run_does_not_run_it_again(store_url: str, tmp_path: Path) -> None:
    log, sid = tmp_path / "effects.log", unique_name("crash")
    assert kill_child(store_url, sid, "after", True, log) == -signal.SIGKILL
    agent = make_agent(log, idempotent=True, point="after", kill=False)
    session = open_session(store_url, sid)
    forked = session.fork(sid + "-copy")
    try:
        assert len(Runner().recover_sync(agent, session=session)) == 1
        assert effects(log)["act"] == 2
        Runner().recover_sync(agent, session=forked)
        assert effects(log)["act"] == 2, "recover on the fork ran the idempotent call again"
    finally:
        for made in (session, forked):
            made.clear()
            getattr(made, "close", lambda: None)()


def child(url: str, sid: str, point: str, idempotent: str, log: str) -> None:
    """The child: run the agent until one of its tools kills the process."""
    agent = make_agent(
        Path(log), idempotent=idempotent == "1", point=point, kill=True, url=url, sid=sid
    )
    session = open_session(url, sid)
    result = Runner().run_sync(agent, message=ASKED, session=session)
    print(json.dumps({"survived": result.content}))


if __name__ == "__main__" and sys.argv[1:2] == ["child"]:
    child(*sys.argv[2:7])
