"""``aniki sessions show --context``, and exports that keep each call's report."""

from __future__ import annotations

import json
from pathlib import Path

from aniki import Agent, Message, Runner, RunResult
from aniki.sessions.sqlite import SQLiteSession
from aniki.testing import MockProvider

from .test_cli import aniki, store_path


async def converse(home: Path, model: str = "mock-1") -> RunResult:
    """One run stored in the CLI's default store: a user message and a reply with a report."""
    provider = MockProvider()
    provider.enqueue_response(
        "Oslo is cold.", usage={"input_tokens": 40, "output_tokens": 4, "requests": 1}
    )
    session = SQLiteSession("chat", path=store_path(home))
    session.add_message(Message("assistant", "Welcome back."))  # written by hand: no report
    agent = Agent("Helper", "Be brief.", model=model, provider=provider)
    return await Runner().run(agent, message="Weather in Oslo?", session=session)


async def test_show_context_prints_each_replys_report(tmp_path: Path) -> None:
    result = await converse(tmp_path)
    [report] = result.context_reports
    assert "input tokens billed" in report.describe()

    code, plain_out, err = await aniki(tmp_path, "sessions", "show", "chat")
    assert code == 0, err
    assert "context:" not in plain_out and report.describe() not in plain_out

    code, out, err = await aniki(tmp_path, "sessions", "show", "chat", "--context")
    assert code == 0, err
    lines = out.splitlines()
    shown = [line for line in lines if "context:" in line]
    assert shown == [f"  context: mock-1: {report.describe()}"]  # one line, the reply's only
    reply = lines.index("Oslo is cold.")
    assert lines[reply + 1] == shown[0]
    # Everything else is printed as without --context.
    assert [line for line in lines if line not in shown] == plain_out.splitlines()


async def test_show_context_prints_stored_text_as_text(tmp_path: Path) -> None:
    await converse(tmp_path, model="[bold red]m[/]\x1b[2J")
    code, out, err = await aniki(tmp_path, "sessions", "show", "chat", "--context")
    assert code == 0, err
    [line] = [line for line in out.splitlines() if "context:" in line]
    assert line.startswith("  context: [bold red]m[/]\\x1b[2J: ")  # no markup, no escape code
    assert "\x1b" not in out


async def test_export_and_import_keep_the_reports(tmp_path: Path) -> None:
    result = await converse(tmp_path)
    for fmt in ("jsonl", "json"):
        export = tmp_path / f"chat.{fmt}"
        code, _, err = await aniki(
            tmp_path, "sessions", "export", "chat", "--format", fmt, "-o", str(export)
        )
        assert code == 0, err
        if fmt == "jsonl":
            last = json.loads(export.read_text().splitlines()[-1])
            assert set(last["context"]) == {
                "stored_messages",
                "sent_messages",
                "summarized_messages",
                "tokens",
                "prefix_kept",
            }
        code, _, err = await aniki(tmp_path, "sessions", "import", str(export), "--id", fmt)
        assert code == 0, err
        imported = SQLiteSession(fmt, path=store_path(tmp_path)).get_messages()
        assert [m.context for m in imported] == [None, None, *result.context_reports]
        assert imported[-1].usage == result.context_reports[0].usage

    code, _, err = await aniki(tmp_path, "sessions", "copy", "chat", "copied")
    assert code == 0, err
    copied = SQLiteSession("copied", path=store_path(tmp_path)).get_messages()
    assert copied[-1].context == result.context_reports[0]
    code, _, err = await aniki(tmp_path, "sessions", "fork", "chat", "forked")
    assert code == 0, err
    forked = SQLiteSession("forked", path=store_path(tmp_path)).get_messages()
    assert forked[-1].context == result.context_reports[0]


async def test_an_import_with_a_damaged_report_names_the_line(tmp_path: Path) -> None:
    await converse(tmp_path)
    code, out, _ = await aniki(tmp_path, "sessions", "export", "chat")
    assert code == 0
    lines = out.splitlines()
    damaged = json.loads(lines[-1])
    damaged["context"]["tokens"]["history"] = -5
    lines[-1] = json.dumps(damaged)
    export = tmp_path / "damaged.jsonl"
    export.write_text("\n".join(lines) + "\n")
    code, _, err = await aniki(tmp_path, "sessions", "import", str(export), "--id", "bad")
    assert code != 0
    assert f"line {len(lines)}" in err and "context.tokens.history" in err
    assert SQLiteSession("bad", path=store_path(tmp_path)).get_messages() == ()
