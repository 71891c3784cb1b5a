"""``aniki sessions``: list, show, export, import, copy, fork and undo stored conversations
(``rm`` and ``prune`` are in ``retention_cmd.py``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import click
from rich.table import Table
from rich.text import Text

from .._secrets import hide_password
from ..errors import StoreError
from ..messages import Message
from ..sessions._blobs import AttachmentRef
from ..sessions._capabilities import capabilities_of
from ..sessions._pages import REACH, NamedPage, read_named_page
from ..tokens import count_tokens
from ._common import (
    EXIT_FAILED,
    EXIT_USAGE,
    console,
    default_store_url,
    fail,
    handle_errors,
    plain,
    shown_url,
    text,
    warn,
)
from ._imports import parse_export
from ._stores import (
    absent,
    fork_session,
    list_filtered,
    list_sessions,
    open_store_session,
    read_messages,
    replace_messages,
    split_reference,
    undo_session,
)

__all__ = ["existing_messages", "session_reference", "sessions", "store_option"]

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
@click.option("--owner", default=None, metavar="OWNER", help="Only sessions of this owner.")
@click.option("--tag", default=None, metavar="TAG", help="Only sessions with this tag.")
@click.option(
    "--limit", default=None, type=click.IntRange(min=1), help="At most this many, newest first."
)
@handle_errors
def list_command(store: str | None, owner: str | None, tag: str | None, limit: int | None) -> None:
    """List the sessions of a store, newest first: ids, titles, owners, message counts, last
    update, estimated tokens.

    Sessions that cannot be read (a damaged or foreign file of a directory store, a
    damaged record) are left out with a warning each, and the command then exits with 1.
    """
    url = store or default_store_url()
    problems: list[StoreError] = []
    if owner is None and tag is None and limit is None:
        infos = list_sessions(url, problems=problems)
    else:
        infos = list_filtered(url, owner=owner, tag=tag, limit=limit)
    table = Table(title=Text(f"sessions in {hide_password(url)}"), title_justify="left")
    for column in ("id", "title", "owner", "messages", "last update", "~tokens"):
        table.add_column(column, justify="right" if column in ("messages", "~tokens") else "left")
    for info in infos:
        try:
            tokens = count_tokens(read_messages(url, info.id))
        except StoreError as unreadable:  # one session: the others are still listed
            problems.append(unreadable)
            continue
        updated = info.updated_at.strftime("%Y-%m-%d %H:%M:%S") if info.updated_at else "-"
        table.add_row(
            Text(plain(info.id, lines=False)),
            Text(plain(info.title or "", lines=False)),
            Text(plain(info.owner or "", lines=False)),
            str(info.message_count),
            updated,
            f"{tokens:,}",
        )
    if infos:
        console.print(table)
    else:
        console.print(f"no sessions in {shown_url(url)}")
    for problem in problems:
        warn(f"left out of the list: {problem}")
    if problems:
        raise SystemExit(EXIT_FAILED)


@sessions.command("show")
@click.argument("session_id")
@store_option
@click.option(
    "--context",
    "with_context",
    is_flag=True,
    help="After each assistant message, what its model call was sent: messages, estimated "
    "tokens, whether the prompt cache could serve it, and what the provider billed.",
)
@handle_errors
def show_command(session_id: str, store: str | None, with_context: bool) -> None:
    """Print a session's messages.

    Attachments are named (media type, size, hash, name or URL), not read.

    SESSION_ID is an id in --store, or URL#ID to name another store.
    """
    url, session_id = session_reference(session_id, store or default_store_url())
    page = _named_history(url, session_id)
    for message, parts in zip(page.messages, page.attachments, strict=True):
        _print_message(message, parts, with_context=with_context)


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
    url, session_id = session_reference(session_id, store or default_store_url())
    rendered = render(session_id, existing_messages(url, session_id), fmt)
    if output is None:
        sys.stdout.write(rendered)
        return
    try:
        output.write_text(rendered, encoding="utf-8")
    except OSError as exc:
        fail(
            f"cannot write {output}: {exc.strerror or exc}",
            hint="check that the directory exists and that you may write to it",
        )
    console.print(f"exported {text(repr(session_id))} to {text(output)}")


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
    """Import a session from a JSON-lines or JSON export.

    The whole file is checked before anything is written: every message valid, every tool
    result right after the assistant message whose call it answers, every call answered.
    A file without messages is refused.
    """
    url = store or default_store_url()
    found_id, messages = parse_export(file)
    target = session_id or found_id or file.stem
    if read_messages(url, target) and not replace:
        fail(
            f"session {target!r} already has messages in {hide_password(url)}",
            code=EXIT_USAGE,
            hint="pass --replace to overwrite it, or --id to import under another id",
        )
    replace_messages(url, target, messages)
    console.print(f"imported {len(messages)} messages into {text(repr(target))}")


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
    src_url, src_id = session_reference(source, default)
    dst_url, dst_id = session_reference(destination, default)
    messages = existing_messages(src_url, src_id)
    if read_messages(dst_url, dst_id) and not replace:
        fail(
            f"session {dst_id!r} already has messages in {hide_password(dst_url)}",
            code=EXIT_USAGE,
            hint="pass --replace to overwrite it",
        )
    replace_messages(dst_url, dst_id, messages)
    console.print(
        f"copied {len(messages)} messages to {text(repr(dst_id))} in {shown_url(dst_url)}"
    )


@sessions.command("fork")
@click.argument("session_id")
@click.argument("new_id")
@store_option
@click.option(
    "--upto",
    default=None,
    metavar="MESSAGE_ID",
    help="Copy the history through this message only (`aniki sessions show` prints the ids).",
)
@handle_errors
def fork_command(session_id: str, new_id: str, store: str | None, upto: str | None) -> None:
    """Fork a session: NEW_ID gets a copy of its history (ids and times kept) and its stored
    summary or window, in one step; the original is unchanged.

    SESSION_ID is an id in --store, or URL#ID to name another store; NEW_ID is in the same
    store and must hold no messages.
    """
    url, session_id = session_reference(session_id, store or default_store_url())
    existing_messages(url, session_id)
    copied = fork_session(url, session_id, new_id, upto)
    console.print(f"forked {text(repr(session_id))} into {text(repr(new_id))} ({copied} messages)")


@sessions.command("undo")
@click.argument("session_id")
@store_option
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@handle_errors
def undo_command(session_id: str, store: str | None, yes: bool) -> None:
    """Remove a session's last turn: its last user message and everything after it, in one
    step, and print what was removed."""
    url, session_id = session_reference(session_id, store or default_store_url())
    messages = existing_messages(url, session_id)
    start = max((n for n, m in enumerate(messages) if m.role == "user"), default=None)
    if start is None:
        fail(f"session {session_id!r} has no user message: there is no turn to undo")
        return
    if not yes:
        if not sys.stdin.isatty():
            fail(
                f"not removing the last {len(messages) - start} messages of {session_id!r} "
                "without a confirmation",
                code=EXIT_USAGE,
                hint="pass --yes to undo from a script (no terminal to ask on)",
            )
        click.confirm(
            f"remove the last {len(messages) - start} messages of {session_id!r}?", abort=True
        )
    removed = undo_session(url, session_id)
    for message in removed:
        _print_message(message)
    console.print(f"removed {len(removed)} messages from {text(repr(session_id))}")


def session_reference(reference: str, default_url: str) -> tuple[str, str]:
    """``(store URL, session id)`` of a command's ``ID`` or ``URL#ID`` argument; exits with
    a usage error for a URL without ``#ID``."""
    found = split_reference(reference, default_url)
    if found is None:
        fail(
            f"{hide_password(reference)!r} names a store but no session: write URL#SESSION_ID, "
            "or pass the store as --store URL and the session id alone",
            code=EXIT_USAGE,
        )
        raise AssertionError("unreachable")
    return found


