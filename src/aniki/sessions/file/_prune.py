"""Prune and delete in a file store (``FileStore.prune`` / ``delete_sessions``): whole
sessions removed, each under its own exclusive lock.

The candidates are found as a listing finds them (:mod:`~._listing`: the owner's folder of
the index, or the session directory), oldest first, at most
:data:`~aniki.sessions._catalog.PRUNE_BATCH` per batch, found again before each batch.
Each is checked again under its lock (still last written before the cut-off, still of that
owner), then removed:

1. one byte that is not a newline is added to its file, so that every instance holding
   the file open (in this process or another) sees a torn line, looks at the path, finds
   another file (or none) there and leaves this one, as after an edit that renames (see
   :mod:`~._edits`): an append that comes after the removal starts a new session instead
   of landing in the removed file;
2. the file is removed: the commit, the session is gone (its messages, and its info and
   meta, which hold only beside it);
3. its meta file, then its index markers (by owner and tag, and by update time).

A crash after step 2 leaves a meta file with no session file: the next session file of that
name starts at a random generation, for which it holds nothing (see ``_file``), and the
markers left are removed by the listings that meet them. An append running at the same
moment either lands before the removal (then the session is checked again, no longer old,
and kept) or after it (in a new file): the session is never left half removed.
"""

from __future__ import annotations

import logging
import os
from datetime import datetime
from pathlib import Path

from ...errors import StoreError
from .._catalog import PRUNE_BATCH, from_timestamp
from . import _index, _timeline
from ._attachments import named_in, release
from ._edits import MARK, holds_a_line
from ._format import META_SUFFIX
from ._io import fsync_directory
from ._listing import Candidate, candidates, held, named
from ._record import Info, load, seconds

__all__ = ["remove", "remove_batch"]

logger = logging.getLogger("aniki")


def remove(
    directory: Path,
    *,
    cutoff: datetime | None,
    owner: str | None,
    timeout: float,
    durable: bool,
) -> int:
    """Remove every session of ``owner`` (any, when ``None``) last written before
    ``cutoff`` (any time, when ``None``); how many were removed."""
    removed = 0
    passed: set[str] = set()  # met already: removed, kept, or refused
    while True:
        found = [
            candidate
            for candidate in candidates(directory, owner, None)
            if candidate.stem not in passed and (cutoff is None or candidate.when < cutoff)
        ]
        found.sort(key=lambda candidate: (candidate.when, candidate.stem))
        batch = found[:PRUNE_BATCH]
        removed += remove_batch(
            directory, batch, cutoff=cutoff, owner=owner, timeout=timeout, durable=durable
        )
        passed.update(candidate.stem for candidate in batch)
        if len(batch) < PRUNE_BATCH:
            return removed


def remove_batch(
    directory: Path,
    batch: list[Candidate],
    *,
    cutoff: datetime | None,
    owner: str | None,
    timeout: float,
    durable: bool,
) -> int:
    """Remove the sessions of ``batch`` that are still of ``owner`` and older than
    ``cutoff``, each under its lock; how many were removed."""
    removed = 0
    for candidate in batch:
        path = candidate.path(directory)
        store = f"file://{path}"
        try:
            removed += _remove(directory, candidate, cutoff, owner, timeout, durable)
        except StoreError as error:
            logger.warning("aniki: a session file was left in place: %s", error)
        except OSError as exc:
            logger.warning("aniki: a session file was left in place: %s [store: %s]", exc, store)
    return removed


def _remove(
    directory: Path,
    candidate: Candidate,
    cutoff: datetime | None,
    owner: str | None,
    timeout: float,
    durable: bool,
) -> bool:
    path = candidate.path(directory)
    store = f"file://{path}"
    meta_path = directory / (candidate.stem + META_SUFFIX)
    with held(path, exclusive=True, timeout=timeout, store=store) as fd:
        if fd is None:
            return False
        found = named(fd, candidate.stem, store)
        if found is None:
            return False
        _, (generation, start), _ = found
        info = load(meta_path, generation, store=store).info
        if owner is not None and (info is None or info.owner != owner):
            _index.remove(candidate.markers)  # no longer that owner's: stale
            return False
        status = os.fstat(fd)
        if info is None and not holds_a_line(fd, start, status.st_size):
            return False  # never written (or cleared): nothing to remove
        if cutoff is not None and _updated(status.st_mtime_ns, info) >= cutoff:
            return False  # written since it was found
        attachments = named_in(fd, start, status.st_size)  # what its records name
        os.pwrite(fd, MARK, status.st_size)  # every instance holding it leaves it
        os.unlink(path)  # the commit
        if durable:
            fsync_directory(directory)
        meta_path.unlink(missing_ok=True)
        _index.remove(_index.markers(directory, candidate.stem, info))
        _timeline.unmark(directory, candidate.stem, status.st_mtime_ns)
        release(directory, candidate.stem, attachments)
        return True


def _updated(modified: int, info: Info | None) -> datetime:
    """When the session was last written, as its info reports it (see ``_info``)."""
    updated = seconds(modified)
    return from_timestamp(updated if info is None else max(updated, info.created))
