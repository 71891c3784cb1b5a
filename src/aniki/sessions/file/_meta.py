"""Derived state beside a session file (``<name>.meta.json``), and ``clear()``, which drops it
with the history.

The meta file is replaced atomically (a temporary file, then a rename) and tied to the
header's generation it was written in, so a ``clear()`` drops it even if the process died
half-way: a meta file written for another generation holds nothing. Every meta write holds
the session file's exclusive lock, so two writers never overwrite each other.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ._file import SessionFile
from ._format import header
from ._io import Replaced, load_meta, read_meta, same_file, write_meta

__all__ = ["clear", "update", "values"]


def values(file: SessionFile, fd: int | None) -> dict[str, Any]:
    """The derived-state values that hold for the session file ``fd`` (locked)."""
    if fd is None:
        return {}
    if not same_file(fd, file.path):
        raise Replaced  # the meta file would be matched against the wrong generation
    head = file.head(fd)
    return read_meta(file.meta_path, 0 if head is None else head[0], store=file.label)


def update(file: SessionFile, key: str, condition: Callable[[Any], bool], value: Any) -> bool:
    """Set ``key`` to ``value`` (``None``: delete it) if ``condition(its value now)``, under
    the session file's exclusive lock; whether it did."""

    def change(fd: int | None) -> bool:
        assert fd is not None
        generation, _ = file.checked_for_write(fd)
        stored = read_meta(file.meta_path, generation, store=file.label)
        if not condition(stored.get(key)):
            return False
        if value is None:
            stored.pop(key, None)
        else:
            stored[key] = value
        write_meta(file.meta_path, generation, stored, durable=file.durability == "full")
        return True

    return file.using(change, create=True, exclusive=True)


def clear(file: SessionFile, fd: int | None) -> None:
    """Delete the history and its derived state (the file locked exclusively)."""
    if fd is None:
        read_meta(file.meta_path, 0, store=file.label)  # damaged: refuse
        file.meta_path.unlink(missing_ok=True)
        file.cache.reset()
        return
    generation, start = file.checked_for_write(fd)
    document = load_meta(file.meta_path, store=file.label)  # damaged: refuse
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
