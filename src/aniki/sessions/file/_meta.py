"""Derived state beside a session file (``<name>.meta.json``), and ``clear()``, which drops it
with the history and the session's info (the meta file's contents: see :mod:`._record`).

The meta file is replaced atomically (a temporary file, then a rename) and tied to the
header's generation it was written in, so a ``clear()`` drops it even if the process died
half-way: a meta file written for another generation holds nothing. Every meta write holds
the session file's exclusive lock, so two writers never overwrite each other.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from . import _index, _timeline
from ._attachments import named_in, release
from ._file import SessionFile
from ._format import header
from ._io import Replaced, load_meta, read_meta, same_file
from ._record import Kept, load, write
from ._record import kept as kept_in

__all__ = ["clear", "counted", "kept", "update", "values"]


def values(file: SessionFile, fd: int | None) -> dict[str, Any]:
    """The derived-state values that hold for the session file ``fd`` (locked)."""
    if fd is None:
        return {}
    if not same_file(fd, file.path):
        raise Replaced  # the meta file would be matched against the wrong generation
    head = file.head(fd)
    return read_meta(file.meta_path, 0 if head is None else head[0], store=file.label)


def kept(file: SessionFile, fd: int | None) -> Kept:
    """All the meta file keeps for the session file ``fd`` (locked): values, info, count."""
    if fd is None:
        return Kept()
    if not same_file(fd, file.path):
        raise Replaced
    head = file.head(fd)
    return load(file.meta_path, 0 if head is None else head[0], store=file.label)


def counted(file: SessionFile, generation: int) -> tuple[int, int] | None:
    """The count the instance's cache holds, just checked for a write at ``generation``
    (``None`` when the file got its header just now: the cache is of no file then)."""
    cache = file.cache
    return (len(cache), cache.position) if cache.generation == generation else None


def update(file: SessionFile, key: str, condition: Callable[[Any], bool], value: Any) -> bool:
    """Set ``key`` to ``value`` (``None``: delete it) if ``condition(its value now)``, under
    the session file's exclusive lock; whether it did. The info is kept as it is."""

    def change(fd: int | None) -> bool:
        assert fd is not None
        generation, _ = file.checked_for_write(fd)
        held = load(file.meta_path, generation, store=file.label)
        stored = held.values
        if not condition(stored.get(key)):
            return False
        if value is None:
            stored.pop(key, None)
        else:
            stored[key] = value
        count = counted(file, generation)
        durable = file.durability == "full"
        write(file.meta_path, generation, Kept(stored, held.info, count), durable=durable)
        return True

    return file.using(change, create=True, exclusive=True)


def clear(file: SessionFile, fd: int | None) -> None:
    """Delete the history, its derived state and its info (the file locked exclusively)."""
    file.counted = 0
    if fd is None:
        read_meta(file.meta_path, 0, store=file.label)  # damaged: refuse
        file.meta_path.unlink(missing_ok=True)
        file.cache.reset()
        return
    generation, start = file.checked_for_write(fd)
    document = load_meta(file.meta_path, store=file.label)  # damaged: refuse
    info = kept_in(document, generation, store=file.label).info
    status = os.fstat(fd)
    named = named_in(fd, start, status.st_size)  # the attachments its records name
    if document is not None and document.get("generation") != generation:
        # Not written for this generation: stale, or written by an undo that died before
        # bumping the header, which would hold for the next one. It goes first.
        file.meta_path.unlink()
    # The generation goes first: a crash before the truncation then only looks as if the
    # clear never happened, to every reader.
    os.pwrite(fd, header(file.id, generation + 1), 0)
    os.ftruncate(fd, start)
    file.meta_path.unlink(missing_ok=True)
    file.sync(fd)
    file.cache.reset(generation + 1, start)
    # The info went with the meta file, the attachments with the records, and the session
    # is listed no more: see _index, _attachments and _timeline.
    _index.remove(_index.markers(file.directory, file.stem, info))
    _timeline.unmark(file.directory, file.stem, status.st_mtime_ns)
    release(file.directory, file.stem, named)
