"""``aniki runs list`` and ``aniki runs recover``, run as a user runs them: a run cut by a
killed process, found, finished once, and a run held for approval left alone."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from aniki import Message
from aniki.sessions import open_session
from aniki.sessions._capabilities import capabilities_of

from .test_cli import EXIT_FAILED, EXIT_USAGE, env_for

ROOT = Path(__file__).resolve().parents[2]
AGENT = "tests.cli._runs_agent:agent"

CHILD = """
import sys
from aniki import Runner
from aniki import Message
from aniki.sessions import open_session
from aniki.sessions._capabilities import capabilities_of
from tests.cli._runs_agent import agent
session = open_session(sys.argv[1], sys.argv[2])
result = Runner().run_sync(agent, message=sys.argv[3], session=session)
print([call.id for call in result.pending_approvals])
"""


def environment(home: Path, *, crash: bool = False) -> dict[str, str]:
    env = env_for(home)
    env.update(RUNS_LOG=str(home / "charges.log"), RUNS_CRASH="1" if crash else "0")
    return env


def run_child(home: Path, session_id: str, message: str, *, crash: bool) -> int:
    """Run the agent in a process of its own; its return code."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, url_of(home), session_id, message],
        cwd=ROOT,
        env=environment(home, crash=crash),
        capture_output=True,
        timeout=60,
    )
    return done.returncode


def url_of(home: Path) -> str:
    return f"sqlite:///{home / 'runs.db'}"


async def aniki(home: Path, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "aniki",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=environment(home),
        cwd=ROOT,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def listed(home: Path, *args: str) -> list[dict[str, object]]:
    code, out, err = await aniki(home, "runs", "list", "--store", url_of(home), "--json", *args)
    assert code == 0, err
    found: list[dict[str, object]] = json.loads(out)
    return found


async def test_a_cut_run_is_listed_recovered_once_and_then_done(tmp_path: Path) -> None:
    assert run_child(tmp_path, "chat", "charge order 42", crash=True) == -9  # SIGKILL
    log = tmp_path / "charges.log"
    assert log.read_text().splitlines() == ["charge 42"]

    [run] = await listed(tmp_path)
    assert run["session"] == "chat" and run["state"] == "cut" and run["agent"] == "Billing"
    assert run["calls"] == [{"id": "call_charge", "tool": "charge", "state": "claimed"}]
    assert str(run["updated"]).endswith("+00:00")

    code, out, err = await aniki(tmp_path, "runs", "list", "--store", url_of(tmp_path))
    assert code == 0, err
    assert "cut" in out and "call_charge charge claimed" in out and str(run["run_id"]) in out

    code, out, err = await aniki(
        tmp_path, "runs", "recover", "--store", url_of(tmp_path), "--agent", AGENT
    )
    assert code == 0, err
    assert str(run["run_id"]) in out and "Finished: The outcome of this call" in out

    assert log.read_text().splitlines() == ["charge 42"]  # not idempotent: not run again
    stored = open_session(url_of(tmp_path), "chat").get_messages()
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2].tool_call_id == "call_charge" and "unknown" in stored[2].content
    assert stored[3].content.startswith("Finished: ")

    [after] = await listed(tmp_path, "chat")
    assert after["run_id"] == run["run_id"] and after["state"] == "done"
    assert after["calls"] == []
    code, out, err = await aniki(
        tmp_path, "runs", "recover", "--store", url_of(tmp_path), "--agent", AGENT, "chat"
    )
    assert (code, out.strip()) == (0, "no cut runs"), err
    assert log.read_text().splitlines() == ["charge 42"]


async def test_a_held_run_is_listed_as_held_and_not_recovered(tmp_path: Path) -> None:
    assert run_child(tmp_path, "held", "refund order 42", crash=False) == 0
    [run] = await listed(tmp_path)
    assert run["state"] == "held" and run["session"] == "held"
    assert run["calls"] == [{"id": "call_refund", "tool": "refund", "state": "waiting"}]
    code, out, err = await aniki(
        tmp_path, "runs", "recover", "--store", url_of(tmp_path), "--agent", AGENT
    )
    assert (code, out.strip()) == (0, "no cut runs"), err
    assert [r["state"] for r in await listed(tmp_path)] == ["held"]


async def test_stored_text_is_shown_as_text(tmp_path: Path) -> None:
    session_id = "[bold red]x[/]\x1b[2J"
    assert run_child(tmp_path, session_id, "refund order 42", crash=False) == 0
    code, out, err = await aniki(tmp_path, "runs", "list", "--store", url_of(tmp_path))
    assert code == 0, err
    assert "[bold red]x[/]\\x1b[2J" in out and "\x1b" not in out


async def test_a_store_without_runs(tmp_path: Path) -> None:
    code, out, err = await aniki(tmp_path, "runs", "list", "--store", url_of(tmp_path))
    assert code == 0, err
    assert out.startswith("no runs in any session")
    assert not (tmp_path / "runs.db").exists()  # listing creates no store
    assert await listed(tmp_path) == []


async def test_a_bad_agent_is_one_error_line_and_exit_2(tmp_path: Path) -> None:
    store = url_of(tmp_path)
    for reference, said in (
        ("tests.cli._no_such_module:agent", "cannot import"),
        ("tests.cli._runs_agent:missing", "has no 'missing'"),
        ("tests.cli._runs_agent:not_an_agent", "is a str, not an aniki.Agent"),
        ("tests.cli._runs_agent", "write MODULE:ATTR"),
    ):
        code, out, err = await aniki(
            tmp_path, "runs", "recover", "--store", store, "--agent", reference
        )
        assert code == EXIT_USAGE, (reference, err)
        assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
        assert said in err and "Traceback" not in err
        assert out == ""


async def test_an_unreadable_journal_is_left_out_with_a_warning(tmp_path: Path) -> None:
    assert run_child(tmp_path, "held", "refund order 42", crash=False) == 0
    broken = open_session(url_of(tmp_path), "broken")
    broken.add_message(Message("user", "hello"))
    set_meta = capabilities_of(broken).set_meta
    assert set_meta is not None
    set_meta("aniki.runs", {"v": 99, "runs": {}})
    code, out, err = await aniki(tmp_path, "runs", "list", "--store", url_of(tmp_path), "--json")
    assert code == EXIT_FAILED
    assert [run["session"] for run in json.loads(out)] == ["held"]
    assert "left out of the list" in err and "broken" in err and "Traceback" not in err
