"""What every ``aniki`` command shares: the console, the default store, error handling.

Data (ids, messages, URLs, error messages quoting them) is printed as text, never as rich
markup: :func:`text` escapes it, and :func:`fail` escapes what it is given.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape

from .._secrets import hide_password
from ..errors import AnikiError, UserError

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "cli_message",
    "console",
    "default_store_url",
    "err_console",
    "fail",
    "handle_errors",
    "plain",
    "shown_url",
    "text",
    "warn",
]

EXIT_FAILED = 1
"""An operation failed: a store or provider error, a session that does not exist."""
EXIT_USAGE = 2
"""The command was misused: a bad option, a bad store URL, no provider configured."""
EXIT_INTERRUPTED = 130
"""Stopped with Ctrl-C."""

# emoji=False: ":smile:" in a message is text, not an emoji code.
console = Console(highlight=False, emoji=False)
err_console = Console(stderr=True, highlight=False, emoji=False, soft_wrap=True)

F = TypeVar("F", bound=Callable[..., Any])


# C0 and C1 control characters (terminal escape sequences start with one) and the bidi
# controls that reorder what a terminal shows; tab and newline are kept where lines are.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROL_OR_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def plain(value: object, *, lines: bool = True) -> str:
    """``value`` as text a terminal shows as it is: control characters written as escapes
    (``\\x1b``, ``\\u202e``), so stored data can neither move the cursor, recolour, retitle
    the terminal nor reorder what it shows. With ``lines=False`` tab and newline are
    escaped too (for one-line values such as ids)."""
    pattern = _CONTROL if lines else _CONTROL_OR_LINE
    return pattern.sub(lambda found: found.group().encode("unicode_escape").decode(), str(value))


def text(value: object) -> str:
    """``value`` as text that rich prints as it is: ``[/]`` stays ``[/]``, control
    characters are shown as escapes (see :func:`plain`)."""
    return escape(plain(value))


def shown_url(url: str) -> str:
    """A store URL as printed: any password replaced by ``***``, markup escaped."""
    return text(hide_password(url))


def default_store_url() -> str:
    """``$ANIKI_STORE``, else a SQLite file in the user's data directory."""
    configured = os.environ.get("ANIKI_STORE")
    if configured:
        from ._stores import check_store_url

        try:
            return check_store_url(configured)
        except UserError as exc:
            raise UserError(f"$ANIKI_STORE: {exc}") from None
    return f"sqlite:///{data_dir() / 'aniki.db'}"


def data_dir() -> Path:
    """``$ANIKI_HOME``, else the user's data directory for aniki (created if missing)."""
    from platformdirs import user_data_dir

    directory = Path(os.environ.get("ANIKI_HOME") or user_data_dir("aniki", appauthor=False))
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def fail(message: str, *, code: int = EXIT_FAILED, hint: str | None = None) -> None:
    """Print an error (and a hint) to stderr and exit with ``code``; both are plain text."""
    err_console.print(f"[bold red]error:[/] {text(message)}")
    if hint:
        err_console.print(plain(hint), markup=False)
    raise SystemExit(code)


def warn(message: str) -> None:
    """Print one plain-text warning line to stderr."""
    err_console.print(f"[yellow]warning:[/] {text(message)}")


# The SDK's errors name Python arguments; the command has options (or nothing) instead.
_CLI_WORDS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        (r"check base_url=", "check --base-url"),
        (r"try base_url=(['\"])(.*?)\1", r"try --base-url \2"),
        (r" or pass api_key=\.\.\.", ""),
        (r'e\.g\. api_key="none"', "e.g. OPENAI_API_KEY=none"),
        (r" \(or the api_key= you passed\)", ""),
        (r", raise max_retries=,", ","),
        (r"raise timeout= or ", ""),
        (r"raise timeout=", "add ?timeout=SECONDS to the sqlite:/// store URL"),
        (r"or wait longer with timeout= \(now ([^)]*)\)", r"or retry (aniki waited \1)"),
        (
            r"keep less history \(TokenBudgetSession, SummarizingSession\)",
            "send less history (--max-tokens N or --window N)",
        ),
    )
)


def cli_message(exc: BaseException) -> str:
    """The message of ``exc`` with its hints in the command's terms (options, not keywords)."""
    message = str(exc)
    for pattern, replacement in _CLI_WORDS:
        message = pattern.sub(replacement, message)
    return message


def handle_errors(command: F) -> F:
    """Turn expected failures into a readable message and an exit code, not a traceback."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except UserError as exc:
            fail(cli_message(exc), code=EXIT_USAGE)
        except AnikiError as exc:
            fail(f"{cli_message(exc)} ({type(exc).__name__})")
        except KeyboardInterrupt:
            err_console.print("\ninterrupted")
            raise SystemExit(EXIT_INTERRUPTED) from None
        except click.ClickException:
            raise
        except OSError as exc:  # a file or directory the command was pointed at
            where = f"{exc.filename}: " if exc.filename is not None else ""
            fail(f"{where}{exc.strerror or exc}")
        return None

    return wrapper  # type: ignore[return-value]
