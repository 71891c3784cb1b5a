"""The aniki command as a newcomer meets it: the install ``scripts/demo.sh`` makes (no
provider package), piped chats that end cleanly, and ``/clear`` asking before it deletes."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from aniki.messages import Message
from aniki.sessions.sqlite import SQLiteSession

from .test_cli import env_for, scripted_server, store_path
from .test_cli_hardening import Terminal

EXIT_USAGE = 2

# Makes the provider packages unimportable, as in an install without the openai or
# anthropic extra, whatever this environment has installed.
BLOCKER = """\
import sys

class _NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {"openai", "anthropic"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NotInstalled())
"""


async def run(
    home: Path,
    *args: str,
    stdin: str = "",
    env: dict[str, str] | None = None,
) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "aniki",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env or env_for(home),
    )
    out, err = await asyncio.wait_for(process.communicate(stdin.encode()), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def without_providers(home: Path) -> dict[str, str]:
    blocker = home / "blocker"
    blocker.mkdir(parents=True, exist_ok=True)
    (blocker / "sitecustomize.py").write_text(BLOCKER)
    env = env_for(home)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(blocker), env.get("PYTHONPATH")]))
    return env


# Without the provider packages ----------------------------------------------------------------


def test_the_blocker_makes_the_provider_packages_unimportable(tmp_path: Path) -> None:
    import subprocess

    for package in ("openai", "anthropic"):
        done = subprocess.run(
            [sys.executable, "-c", f"import {package}"],
            env=without_providers(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode != 0 and "ModuleNotFoundError" in done.stderr


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (["demo", "--provider", "openai"], "openai"),
        (["demo", "--provider", "anthropic"], "anthropic"),
        (["demo", "--base-url", "http://127.0.0.1:1/v1"], "openai"),
        (["chat", "--base-url", "http://127.0.0.1:1/v1", "--model", "m"], "openai"),
        (["chat", "--provider", "openai"], "openai"),
        (["chat", "--provider", "anthropic"], "anthropic"),
        (["chat", "--provider", "openai-responses", "--model", "m"], "openai"),
    ],
)
async def test_a_missing_provider_package_is_one_error_line_naming_the_extra(
    tmp_path: Path, args: list[str], extra: str
) -> None:
    env = without_providers(tmp_path)
    env.update(OPENAI_API_KEY="sk-test", ANTHROPIC_API_KEY="sk-ant-test")
    code, out, err = await run(tmp_path, *args, stdin="hello\n", env=env)
    assert code == EXIT_USAGE, err
    assert "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    assert f"pip install 'aniki-sdk[{extra}]'" in lines[0]
    assert not (tmp_path / "aniki.db").exists()  # nothing was written before the check


# A piped chat ends cleanly ----------------------------------------------------------------


async def test_a_piped_chat_never_leaves_a_task_pending_at_exit(tmp_path: Path) -> None:
    """Every piped chat ends with its loop shut down as ``asyncio.run`` shuts one down: what
    the last reply left running (closing its HTTP response) finishes and the provider's
    client is closed, so no run prints "Task was destroyed but it is pending!". The CPU is
    kept busy, which is when a reply's cleanup is still pending as the last turn ends."""
    runs = 8  # each a whole process: about 2.5 s on a busy 2-core machine
    replies = ["Hello there, friend.", "Fine, thanks."] * runs
    busy = await asyncio.create_subprocess_exec(sys.executable, "-c", "while True: pass")
    try:
        async with scripted_server(replies) as server:
            base = ["chat", "--session", "s", "--base-url", server.url + "/v1", "--model", "m"]
            for number in range(runs):
                code, out, err = await run(
                    tmp_path / str(number), *base, stdin="hi\nhow are you?\n"
                )
                assert code == 0, err
                assert "Fine, thanks." in out
                assert "Task was destroyed" not in err, f"run {number}: {err}"
                assert "never retrieved" not in err and "Event loop is closed" not in err, err
    finally:
        busy.kill()
        await busy.wait()


# /clear asks first ---------------------------------------------------------------------------


def _two_messages(home: Path, session_id: str) -> None:
    SQLiteSession(session_id, path=store_path(home)).add_messages(
        [Message("user", "keep me"), Message("assistant", "kept")]
    )


def _count(home: Path, session_id: str) -> int:
    return len(SQLiteSession(session_id, path=store_path(home)).get_messages())


async def test_clear_on_a_terminal_asks_and_deletes_only_on_yes(tmp_path: Path) -> None:
    _two_messages(tmp_path, "t")
    term = await Terminal.start(
        tmp_path, "chat", "--session", "t", "--base-url", "http://127.0.0.1:1/v1", "--model", "m"
    )
    await term.read_until(b"you>")
    term.type(b"/clear\r")
    await term.read_until(b"delete 2 messages of 't'? [y/N]")
    term.type(b"\r")  # the default is no
    await term.read_until(b"kept")
    await term.read_until(b"you>")
    assert _count(tmp_path, "t") == 2
    term.type(b"/clear\r")
    await term.read_until(b"[y/N]")
    term.type(b"\x04")  # Ctrl-D at the question: no, and the chat goes on
    await term.read_until(b"you>")
    assert _count(tmp_path, "t") == 2
    term.type(b"/clear\r")
    await term.read_until(b"[y/N]")
    term.type(b"y\r")
    await term.read_until(b"history cleared")
    await term.read_until(b"you>")
    term.type(b"\x04")
    code = await term.exit_code()
    assert code == 0, term.screen.decode("replace")
    assert b"Traceback" not in term.screen
    assert _count(tmp_path, "t") == 0


async def test_clear_without_a_terminal_wants_yes(tmp_path: Path) -> None:
    _two_messages(tmp_path, "p")
    base = ["chat", "--session", "p", "--base-url", "http://127.0.0.1:1/v1", "--model", "m"]
    code, out, err = await run(tmp_path, *base, stdin="/clear\n/history\n")
    assert code == 0, err
    assert "not deleting the 2 messages of 'p' without a confirmation" in err
    assert "/clear --yes" in err
    assert "history cleared" not in out and "keep me" in out
    assert _count(tmp_path, "p") == 2
    code, out, err = await run(tmp_path, *base, stdin="/clear --yes\n")
    assert code == 0, err
    assert "history cleared" in out
    assert _count(tmp_path, "p") == 0
