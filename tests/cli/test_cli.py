"""The aniki command, run as a user runs it: in a subprocess, offline."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path

import pytest

from aniki.sessions.sqlite import SQLiteSession

from ..providers import openai_shapes as oai
from ..providers.fake_server import FakeServer, RecordedRequest, Stream

EXIT_FAILED, EXIT_USAGE = 1, 2


def env_for(home: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "ANIKI_"))
    }
    env.update(ANIKI_HOME=str(home), COLUMNS="200", NO_COLOR="1")
    return env


async def aniki(home: Path, *args: str, stdin: str = "") -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "aniki",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env_for(home),
    )
    out, err = await asyncio.wait_for(process.communicate(stdin.encode()), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def store_path(home: Path) -> Path:
    return home / "aniki.db"


async def test_demo_runs_offline_and_persists(tmp_path: Path) -> None:
    code, out, err = await aniki(tmp_path, "demo")
    assert code == 0, err
    assert "scripted model" in out
    assert "get_weather" in out and "validated output" in out
    assert "Pack a waterproof jacket" in out
    assert "found 6 messages" in out  # a new process found the conversation
    assert "TokenBudgetSession(400)" in out
    stored = SQLiteSession("demo", path=tmp_path / "demo.db").get_messages()
    assert [m.role for m in stored] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]


async def test_sessions_commands_round_trip(tmp_path: Path) -> None:
    assert (await aniki(tmp_path, "demo", "--store", f"sqlite:///{store_path(tmp_path)}"))[0] == 0
    code, out, _ = await aniki(tmp_path, "sessions", "list")
    assert code == 0 and "demo" in out and " 6 " in out

    code, out, _ = await aniki(tmp_path, "sessions", "show", "demo")
    assert code == 0 and "get_weather" in out and "answers call_demo_1" in out

    for fmt in ("jsonl", "json", "markdown"):
        code, out, _ = await aniki(tmp_path, "sessions", "export", "demo", "--format", fmt)
        assert code == 0
        if fmt == "jsonl":
            assert len(out.splitlines()) == 6
            first = json.loads(out.splitlines()[0])
            assert first.pop("id") and first.pop("created_at")  # the store's metadata
            assert first == {"role": "user", "content": "What's the weather in Oslo?"}
        elif fmt == "json":
            assert json.loads(out)["id"] == "demo"
        else:
            assert out.startswith("# Session demo") and "## tool" in out

    export = tmp_path / "demo.json"
    code, _, _ = await aniki(
        tmp_path, "sessions", "export", "demo", "--format", "json", "-o", str(export)
    )
    assert code == 0
    code, out, _ = await aniki(tmp_path, "sessions", "import", str(export), "--id", "again")
    assert code == 0 and "imported 6" in out
    originals = SQLiteSession("demo", path=store_path(tmp_path)).get_messages()
    imported = SQLiteSession("again", path=store_path(tmp_path)).get_messages()
    assert imported == originals  # an import keeps the ids and times it was given
    assert [(m.id, m.created_at) for m in imported] == [(m.id, m.created_at) for m in originals]
    code, _, err = await aniki(tmp_path, "sessions", "import", str(export), "--id", "again")
    assert code == EXIT_USAGE and "--replace" in err

    files = tmp_path / "files"
    files.mkdir()
    code, out, err = await aniki(tmp_path, "sessions", "copy", "demo", f"file://{files}#moved")
    assert code == 0, err
    code, out, _ = await aniki(tmp_path, "sessions", "list", "--store", f"file://{files}")
    assert "moved" in out

    code, out, _ = await aniki(tmp_path, "sessions", "rm", "again", "--yes")
    assert code == 0
    assert SQLiteSession("again", path=store_path(tmp_path)).get_messages() == ()
    assert len(SQLiteSession("demo", path=store_path(tmp_path)).get_messages()) == 6


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (("sessions", "show", "missing"), EXIT_FAILED, "no session 'missing'"),
        (("sessions", "list", "--store", "bogus://x"), EXIT_USAGE, "scheme"),
        (
            ("sessions", "list", "--store", "redis://:secret@127.0.0.1:1/0"),
            EXIT_FAILED,
            "127.0.0.1:1",
        ),
        (("chat",), EXIT_USAGE, "aniki demo"),
        (
            ("chat", "--window", "3", "--max-tokens", "9", "--base-url", "http://127.0.0.1:1/v1"),
            EXIT_USAGE,
            "exclude each other",
        ),
        (("nonsense",), EXIT_USAGE, "No such command"),
    ],
)
async def test_expected_failures_are_readable(
    tmp_path: Path, args: tuple[str, ...], code: int, words: str
) -> None:
    got, out, err = await aniki(tmp_path, *args)
    assert got == code
    assert words in err
    assert "Traceback" not in err + out
    assert "secret" not in err + out


def _controlling_terminal() -> None:
    """In the child: a new session whose controlling terminal is the pty on stdin, with
    Ctrl-C's signal handled as in a terminal's shell. A test run started in the background
    by a script inherits SIGINT ignored (as every background job of a non-interactive shell
    does), and Python keeps an ignored SIGINT ignored: Ctrl-C would do nothing."""
    import fcntl
    import signal
    import termios

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def scripted_server(replies: list[str]) -> FakeServer:
    def handle(request: RecordedRequest) -> Stream:
        reply = replies.pop(0)
        return Stream(oai.text_stream(re.findall(r"\S+\s*", reply)))

    return FakeServer(handle)


async def test_chat_over_piped_stdin_resumes_the_session(tmp_path: Path) -> None:
    async with scripted_server(["Hello Ana!", "You are Ana.", "Still Ana."]) as server:
        base = ["chat", "--session", "s1", "--base-url", server.url + "/v1", "--model", "m"]
        code, out, err = await aniki(tmp_path, *base, stdin="I am Ana\n/tokens\n/exit\n")
        assert code == 0, err
        assert "assistant> Hello Ana!" in out
        assert "stored: 2 messages" in out
        code, out, err = await aniki(tmp_path, *base, stdin="Who am I?\n/history\n")
        assert code == 0, err
        assert "2 earlier messages" in out
        sent = server.requests[-1].json()["messages"]
        assert [m["content"] for m in sent] == [
            "You are a helpful assistant.",
            "I am Ana",
            "Hello Ana!",
            "Who am I?",
        ]
        code, out, err = await aniki(tmp_path, *base, "--window", "1", stdin="Again?\n")
        assert [m["role"] for m in server.requests[-1].json()["messages"]] == ["system", "user"]
    stored = SQLiteSession("s1", path=store_path(tmp_path)).get_messages()
    assert len(stored) == 6


async def test_chat_ctrl_c_stops_a_reply_and_keeps_only_the_user_message(tmp_path: Path) -> None:
    import pty

    stalled = Stream(
        oai.events(oai.chunk({"role": "assistant", "content": "Once upon"}), done=False),
        end="stall",
    )
    async with FakeServer(lambda request: stalled) as server:
        master, slave = pty.openpty()
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "aniki",
            "chat",
            "--session",
            "tty",
            "--base-url",
            server.url + "/v1",
            "--model",
            "m",
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env_for(tmp_path),
            preexec_fn=_controlling_terminal,
        )
        os.close(slave)
        loop = asyncio.get_running_loop()
        os.set_blocking(master, False)
        screen = b""
        seen = 0

        async def read_until(marker: bytes) -> None:
            """Wait for ``marker`` to appear in output not read by an earlier call."""
            nonlocal screen, seen
            deadline = loop.time() + 30
            while marker not in screen[seen:]:
                assert loop.time() < deadline, screen.decode(errors="replace")
                try:
                    screen += os.read(master, 4096)
                except BlockingIOError:
                    await asyncio.sleep(0.02)
            seen = screen.index(marker, seen) + len(marker)

        await read_until(b"you>")
        os.write(master, b"tell me a story\r")
        await read_until(b"Once upon")
        os.write(master, b"\x03")  # Ctrl-C, delivered by the terminal as SIGINT
        await read_until(b"reply stopped")
        await read_until(b"you>")
        os.write(master, b"\x03")  # Ctrl-C at the prompt leaves, as interrupted
        code = await asyncio.wait_for(process.wait(), 30)
        os.close(master)
    assert code == 130, screen.decode(errors="replace")
    assert b"Traceback" not in screen
    stored = SQLiteSession("tty", path=store_path(tmp_path)).get_messages()
    assert [(m.role, m.content) for m in stored] == [("user", "tell me a story")]


async def test_chat_shows_what_each_call_was_sent(tmp_path: Path) -> None:
    async with scripted_server(["Hello Ana!", "You are Ana."]) as server:
        base = ["chat", "--session", "c1", "--base-url", server.url + "/v1", "--model", "m"]
        code, out, err = await aniki(
            tmp_path, *base, stdin="/context\nI am Ana\nWho am I?\n/context\n/exit\n"
        )
    assert code == 0, err
    assert "context reports on" in out and "context reports off" in out
    lines = [line for line in out.splitlines() if "call 1:" in line]
    assert len(lines) == 2  # one per reply while on
    assert "1 of 1 messages sent" in lines[0] and "prefix kept" in lines[0]
    assert "3 of 3 messages sent" in lines[1]


async def test_chat_shows_the_models_thinking_before_its_reply_and_keeps_it(
    tmp_path: Path,
) -> None:
    def handle(request: RecordedRequest) -> Stream:
        return Stream(
            oai.events(
                oai.chunk({"role": "assistant", "reasoning_content": "They said hi; "}),
                oai.chunk({"reasoning_content": "greet back."}),
                oai.chunk({"content": "Hello!"}),
                oai.chunk(finish_reason="stop"),
            )
        )

    async with FakeServer(handle) as server:
        base = ["chat", "--session", "t1", "--base-url", server.url + "/v1", "--model", "m"]
        code, out, err = await aniki(tmp_path, *base, stdin="hi\n/exit\n")
    assert code == 0, err
    assert "assistant> They said hi; greet back.Hello!" in out
    stored = SQLiteSession("t1", path=store_path(tmp_path)).get_messages()
    assert [part.text for part in stored[-1].reasoning] == ["They said hi; greet back."]
