"""What every ``aniki`` command shares: the console, the default store, error handling."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console

from ..errors import AnikiError, UserError

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "console",
    "default_store_url",
    "err_console",
    "fail",
    "handle_errors",
]

EXIT_FAILED = 1
"""An operation failed: a store or provider error, a session that does not exist."""
EXIT_USAGE = 2
"""The command was misused: a bad option, a bad store URL, no provider configured."""
EXIT_INTERRUPTED = 130
"""Stopped with Ctrl-C."""

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

F = TypeVar("F", bound=Callable[..., Any])


def default_store_url() -> str:
    """``$ANIKI_STORE``, else a SQLite file in the user's data directory."""
    configured = os.environ.get("ANIKI_STORE")
    if configured:
        return configured
    from platformdirs import user_data_dir

    directory = Path(os.environ.get("ANIKI_HOME") or user_data_dir("aniki", appauthor=False))
    directory.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{directory / 'aniki.db'}"


def fail(message: str, *, code: int = EXIT_FAILED, hint: str | None = None) -> None:
    """Print an error (and a hint) to stderr and exit with ``code``."""
    err_console.print(f"[bold red]error:[/] {message}")
    if hint:
        err_console.print(hint)
    raise SystemExit(code)


def handle_errors(command: F) -> F:
    """Turn expected failures into a readable message and an exit code, not a traceback."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except UserError as exc:
            fail(str(exc), code=EXIT_USAGE)
        except AnikiError as exc:
            fail(f"{exc} ({type(exc).__name__})")
        except KeyboardInterrupt:
            err_console.print("\ninterrupted")
            raise SystemExit(EXIT_INTERRUPTED) from None
        except click.ClickException:
            raise
        return None

    return wrapper  # type: ignore[return-value]
