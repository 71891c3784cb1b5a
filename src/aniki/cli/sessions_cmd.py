"""``aniki sessions``: list, show, export, import, remove and copy stored conversations."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from ..errors import ValidationError
from ..messages import Message
from ..tokens import count_tokens
from ._common import EXIT_FAILED, EXIT_USAGE, console, default_store_url, fail, handle_errors
from ._stores import list_sessions, read_messages, replace_messages

__all__ = ["sessions"]

EXPORT_FORMAT = "aniki.session/1"

store_option = click.option(
    "--store",
    "store",
    default=None,
    metavar="URL",
    help="The store: sqlite:///path.db, file:///dir, redis://..., postgresql://... "
    "(default: $ANIKI_STORE or the embedded SQLite store).",
)


@click.group()
def sessions() -> None:
    """Inspect and move stored conversations."""


@sessions.command("list")
@store_option
@handle_errors
def list_command(store: str | None) -> None:
    """List the sessions of a store: ids, message counts, last update, estimated tokens."""
    url = store or default_store_url()
    infos = list_sessions(url)
    table = Table(title=f"sessions in {url}", title_justify="left")
    for column in ("id", "messages", "last update", "~tokens"):
        table.add_column(column, justify="right" if column != "id" else "left")
    for info in infos:
        tokens = count_tokens(read_messages(url, info.id))
        updated = info.updated_at.strftime("%Y-%m-%d %H:%M:%S") if info.updated_at else "-"
        table.add_row(info.id, str(info.message_count), updated, f"{tokens:,}")
    if infos:
        console.print(table)
    else:
        console.print(f"no sessions in {url}")


@sessions.command("show")
@click.argument("session_id")
@store_option
@handle_errors
def show_command(session_id: str, store: str | None) -> None:
    """Print a session's messages."""
    url = store or default_store_url()
    messages = _existing(url, session_id)
    for message in messages:
        _print_message(message)


@sessions.command("export")
@click.argument("session_id")
@store_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "json", "markdown"]),
    default="jsonl",
    show_default=True,
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write to this file instead of standard output.",
)
@handle_errors
def export_command(session_id: str, store: str | None, fmt: str, output: Path | None) -> None:
    """Export a session as JSON lines, one JSON document, or Markdown."""
    url = store or default_store_url()
    text = render(session_id, _existing(url, session_id), fmt)
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
        console.print(f"exported {session_id!r} to {output}")


@sessions.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@store_option
@click.option(
    "--id",
    "session_id",
    default=None,
    help="The session id to import into (default: the id in a JSON export, else the file name).",
)
@click.option("--replace", is_flag=True, help="Replace the session if it already has messages.")
@handle_errors
def import_command(file: Path, store: str | None, session_id: str | None, replace: bool) -> None:
    """Import a session from a JSON-lines or JSON export."""
    url = store or default_store_url()
    found_id, messages = parse_export(file)
    target = session_id or found_id or file.stem
    if read_messages(url, target) and not replace:
        fail(
            f"session {target!r} already has messages in {url}",
            code=EXIT_USAGE,
            hint="pass --replace to overwrite it, or --id to import under another id",
        )
    replace_messages(url, target, messages)
    console.print(f"imported {len(messages)} messages into {target!r}")


@sessions.command("rm")
@click.argument("session_id")
@store_option
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@handle_errors
def rm_command(session_id: str, store: str | None, yes: bool) -> None:
    """Delete a session's history."""
    url = store or default_store_url()
    count = len(_existing(url, session_id))
    if not yes and sys.stdin.isatty():
        click.confirm(f"delete {count} messages of {session_id!r}?", abort=True)
    replace_messages(url, session_id, [])
    console.print(f"deleted {session_id!r} ({count} messages)")


