"""What a file store's options must be: the session directory, the durability and the lock
wait, checked when a session or store is made, so that a bad one raises
:class:`~aniki.UserError` at once."""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import UserError
from .._args import Durability, check_durability, check_path, check_seconds
from .._local_file import DEFAULT_TIMEOUT

__all__ = ["DEFAULT_TIMEOUT", "WAITS_FOR", "checked_options", "session_directory"]

WAITS_FOR = "another process's lock on the session file"
"""What ``timeout=`` bounds, for its error messages."""


def checked_options(
    *, durability: Durability = "normal", timeout: float = DEFAULT_TIMEOUT
) -> tuple[Durability, float]:
    """The durability and the lock wait, checked."""
    durability = check_durability(durability)
    return durability, check_seconds(timeout, name="timeout", waits_for=WAITS_FOR, zero=True)


def session_directory(directory: str | os.PathLike[str]) -> Path:
    """The session directory, absolute; :class:`~aniki.UserError` when it can never be one."""
    text = check_path(directory, "the directory")
    if not text:
        raise UserError("the directory is empty; pass a path such as 'chats' ('.' for here)")
    path = Path(os.path.abspath(os.path.expanduser(text)))
    for place in (path, *path.parents):
        if os.path.exists(place):  # the nearest existing one must be a directory
            if not os.path.isdir(place):
                raise UserError(
                    f"{str(place)!r} is a file, not a directory; pass the directory that "
                    "holds (or will hold) the session files"
                )
            break
    return path
