"""The errors of a damaged session file, and the one registry it is listed in
(:data:`aniki.sessions._local_file.DAMAGED`): no write is made to a file found damaged."""

from __future__ import annotations

from pathlib import Path

from ...errors import CorruptStoreError
from .._local_file import DAMAGED, identity, reason_of
from ._io import Replaced, same_file

__all__ = ["damaged", "refused"]

_DAMAGE_HINT = (
    "No write is made to a damaged file: repair or delete that line, restore the file from a "
    "backup, or move the file aside (the session then starts empty)"
)


def damaged(fd: int, where: str, exc: CorruptStoreError, *, store: str) -> CorruptStoreError:
    """The error for a record of the session file ``fd`` that does not decode at ``where``
    (``exc`` says why); the file is listed as damaged."""
    reason = reason_of(exc)
    DAMAGED.remember(f"{where}: {reason}", fd=fd)
    return CorruptStoreError(
        f"the session file is damaged: {where} cannot be read ({reason}). {_DAMAGE_HINT}",
        store=store,
    )


def refused(fd: int, path: Path, *, store: str) -> Exception:
    """Why a write to the session file ``fd``, listed as damaged, is refused: it was; or
    :class:`~._io.Replaced` when ``path`` names another file now (moved aside: the file now
    there is used)."""
    if not same_file(fd, path):
        return Replaced()
    found = DAMAGED.found(identity(fd)) or ""
    return CorruptStoreError(
        f"the session file was found damaged earlier ({found}). {_DAMAGE_HINT}",
        store=store,
    )