def existing_messages(url: str, session_id: str) -> Sequence[Message]:
    """The history of ``session_id``; exits with an error when it holds none."""
    messages = read_messages(url, session_id)
    if not messages:
        _no_session(url, session_id)
    return messages


def _named_history(url: str, session_id: str) -> NamedPage:
    """The whole history of ``session_id`` in one read, its attachments named but not read
    (a history of images costs what its text costs); exits with an error when it holds
    none."""
    if absent(url):
        _no_session(url, session_id)
    session = open_store_session(url, session_id)
    try:
        page = read_named_page(session, 0, REACH)
    finally:
        close = capabilities_of(session).close
        if close is not None:
            close()
    if not page.messages:
        _no_session(url, session_id)
    return page


def _no_session(url: str, session_id: str) -> None:
    fail(
        f"no session {session_id!r} in {hide_password(url)}",
        code=EXIT_FAILED,
        hint="`aniki sessions list` shows the sessions of a store",
    )


def _print_message(
    message: Message,
    attachments: Sequence[AttachmentRef] | None = None,
    *,
    with_context: bool = False,
) -> None:
    """Print ``message``; ``attachments`` names its attachments when they were read apart
    (else they are named from the message's own)."""
    if attachments is None:
        attachments = [AttachmentRef.of(part) for part in message.attachments]
    colors = {"system": "magenta", "user": "cyan", "assistant": "green", "tool": "yellow"}
    label = f"[bold {colors[message.role]}]{message.role}[/]"
    if message.tool_call_id:
        label += f" [dim](answers {text(message.tool_call_id)})[/]"
    if message.id is not None:
        label += f" [dim]{text(plain(message.id, lines=False))}"
        if message.created_at is not None:
            label += f" {message.created_at.strftime('%Y-%m-%d %H:%M:%S')}"
        if message.model is not None:
            label += f" {text(message.model)}"
        label += "[/]"
    console.print(label)
    if message.content:
        console.print(plain(message.content), markup=False)
    for call in message.tool_calls:
        console.print(f"  → {text(call.name)}({text(call.arguments)}) [dim]{text(call.id)}[/]")
    for ref in attachments:
        console.print(f"  [dim]📎 {text(ref.line())}[/]")
    if message.reasoning:
        console.print(f"  [dim]({len(message.reasoning)} reasoning block(s) kept)[/]")
    if with_context and message.context is not None:
        sent = message.context.describe()
        if message.model is not None:
            sent = f"{message.model}: {sent}"
        console.print(f"  [dim]context: {text(plain(sent, lines=False))}[/]")
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
        for part in message.attachments:
            parts.append(f"- attachment: {AttachmentRef.of(part).line()}\n")
    return "\n".join(parts)