@sessions.command("copy")
@click.argument("source")
@click.argument("destination")
@store_option
@click.option("--replace", is_flag=True, help="Replace the destination if it has messages.")
@handle_errors
def copy_command(source: str, destination: str, store: str | None, replace: bool) -> None:
    """Copy a conversation, within a store or between stores.

    SOURCE and DESTINATION are session ids in --store, or URL#ID to name another store,
    e.g. `aniki sessions copy chat-1 postgresql://127.0.0.1/app#chat-1`.
    """
    default = store or default_store_url()
    src_url, src_id = _reference(source, default)
    dst_url, dst_id = _reference(destination, default)
    messages = _existing(src_url, src_id)
    if read_messages(dst_url, dst_id) and not replace:
        fail(
            f"session {dst_id!r} already has messages in {dst_url}",
            code=EXIT_USAGE,
            hint="pass --replace to overwrite it",
        )
    replace_messages(dst_url, dst_id, messages)
    console.print(f"copied {len(messages)} messages to {dst_id!r} in {dst_url}")


def _reference(reference: str, default_url: str) -> tuple[str, str]:
    if "://" in reference or reference.startswith("memory:"):
        url, sep, session_id = reference.rpartition("#")
        if not sep or not session_id:
            fail(
                f"{reference!r} names a store but no session: write URL#SESSION_ID", code=EXIT_USAGE
            )
        return url, session_id
    return default_url, reference


def _existing(url: str, session_id: str) -> Sequence[Message]:
    messages = read_messages(url, session_id)
    if not messages:
        fail(
            f"no session {session_id!r} in {url}",
            code=EXIT_FAILED,
            hint="`aniki sessions list` shows the sessions of a store",
        )
    return messages


def _print_message(message: Message) -> None:
    colors = {"system": "magenta", "user": "cyan", "assistant": "green", "tool": "yellow"}
    label = f"[bold {colors[message.role]}]{message.role}[/]"
    if message.tool_call_id:
        label += f" [dim](answers {message.tool_call_id})[/]"
    console.print(label)
    if message.content:
        console.print(message.content, markup=False)
    for call in message.tool_calls:
        console.print(f"  → {call.name}({call.arguments}) [dim]{call.id}[/]", markup=True)
    console.print()


def render(session_id: str, messages: Sequence[Message], fmt: str) -> str:
    """A session as ``jsonl``, ``json`` or ``markdown`` text."""
    if fmt == "jsonl":
        return "".join(json.dumps(m.to_dict(), ensure_ascii=False) + "\n" for m in messages)
    if fmt == "json":
        document = {
            "format": EXPORT_FORMAT,
            "id": session_id,
            "exported_at": datetime.now(timezone.utc).isoformat(),
            "messages": [m.to_dict() for m in messages],
        }
        return json.dumps(document, ensure_ascii=False, indent=2) + "\n"
    parts = [f"# Session {session_id}\n"]
    for message in messages:
        parts.append(
            f"## {message.role}"
            + (f" (answers {message.tool_call_id})" if message.tool_call_id else "")
            + "\n"
        )
        if message.content:
            parts.append(message.content + "\n")
        for call in message.tool_calls:
            parts.append(f"- tool call `{call.name}` `{call.id}`: `{call.arguments}`\n")
    return "\n".join(parts)


def parse_export(file: Path) -> tuple[str | None, list[Message]]:
    """Read a ``json`` or ``jsonl`` export: ``(session id if recorded, messages)``."""
    text = file.read_text(encoding="utf-8")
    try:
        stripped = text.lstrip()
        if stripped.startswith("{") and '"messages"' in stripped[:4096]:
            document: Any = json.loads(text)
            if isinstance(document, dict) and isinstance(document.get("messages"), list):
                return document.get("id"), [Message.from_dict(m) for m in document["messages"]]
        lines = [line for line in text.splitlines() if line.strip()]
        return None, [Message.from_dict(json.loads(line)) for line in lines]
    except json.JSONDecodeError as exc:
        fail(f"{file} is not a JSON or JSON-lines export: {exc}", code=EXIT_USAGE)
    except ValidationError as exc:
        fail(f"{file} holds an invalid message: {exc}", code=EXIT_USAGE)
    raise AssertionError("unreachable")
