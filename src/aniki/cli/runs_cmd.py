"""``aniki runs``: list the runs a store's run journals remember, and finish the runs a
crash cut short."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from .._run.journal import RunInfo, runs_of
from .._secrets import hide_password
from ..agent import Agent
from ..errors import StoreError
from ..sessions._capabilities import capabilities_of
from ._common import (
    EXIT_FAILED,
    EXIT_USAGE,
    console,
    default_store_url,
    fail,
    handle_errors,
    plain,
    text,
    warn,
)
from ._stores import absent, list_sessions, open_store_session, split_reference
from .sessions_cmd import store_option

__all__ = ["runs"]


@click.group()
def runs() -> None:
    """List the runs of a store's sessions, and finish the runs a crash cut short."""


@runs.command("list")
@click.argument("session_id", required=False)
@store_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead.")
@handle_errors
def list_command(session_id: str | None, store: str | None, as_json: bool) -> None:
    """List the runs the journal of SESSION_ID (default: of every session of the store)
    remembers: id, state, agent, last change, and the tool calls of turns not yet stored.

    \b
    States: running (its process works on it), cut (its process died: `aniki runs recover`
    finishes it), held (waiting for approval), done.
    Calls: done (its result is recorded), claimed (it started; it may have run),
    waiting (not started).

    Sessions whose journal cannot be read are left out with a warning each, and the
    command then exits with 1.

    SESSION_ID is an id in --store, or URL#ID to name another store.
    """
    problems: list[StoreError] = []
    url, ids = _targets(session_id, store, problems)
    found: list[tuple[str, RunInfo]] = []
    for sid in ids:
        try:
            with _opened(url, sid) as session:
                found.extend((sid, info) for info in asyncio.run(runs_of(session)))
        except StoreError as unreadable:  # one session: the others are still listed
            problems.append(unreadable)
    if as_json:
        sys.stdout.write(json.dumps([_as_dict(sid, info) for sid, info in found], indent=2))
        sys.stdout.write("\n")
    elif found:
        _print_table(url, found)
    else:
        where = f"session {session_id!r}" if session_id else "any session"
        console.print(f"no runs in {text(where)} of {text(hide_password(url))}")
    for problem in problems:
        warn(f"left out of the list: {problem}")
    if problems:
        raise SystemExit(EXIT_FAILED)


def _print_table(url: str, found: list[tuple[str, RunInfo]]) -> None:
    table = Table(title=Text(f"runs in {hide_password(url)}"), title_justify="left")
    for column in ("run", "session", "state", "agent", "last change (UTC)", "open calls"):
        table.add_column(column, overflow="fold")
    for sid, info in found:
        calls = "\n".join(f"{call_id} {name} {state}" for call_id, name, state in info.calls)
        table.add_row(
            *(Text(plain(value, lines=False)) for value in (info.run_id, sid, info.state)),
            Text(plain(info.agent, lines=False)),
            _when(info.updated),
            Text(plain(calls) or "-"),
        )
    console.print(table)


@runs.command("recover")
@click.argument("session_id", required=False)
@store_option
@click.option(
    "--agent",
    "agent_ref",
    required=True,
    metavar="MODULE:ATTR",
    help="The aniki.Agent that ran them, e.g. myapp.agents:support "
    "(the current directory is searched first).",
)
@handle_errors
def recover_command(session_id: str | None, store: str | None, agent_ref: str) -> None:
    """Finish the runs of SESSION_ID (default: of every session of the store) whose process
    died before they ended, with the agent that ran them, and print each one's reply.

    A tool call with a recorded result is not run again; one that started but has no
    result runs again only if its tool is idempotent, and is otherwise answered with a
    message telling the model its outcome is unknown. Runs held for approval are left as
    they are.

    SESSION_ID is an id in --store, or URL#ID to name another store.
    """
    from ..runner import Runner

    agent = load_agent(agent_ref)
    url, ids = _targets(session_id, store)
    finished = 0
    for sid in ids:
        with _opened(url, sid) as session:
            for result in Runner().recover_sync(agent, session=session):
                finished += 1
                console.print(f"[bold]{text(result.run_id)}[/] [dim]{text(repr(sid))}[/]")
                console.print(plain(result.content), markup=False)
    if not finished:
        console.print("no cut runs")


def load_agent(reference: str) -> Agent[Any]:
    """The :class:`~aniki.Agent` that ``MODULE:ATTR`` names (``ATTR`` may be dotted); exit 2
    with one error line when it cannot be imported or is not an Agent."""
    module_name, sep, attr = reference.partition(":")
    if not sep or not module_name or not attr:
        fail(
            f"--agent {reference!r}: write MODULE:ATTR, e.g. myapp.agents:support", code=EXIT_USAGE
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found: Any = importlib.import_module(module_name)
    except Exception as exc:  # the user's module failed to import: say why, in one line
        fail(f"--agent {reference!r}: cannot import {module_name!r}: {exc}", code=EXIT_USAGE)
    for part in attr.split("."):
        if not hasattr(found, part):
            fail(f"--agent {reference!r}: {module_name!r} has no {attr!r}", code=EXIT_USAGE)
        found = getattr(found, part)
    if not isinstance(found, Agent):
        fail(
            f"--agent {reference!r} is a {type(found).__name__}, not an aniki.Agent",
            code=EXIT_USAGE,
        )
    return found  # type: ignore[no-any-return]


def _targets(
    session_id: str | None, store: str | None, problems: list[StoreError] | None = None
) -> tuple[str, list[str]]:
    """The store URL and the ids of the sessions to look at."""
    default = store or default_store_url()
    if session_id is None:
        return default, [info.id for info in list_sessions(default, problems=problems)]
    found = split_reference(session_id, default)
    if found is None:
        fail(
            f"{hide_password(session_id)!r} names a store but no session: write URL#SESSION_ID, "
            "or pass the store as --store URL and the session id alone",
            code=EXIT_USAGE,
        )
        raise AssertionError("unreachable")
    url, sid = found
    return url, ([] if absent(url) else [sid])


@contextmanager
def _opened(url: str, session_id: str) -> Iterator[Any]:
    session = open_store_session(url, session_id)
    try:
        yield session
    finally:
        close = capabilities_of(session).close
        if close is not None:
            close()


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds")


def _when(seconds: float) -> str:
    return _iso(seconds) if seconds else "-"


def _as_dict(session_id: str, info: RunInfo) -> dict[str, Any]:
    return {
        "run_id": info.run_id,
        "session": session_id,
        "state": info.state,
        "agent": info.agent,
        "updated": _iso(info.updated) if info.updated else None,
        "calls": [
            {"id": call_id, "tool": name, "state": state} for call_id, name, state in info.calls
        ],
    }
