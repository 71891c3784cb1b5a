"""The ``aniki`` command group."""

from __future__ import annotations

import click

from .. import __version__
from .chat import chat
from .demo import demo
from .inspect_cmd import inspect_command
from .retention_cmd import prune_command, rm_command
from .runs_cmd import runs
from .sessions_cmd import sessions

__all__ = ["cli"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="aniki")
def cli() -> None:
    """aniki: LLM agents with managed, persistent memory.

    \b
    Exit codes: 0 done, 1 an operation failed (store, provider, missing session),
    2 the command was misused (bad option or URL, no provider configured), 130 interrupted.
    """


cli.add_command(chat)
cli.add_command(demo)
cli.add_command(inspect_command)
cli.add_command(runs)
cli.add_command(sessions)
sessions.add_command(rm_command)
sessions.add_command(prune_command)
