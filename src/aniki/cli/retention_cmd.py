"""``aniki sessions rm`` and ``aniki sessions prune``: delete one conversation, every
conversation of an owner, or every conversation older than an age. Each asks first (``--yes``
skips the question; without a terminal to ask on, it refuses)."""

from __future__ import annotations

import re
import sys
from datetime import datetime, timedelta, timezone

import click

from ..sessions.store import SessionStore, open_store
from ._common import EXIT_USAGE, console, default_store_url, fail, handle_errors, shown_url, text
from ._stores import check_store_url, replace_messages
from .sessions_cmd import existing_messages, session_reference, store_option

__all__ = ["parse_age", "prune_command", "rm_command"]

_AGE = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_age(value: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``2w``, ``45s`` as a :class:`~datetime.timedelta`."""
    found = _AGE.match(value)
    if found is None or int(found.group(1)) == 0:
        raise click.BadParameter(
            f"{value!r} is not an age: write a whole number and a unit, e.g. 30d, 12h, 90m, "
            "2w or 45s"
        )
    return timedelta(**{_UNITS[found.group(2)]: int(found.group(1))})


def _confirm(question: str, refusal: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        fail(refusal, code=EXIT_USAGE, hint="pass --yes to delete from a script (no terminal)")
    click.confirm(question, abort=True)


@click.command("rm")
@click.argument("session_id", required=False)
@store_option
@click.option(
    "--owner",
    default=None,
    metavar="OWNER",
    help="Delete every conversation of this owner (set by session.set_info(owner=...)).",
)
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@handle_errors
def rm_command(session_id: str | None, store: str | None, owner: str | None, yes: bool) -> None:
    """Delete a session, or with --owner every session of that owner, with everything kept
    for them (history, info, summaries, held approvals, runs, attachments).

    SESSION_ID is an id in --store, or URL#ID to name another store.
    """
    if (session_id is None) == (owner is None):
        fail("give a SESSION_ID or --owner OWNER (one of them)", code=EXIT_USAGE)
        return
    if owner is not None:
        _remove_owner(check_store_url(store or default_store_url()), owner, yes)
        return
    assert session_id is not None
    url, session_id = session_reference(session_id, store or default_store_url())
    count = len(existing_messages(url, session_id))
    _confirm(
        f"delete {count} messages of {session_id!r}?",
        f"not deleting the {count} messages of {session_id!r} without a confirmation",
        yes,
    )
    replace_messages(url, session_id, [])
    console.print(f"deleted {text(repr(session_id))} ({count} messages)")


def _remove_owner(url: str, owner: str, yes: bool) -> None:
    with open_store(url) as store:
        count = len(store.list_sessions(owner=owner))
        if not count:
            console.print(f"no sessions of owner {text(repr(owner))} in {shown_url(url)}")
            return
        _confirm(
            f"delete the {count} sessions of owner {owner!r}?",
            f"not deleting the {count} sessions of owner {owner!r} without a confirmation",
            yes,
        )
        removed = store.delete_sessions(owner=owner)
    console.print(f"deleted {removed} sessions of owner {text(repr(owner))}")


@click.command("prune")
@click.option(
    "--older-than",
    "older_than",
    required=True,
    metavar="AGE",
    help="Delete sessions last written longer ago than this: 30d, 12h, 90m, 2w, 45s.",
)
@click.option("--owner", default=None, metavar="OWNER", help="Only sessions of this owner.")
@store_option
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@handle_errors
def prune_command(older_than: str, owner: str | None, store: str | None, yes: bool) -> None:
    """Delete every session (of --owner) not written for longer than --older-than, whole,
    in small batches (a large prune never holds the store long)."""
    age = parse_age(older_than)
    url = check_store_url(store or default_store_url())
    with open_store(url) as opened:
        count = _older(opened, datetime.now(timezone.utc) - age, owner)
        if not count:
            console.print(f"no sessions older than {older_than} in {shown_url(url)}")
            return
        _confirm(
            f"delete the {count} sessions not written for {older_than}?",
            f"not deleting {count} sessions without a confirmation",
            yes,
        )
        removed = opened.prune(older_than=age, owner=owner)
    console.print(f"deleted {removed} sessions not written for {text(older_than)}")


def _older(store: SessionStore, cutoff: datetime, owner: str | None) -> int:
    """How many sessions (of ``owner``) were last written before ``cutoff`` (what the
    question names; the prune itself counts what it removes)."""
    count, cursor = 0, None
    while True:
        page = store.list_sessions(owner=owner, limit=500, cursor=cursor)
        count += sum(1 for info in page if info.updated_at and info.updated_at < cutoff)
        if len(page) < 500:
            return count
        cursor = page[-1]
