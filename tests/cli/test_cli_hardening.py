"""The aniki command with hostile data and mistakes: stored text printed as text, files it
cannot read or write, imports checked as a whole, a terminal's line editing and Ctrl-C, the
demo kept to its own data, and hints that name the command's options."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

from aniki.messages import Message
from aniki.sessions.file import FileSession
from aniki.sessions.sqlite import SQLiteSession

from ..providers.fake_server import FakeServer, Respond, closed_port
from .test_cli import _controlling_terminal, env_for, scripted_server, store_path

EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 1, 2, 130

MARKUP = "[/] [bold]b[/bold] [link=http://x.example]l[/link] :smile: [red"


async def run(
    home: Path, *args: str, stdin: str = "", cwd: Path | None = None
) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "aniki",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env_for(home),
        cwd=cwd,
    )
    out, err = await asyncio.wait_for(process.communicate(stdin.encode()), 60)
    assert process.returncode is not None
    assert "Traceback" not in out.decode() + err.decode(), err.decode()
    return process.returncode, out.decode(), err.decode()


def db(home: Path) -> str:
    return f"sqlite:///{store_path(home)}"


def stored(home: Path, session_id: str) -> list[tuple[str, str]]:
    return [
        (m.role, m.content) for m in SQLiteSession(session_id, path=store_path(home)).get_messages()
    ]


class Terminal:
    """``aniki`` run on a pseudo-terminal, as a user at a keyboard runs it."""

    def __init__(self, process: asyncio.subprocess.Process, master: int) -> None:
        self.process = process
        self.master = master
        self.screen = b""
        self.seen = 0

    @classmethod
    async def start(cls, home: Path, *args: str) -> Terminal:
        import pty

        master, slave = pty.openpty()
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "aniki",
            *args,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**env_for(home), "TERM": "xterm"},
            preexec_fn=_controlling_terminal,
        )
        os.close(slave)
        os.set_blocking(master, False)
        return cls(process, master)

    async def read_until(self, marker: bytes) -> None:
        deadline = asyncio.get_running_loop().time() + 30
        while marker not in self.screen[self.seen :]:
            assert asyncio.get_running_loop().time() < deadline, self.screen.decode("replace")
            try:
                self.screen += os.read(self.master, 4096)
            except BlockingIOError:
                await asyncio.sleep(0.02)
            except OSError:  # the child closed the terminal
                await asyncio.sleep(0.02)
        self.seen = self.screen.index(marker, self.seen) + len(marker)

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    async def exit_code(self) -> int:
        code = await asyncio.wait_for(self.process.wait(), 30)
        try:
            while chunk := os.read(self.master, 4096):
                self.screen += chunk
        except OSError:
            pass
        os.close(self.master)
        return code


# Stored text is printed as text ------------------------------------------------------------


async def test_markup_in_ids_and_content_is_printed_as_text(tmp_path: Path) -> None:
    session_id = f"id {MARKUP}"
    SQLiteSession(session_id, path=store_path(tmp_path)).add_messages(
        [
            Message(role="user", content=MARKUP),
            Message(
                role="assistant", tool_calls=({"id": "c[/]", "name": "f[/]", "arguments": "{}"},)
            ),  # type: ignore[arg-type]
            Message(role="tool", content="[/]", tool_call_id="c[/]"),
        ]
    )
    code, out, _ = await run(tmp_path, "sessions", "list")
    assert code == 0 and session_id in out
    code, out, _ = await run(tmp_path, "sessions", "show", session_id)
    assert code == 0 and MARKUP in out and "f[/]({}) c[/]" in out and "answers c[/]" in out
    code, _, err = await run(tmp_path, "sessions", "show", "no [/] such")
    assert code == EXIT_FAILED and "no session 'no [/] such'" in err
    code, out, _ = await run(tmp_path, "sessions", "rm", session_id, "--yes")
    assert code == 0 and f"deleted {session_id!r}" in out
    assert stored(tmp_path, session_id) == []


CONTROLS = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\u202eevil\x9b\x08"


async def test_control_characters_in_stored_text_reach_no_terminal(tmp_path: Path) -> None:
    """Escape sequences (retitle, clear, recolour), a bidi override and C1 controls in ids,
    content and tool fields are shown as escapes, never sent to the terminal raw."""
    session_id = f"id{CONTROLS}"
    SQLiteSession(session_id, path=store_path(tmp_path)).add_messages(
        [
            Message(role="user", content=f"line one\n{CONTROLS}"),
            Message(
                role="assistant",
                tool_calls=({"id": f"c{CONTROLS}", "name": "f", "arguments": CONTROLS},),  # type: ignore[arg-type]
            ),
            Message(role="tool", content=CONTROLS, tool_call_id=f"c{CONTROLS}"),
        ]
    )
    shown = CONTROLS.encode("unicode_escape").decode()
    for args in (["sessions", "list"], ["sessions", "show", session_id]):
        code, out, err = await run(tmp_path, *args)
        assert code == 0, err
        assert not any(char in out for char in "\x1b\x07\u202e\x9b\x08"), out
        assert shown in out
    assert "line one\n" in out  # newlines in content stay lines
    code, _, err = await run(tmp_path, "sessions", "show", f"no{CONTROLS}")
    assert code == EXIT_FAILED and "\x1b" not in err


async def test_a_store_url_where_a_session_id_goes_is_read_as_url_and_id(
    tmp_path: Path,
) -> None:
    """``sessions show URL#ID`` reads that store; a URL without ``#ID`` is a usage error that
    quotes it without its password; reading never creates the default store."""
    other = tmp_path / "other.db"
    SQLiteSession("s1", path=other).add_message(Message(role="user", content="from other"))
    code, out, err = await run(tmp_path, "sessions", "show", f"sqlite:///{other}#s1")
    assert code == 0 and "from other" in out, err
    code, out, err = await run(tmp_path / "home", "sessions", "show", "postgresql://a=b:Zq9pw@h/d")
    assert code == EXIT_USAGE
    assert "Zq9" not in out + err and "a=b:***@h/d" in err and "URL#SESSION_ID" in err
    for args in (["sessions", "list"], ["sessions", "show", "x"], ["sessions", "export", "x"]):
        await run(tmp_path / "home", *args)
    assert not store_path(tmp_path / "home").exists()


async def test_chat_prints_ids_and_replies_as_text(tmp_path: Path) -> None:
    async with scripted_server([MARKUP]) as server:
        args = ["chat", "--session", "s [/]", "--base-url", server.url + "/v1", "--model", "m"]
        code, out, err = await run(tmp_path, *args, stdin=f"{MARKUP}\n/history\n/nope[/]\n")
    assert code == 0, err
    assert "session s [/]" in out
    assert out.count(MARKUP) >= 3  # the reply streamed, then both messages in /history
    assert "unknown command /nope[/]" in out


# Files that cannot be read or written --------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"\xff\xfe{\x00", "not UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
        (b'{"role": "user", "content": "hi"}\n{"role": "user"', "line 2"),
    ],
)
async def test_import_of_unreadable_files_is_one_error(
    tmp_path: Path, content: bytes, words: str
) -> None:
    file = tmp_path / "bad.jsonl"
    file.write_bytes(content)
    code, _, err = await run(tmp_path, "sessions", "import", str(file), "--id", "x")
    assert code == EXIT_USAGE
    assert words in err and err.startswith("error:")
    assert stored(tmp_path, "x") == []


async def test_export_to_a_missing_directory_is_one_error(tmp_path: Path) -> None:
    SQLiteSession("e", path=store_path(tmp_path)).add_message(Message(role="user", content="hi"))
    target = tmp_path / "missing" / "x.jsonl"
    code, _, err = await run(tmp_path, "sessions", "export", "e", "-o", str(target))
    assert code == EXIT_FAILED
    assert f"cannot write {target}" in err and "No such file or directory" in err


# Imports are checked as a whole ------------------------------------------------------------


@pytest.mark.parametrize("content", ["", "\n  \n", '{"format": "aniki.session/1", "messages": []}'])
async def test_import_of_no_messages_is_refused_and_deletes_nothing(
    tmp_path: Path, content: str
) -> None:
    SQLiteSession("keep", path=store_path(tmp_path)).add_message(
        Message(role="user", content="mine")
    )
    file = tmp_path / "empty.jsonl"
    file.write_text(content)
    code, _, err = await run(tmp_path, "sessions", "import", str(file), "--id", "keep", "--replace")
    assert code == EXIT_USAGE
    assert "holds no messages; nothing was imported" in err
    assert stored(tmp_path, "keep") == [("user", "mine")]


def _lines(*messages: dict[str, object]) -> str:
    return "".join(json.dumps(m) + "\n" for m in messages)


USER = {"role": "user", "content": "hi"}
CALL = {
    "role": "assistant",
    "tool_calls": [
        {"id": "a", "name": "f", "arguments": "{}"},
        {"id": "b", "name": "f", "arguments": "{}"},
    ],
}
ANSWER_A = {"role": "tool", "content": "1", "tool_call_id": "a"}
ANSWER_B = {"role": "tool", "content": "2", "tool_call_id": "b"}
REPLY = {"role": "assistant", "content": "done"}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (_lines(USER, ANSWER_A), "line 2: a tool result answers no pending call (id 'a')"),
        (_lines(USER, CALL, ANSWER_A, USER, ANSWER_B), "line 2: tool call 'b' is not answered"),
        (_lines(USER, CALL, ANSWER_A), "line 2: tool call 'b' is not answered"),
        (_lines(USER, CALL, ANSWER_A, ANSWER_A, ANSWER_B), "line 4: a tool result answers no"),
        ("\n" + _lines(USER, REPLY, ANSWER_B), "line 4: a tool result"),
        (
            json.dumps({"id": "j", "messages": [USER, ANSWER_A]}),
            "message 2: a tool result answers no pending call",
        ),
    ],
)
async def test_import_refuses_broken_tool_sequences_and_writes_nothing(
    tmp_path: Path, text: str, words: str
) -> None:
    file = tmp_path / "broken.jsonl"
    file.write_text(text)
    code, _, err = await run(tmp_path, "sessions", "import", str(file), "--id", "x")
    assert code == EXIT_USAGE
    assert words in err, err
    assert "nothing was imported" in err
    assert stored(tmp_path, "x") == []


async def test_import_accepts_answered_parallel_calls(tmp_path: Path) -> None:
    file = tmp_path / "good.jsonl"
    file.write_text(_lines(USER, CALL, ANSWER_B, ANSWER_A, REPLY))
    code, out, err = await run(tmp_path, "sessions", "import", str(file), "--id", "x")
    assert code == 0, err
    assert "imported 5 messages" in out
    assert [role for role, _ in stored(tmp_path, "x")] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]


# Store URLs and references -----------------------------------------------------------------


async def test_copy_to_a_relative_file_url(tmp_path: Path) -> None:
    SQLiteSession("cli-1", path=store_path(tmp_path)).add_message(
        Message(role="user", content="hi")
    )
    code, out, err = await run(
        tmp_path, "sessions", "copy", "cli-1", "file:chatsdir#x", cwd=tmp_path
    )
    assert code == 0, err
    assert [m.content for m in FileSession("x", tmp_path / "chatsdir").get_messages()] == ["hi"]
    assert stored(tmp_path, "file:chatsdir#x") == []
    code, out, _ = await run(tmp_path, "sessions", "list", "--store", "file:chatsdir", cwd=tmp_path)
    assert code == 0 and "x" in out
    code, _, err = await run(tmp_path, "sessions", "copy", "cli-1", "file:chatsdir", cwd=tmp_path)
    assert code == EXIT_USAGE and "URL#SESSION_ID" in err


@pytest.mark.parametrize(
    ("store", "hint"),
    [("chats.db", "sqlite:///chats.db"), ("chatsdir", "file:chatsdir")],
)
async def test_a_bare_path_as_store_gets_the_url_to_write(
    tmp_path: Path, store: str, hint: str
) -> None:
    (tmp_path / "chatsdir").mkdir()
    code, _, err = await run(tmp_path, "sessions", "list", "--store", store, cwd=tmp_path)
    assert code == EXIT_USAGE
    assert hint in err and "store URL" in err


async def test_a_bare_path_in_aniki_store_names_the_variable(tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "aniki", "sessions", "list"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**env_for(tmp_path), "ANIKI_STORE": "chats.db"},
    )
    _, err = await process.communicate()
    assert process.returncode == EXIT_USAGE
    assert "$ANIKI_STORE" in err.decode() and "sqlite:///chats.db" in err.decode()


async def test_list_prints_good_sessions_and_warns_of_damaged_files(tmp_path: Path) -> None:
    chats = tmp_path / "chats"
    FileSession("good", chats).add_message(Message(role="user", content="hi"))
    (chats / "bad.jsonl").write_text("this is not a session file\n")
    gapped = FileSession("gapped", chats)
    gapped.add_message(Message(role="user", content="hi"))
    header, rest = gapped.path.read_bytes().split(b"\n", 1)
    gapped.path.write_bytes(header + b"\n\n" + rest)  # a blank line: the file reads as damaged
    code, out, err = await run(tmp_path, "sessions", "list", "--store", f"file://{chats}")
    assert code == EXIT_FAILED
    assert "good" in out and "gapped" not in out
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2, err
    assert "bad.jsonl" in warnings[0] + warnings[1] and "gapped" in warnings[0] + warnings[1]


async def test_list_leaves_out_a_session_it_cannot_read_and_lists_the_rest(
    tmp_path: Path,
) -> None:
    """A damaged record that the listing itself does not read (SQLite counts rows) shows
    when the command reads the session: that one is left out with a warning."""
    SQLiteSession("good", path=store_path(tmp_path)).add_message(Message("user", "hi"))
    SQLiteSession("bad", path=store_path(tmp_path)).add_message(Message("user", "hi"))
    import sqlite3

    with sqlite3.connect(store_path(tmp_path)) as conn:
        conn.execute(
            'UPDATE aniki_messages SET body = \'{"role": "nobody"}\' WHERE key = '
            "(SELECT MAX(key) FROM aniki_messages)"
        )
    code, out, err = await run(tmp_path, "sessions", "list")
    assert code == EXIT_FAILED, out + err
    assert "good" in out and "bad" not in out
    assert "warning: left out of the list" in err


# The demo keeps to its own data ------------------------------------------------------------


async def test_demo_never_touches_a_users_demo_session(tmp_path: Path) -> None:
    SQLiteSession("demo", path=store_path(tmp_path)).add_message(
        Message(role="user", content="my own notes")
    )
    code, out, err = await run(tmp_path, "demo")
    assert code == 0, err
    assert stored(tmp_path, "demo") == [("user", "my own notes")]
    own = tmp_path / "demo.db"
    assert str(own) in out
    assert len(SQLiteSession("demo", path=own).get_messages()) == 6

    elsewhere = tmp_path / "other.db"
    SQLiteSession("demo", path=elsewhere).add_message(Message(role="user", content="mine too"))
    code, out, err = await run(tmp_path, "demo", "--store", f"sqlite:///{elsewhere}")
    assert code == 0, err
    assert [m.content for m in SQLiteSession("demo", path=elsewhere).get_messages()] == ["mine too"]
    assert len(SQLiteSession("demo-2", path=elsewhere).get_messages()) == 6
    assert "demo-2" in out

    # a session "demo" the user wrote into the demo's own file (ANIKI_STORE pointing there)
    SQLiteSession("demo", path=own).clear()
    SQLiteSession("demo", path=own).add_message(Message(role="user", content="chat notes"))
    code, out, err = await run(tmp_path, "demo")
    assert code == 0, err
    assert [m.content for m in SQLiteSession("demo", path=own).get_messages()] == ["chat notes"]
    assert len(SQLiteSession("demo-2", path=own).get_messages()) == 6
    code, out, err = await run(tmp_path, "demo")  # its own session is redone, nothing else
    assert code == 0, err
    assert [m.content for m in SQLiteSession("demo", path=own).get_messages()] == ["chat notes"]
    assert len(SQLiteSession("demo-2", path=own).get_messages()) == 6
    assert SQLiteSession("demo-3", path=own).get_messages() == ()


async def test_rm_without_a_terminal_wants_yes(tmp_path: Path) -> None:
    SQLiteSession("keep", path=store_path(tmp_path)).add_message(Message("user", "hi"))
    code, _, err = await run(tmp_path, "sessions", "rm", "keep")
    assert code == EXIT_USAGE and "--yes" in err
    assert stored(tmp_path, "keep") == [("user", "hi")]


# Hints speak the command's language --------------------------------------------------------


async def test_connection_failure_hint_names_the_option(tmp_path: Path) -> None:
    port = await closed_port()
    args = ["chat", "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "m"]
    code, out, err = await run(tmp_path, *args, stdin="hi\n")
    assert code == 0
    assert "--base-url" in out and "base_url=" not in out + err


async def test_a_404_from_a_base_url_without_v1_suggests_it(tmp_path: Path) -> None:
    async with FakeServer(lambda request: Respond(404, {"error": "not found"})) as server:
        args = ["chat", "--base-url", server.url, "--model", "m"]
        code, out, err = await run(tmp_path, *args, stdin="hi\n")
    assert code == 0, err
    assert f"--base-url {server.url}/v1" in out


# A terminal: line editing, history, Ctrl-C ------------------------------------------------


async def test_chat_edits_lines_and_recalls_history_on_a_terminal(tmp_path: Path) -> None:
    async with scripted_server(["one", "two"]) as server:
        term = await Terminal.start(
            tmp_path, "chat", "--session", "t", "--base-url", server.url + "/v1", "--model", "m"
        )
        await term.read_until(b"you>")
        term.type(b"helo\x1b[DX\x1b[C\r")  # left arrow, insert, right arrow
        await term.read_until(b"one")
        await term.read_until(b"you>")
        term.type(b"\x1b[A\r")  # up arrow: the line before
        await term.read_until(b"two")
        await term.read_until(b"you>")
        term.type(b"\x04")  # Ctrl-D leaves
        code = await term.exit_code()
    assert code == 0, term.screen.decode("replace")
    assert stored(tmp_path, "t") == [
        ("user", "helXo"),
        ("assistant", "one"),
        ("user", "helXo"),
        ("assistant", "two"),
    ]


async def test_chat_ctrl_c_at_the_prompt_exits_130(tmp_path: Path) -> None:
    term = await Terminal.start(tmp_path, "chat", "--base-url", "http://127.0.0.1:1/v1")
    await term.read_until(b"you>")
    term.type(b"\x03")
    code = await term.exit_code()
    assert code == EXIT_INTERRUPTED, term.screen.decode("replace")
    assert b"Traceback" not in term.screen


async def test_a_missing_key_hint_names_no_argument(tmp_path: Path) -> None:
    args = ["chat", "--provider", "anthropic", "--base-url", "http://127.0.0.1:1", "--model", "m"]
    code, _, err = await run(tmp_path, *args, stdin="hi\n")
    assert code == EXIT_FAILED
    assert "ANTHROPIC_API_KEY" in err and "api_key=" not in err


async def test_a_locked_sqlite_store_hint_names_the_url_option(tmp_path: Path) -> None:
    import sqlite3

    SQLiteSession("s", path=store_path(tmp_path)).add_message(Message(role="user", content="hi"))
    file = tmp_path / "in.jsonl"
    file.write_text(_lines(USER))
    holder = sqlite3.connect(store_path(tmp_path), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        url = f"{db(tmp_path)}?timeout=0.2"
        code, _, err = await run(
            tmp_path, "sessions", "import", str(file), "--id", "t", "--store", url
        )
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code == EXIT_FAILED
    assert "?timeout=SECONDS" in err and "timeout=\n" not in err and "raise timeout=" not in err


async def test_export_and_import_keep_line_separators_inside_messages(tmp_path: Path) -> None:
    content = "a\u2028b\u2029c\x85d\x0be\x1cf\rg"
    SQLiteSession("odd", path=store_path(tmp_path)).add_message(
        Message(role="user", content=content)
    )
    export = tmp_path / "odd.jsonl"
    code, _, err = await run(tmp_path, "sessions", "export", "odd", "-o", str(export))
    assert code == 0, err
    code, _, err = await run(tmp_path, "sessions", "import", str(export), "--id", "back")
    assert code == 0, err
    assert stored(tmp_path, "back") == [("user", content)]


async def test_a_silent_redis_hint_names_no_argument(tmp_path: Path) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # hold the connection, answer nothing

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        args = ["sessions", "show", "x", "--store", f"redis://127.0.0.1:{port}/0"]
        code, _, err = await run(tmp_path, *args)
    finally:
        server.close()
    assert code == EXIT_FAILED
    assert "did not answer in time" in err and "timeout=" not in err


async def test_show_and_export_name_each_attachment_and_export_keeps_them(tmp_path: Path) -> None:
    from aniki import Attachment, Reasoning

    png = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001")
    messages = [
        Message("user", "", attachments=(Attachment("image/png", data=png, name="dot.png"),)),
        Message("assistant", "A dot.", reasoning=(Reasoning("tiny", signature="s"),)),
    ]
    SQLiteSession("pics", path=store_path(tmp_path)).add_messages(messages)
    code, out, _ = await run(tmp_path, "sessions", "show", "pics")
    assert code == 0
    key = hashlib.sha256(png).hexdigest()
    assert f"image/png, 20 bytes, sha256 {key[:12]}…, dot.png" in out
    assert "1 reasoning block(s) kept" in out
    code, out, _ = await run(tmp_path, "sessions", "export", "pics", "--format", "jsonl")
    assert code == 0
    assert [Message.from_dict(json.loads(line)) for line in out.splitlines()] == messages
