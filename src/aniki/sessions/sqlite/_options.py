"""What a SQLite store's options must be: the database path, the durability and the lock
wait, checked when a session or store is made, so that a bad one raises
:class:`~aniki.UserError` at once."""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import UserError
from .._args import Durability, check_durability, check_path, check_seconds
from .._local_file import DEFAULT_TIMEOUT

__all__ = ["DEFAULT_TIMEOUT", "MAX_TIMEOUT", "absolute_path", "check_timeout", "checked_options"]


def absolute_path(path: str | os.PathLike[str]) -> Path:
    """The database path, absolute; :class:`~aniki.UserError` when it can never be a file."""
    text = check_path(path, "the database path")
    if not text:
        raise UserError("the database path is empty; pass a file path such as 'aniki.db'")
    absolute = Path(os.path.abspath(os.path.expanduser(text)))
    if os.path.isdir(absolute):
        raise UserError(
            f"the database path {str(absolute)!r} is a directory; pass the path of a database "
            f"file, such as {str(absolute / 'aniki.db')!r}"
        )
    _check_ancestors(absolute)
    return absolute


def _check_ancestors(path: Path) -> None:
    # The nearest existing ancestor must be a directory: below a file nothing can be created.
    for parent in path.parents:
        if os.path.exists(parent):
            if not os.path.isdir(parent):
                raise UserError(
                    f"{str(parent)!r} is a file, not a directory, so {str(path)!r} cannot be "
                    "created; pick a path inside a directory"
                )
            return


MAX_TIMEOUT = 2_147_483.0
"""SQLite waits in milliseconds held in a 32-bit int: a longer timeout would overflow into
no wait at all (measured: ``timeout=1e10`` gave up at once on a locked file)."""


def check_timeout(timeout: object) -> float:
    """``timeout`` as seconds; :class:`~aniki.UserError` unless it is a finite number from 0
    to :data:`MAX_TIMEOUT`."""
    return check_seconds(
        timeout, name="timeout", waits_for="another process's write", most=MAX_TIMEOUT, zero=True
    )


def checked_options(
    *, durability: Durability = "normal", timeout: float = DEFAULT_TIMEOUT
) -> tuple[Durability, float]:
    """The durability and the lock wait, checked."""
    return check_durability(durability), check_timeout(timeout)
