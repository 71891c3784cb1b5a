"""The index of a file store's sessions by owner and by tag: one empty marker file per session
in a folder per owner and per tag, inside the session directory::

    chats/.index/owner/<the owner's name>/<the session's name>
    chats/.index/tag/<the tag's name>/<the session's name>

(each name made by :func:`~._format.file_stem`, so any owner or tag is a safe name, and the
session's name is its file's without ``.jsonl``). A listing by owner or tag reads one folder
rather than every session file.

The markers are kept in step by every write that changes a session's info (``set_info``,
``clear``, a fork, an import, a prune or delete), under that session's exclusive lock: new
markers are made before the meta file that gives the session its new owner or tags is
written, old ones removed after it. A crash in between leaves a marker too many, never one
too few; a listing that meets a marker whose session no longer has that owner or tag (or no
longer exists) leaves it out and removes it (:func:`drop`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path
from typing import Literal

from ._format import file_stem
from ._io import fsync_directory
from ._record import Info

__all__ = ["INDEX", "Kind", "add", "drop", "folder", "markers", "members", "remove"]

INDEX = ".index"
"""The index's folder in the session directory (a session file's name never starts with a
dot, so it is never taken for one)."""

Kind = Literal["owner", "tag"]
"""What a folder of the index is by."""

_TRIES = 5
"""Times a marker is made again when its folder was removed meanwhile (see :func:`remove`)."""


def folder(directory: Path, kind: Kind, name: str) -> Path:
    """The folder of the markers of ``kind`` (owner or tag) ``name``."""
    return directory / INDEX / kind / file_stem(name)


def markers(directory: Path, stem: str, info: Info | None) -> set[Path]:
    """The markers of the session whose file is ``<stem>.jsonl``, for its ``info``."""
    if info is None:
        return set()
    found = {folder(directory, "tag", tag) / stem for tag in info.tags}
    if info.owner is not None:
        found.add(folder(directory, "owner", info.owner) / stem)
    return found


def add(paths: Iterable[Path], *, durable: bool) -> None:
    """Make each marker (its folders too); with ``durable``, on disk before this returns."""
    for path in paths:
        _make(path)
        if durable:  # the marker's folder, and each folder made for it
            for place in path.parents[:4]:  # up to the session directory
                fsync_directory(place)


def _make(path: Path) -> None:
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    for attempt in range(_TRIES):
        try:
            os.close(os.open(path, flags, 0o666))
            return
        except FileNotFoundError:
            if attempt == _TRIES - 1:
                raise
            with suppress(FileNotFoundError, FileExistsError):  # removed meanwhile: again
                path.parent.mkdir(parents=True, exist_ok=True)


def remove(paths: Iterable[Path]) -> None:
    """Remove each marker, and its folders once empty, up to :data:`INDEX` (a marker made
    meanwhile makes them again: see :func:`add`)."""
    for path in paths:
        path.unlink(missing_ok=True)
        for place in path.parents[:3]:  # its owner's or tag's folder, "owner" or "tag", INDEX
            try:
                place.rmdir()
            except OSError:
                break  # other markers are in it (or it is gone already)


def members(directory: Path, kind: Kind, name: str) -> set[str]:
    """The names of the sessions marked in the folder of ``kind`` ``name``."""
    try:
        return set(os.listdir(folder(directory, kind, name)))
    except (FileNotFoundError, NotADirectoryError):
        return set()


def drop(marker: Path, session_file: Path) -> None:
    """Remove ``marker``, whose session file is gone. Its session may be made again at this
    moment by another process (a ``set_info`` makes the session file, then the marker):
    if its file is there after the marker is removed, the marker is made again (and
    removed by a later listing if that session has another owner)."""
    marker.unlink(missing_ok=True)
    if session_file.exists():
        add([marker], durable=False)
