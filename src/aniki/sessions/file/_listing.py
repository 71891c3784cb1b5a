"""A file store's listing (``FileStore.list_sessions``): which session files, read how.

**Which.** A listing by owner or tag takes the sessions marked in that owner's or tag's
folder of the index (both: those in both; see :mod:`~._index`), each ``stat``-ed for its
time. A page of every session (a ``limit``, ``cursor`` or ``updated_after``) takes them from
the index by update time (:mod:`~._timeline`), newest first, ``stat``-ing only those of the
newest folders; a store without that index yet takes every ``*.jsonl`` of the directory, as
the listing of every session without a bound does. Candidates are ordered (newest first)
and cut by ``updated_after`` and ``cursor`` before any is read; they are then read in that
order, each under its shared lock (its header, its meta file and the lines past its kept
count: :mod:`~._info`), until the page is full. So a listing of one owner's 20 sessions, or
of the newest 20, reads a few folders and those 20 sessions, whatever else the directory
holds.

A marker whose session no longer has that owner or tag, or no longer exists, is left out
and removed (under that session's lock). A session file that cannot be read is left out and
said in ``problems`` (or logged), as :meth:`FileStore.list_sessions
<aniki.sessions.FileStore.list_sessions>` describes.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

from ...errors import CorruptStoreError, StoreError, StoreUnavailableError
from .._catalog import Listing, from_timestamp, select
from ..base import SessionInfo
from . import _index, _timeline
from ._format import (
    DATA_SUFFIX,
    HEADER_READ,
    META_SUFFIX,
    any_header,
    file_stem,
)
from ._info import Look, look
from ._io import lock, same_file, unlock
from ._record import seconds

__all__ = ["Candidate", "candidates", "held", "list_sessions", "looked", "named", "report"]

logger = logging.getLogger("aniki")

_REOPENS = 100
"""Times in a row a session file is opened again when another was put at its path."""

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

SKEW = timedelta(milliseconds=20)
"""How much later than its file's time a session's ``updated_at`` may be: a session written
within one tick of the file system's clock of its first message reports that message's time,
stamped by Python's finer clock before the write (see ``_info``); a tick is at most 10 ms.
Candidates come in the order of their files' times, so a page reads on while the next could
still be reported newer than its last, and the time filters give way by as much."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A session file that may be listed, before it is read."""

    stem: str
    """Its name without ``.jsonl``."""
    when: datetime
    """Its modification time."""
    markers: tuple[Path, ...] = ()
    """The index markers that named it."""
    modified: int = 0
    """Its modification time in nanoseconds (what ``when`` is made from)."""

    def path(self, directory: Path) -> Path:
        """Its file, in the session directory ``directory``."""
        return directory / (self.stem + DATA_SUFFIX)


def candidates(
    directory: Path, owner: str | None, tag: str | None, *, timed: bool = True
) -> list[Candidate]:
    """The session files a listing (or prune) of ``owner`` / ``tag`` looks at: the marked
    ones, or every one; each with its time (without ``timed``, every one's is the epoch:
    a listing of all that reads every file needs none)."""
    if owner is None and tag is None:
        return list(_every(directory, timed))
    named: dict[str, tuple[Path, ...]] = {}
    wanted: list[tuple[_index.Kind, str]] = [("owner", owner)] if owner is not None else []
    if tag is not None:
        wanted.append(("tag", tag))
    for kind, name in wanted:
        marked = _index.members(directory, kind, name)
        folder = _index.folder(directory, kind, name)
        named = {
            stem: (*named.get(stem, ()), folder / stem)
            for stem in marked
            if not named or stem in named
        }
        if not named:
            return []
    found = []
    for stem, markers in named.items():
        path = directory / (stem + DATA_SUFFIX)
        try:
            status = os.stat(path)
        except FileNotFoundError:
            for marker in markers:
                _index.drop(marker, path)
            continue
        except OSError:
            continue  # met again when it is read (and reported then)
        found.append(_candidate(stem, status.st_mtime_ns, markers))
    return found


def _every(directory: Path, timed: bool) -> Iterator[Candidate]:
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreUnavailableError(
            f"cannot list the session directory ({exc}); check its permissions",
            store=f"file://{directory}",
        ) from exc
    for entry in entries:
        if not entry.name.endswith(DATA_SUFFIX):
            continue
        try:
            modified = entry.stat().st_mtime_ns if timed else 0
        except OSError:
            modified = 0  # read (and reported) in its turn
        yield _candidate(entry.name[: -len(DATA_SUFFIX)], modified, ())


def _candidate(stem: str, modified: int, markers: tuple[Path, ...]) -> Candidate:
    return Candidate(stem, from_timestamp(seconds(modified)), markers, modified)


def _newest_first(candidate: Candidate) -> tuple[float, str]:
    return -candidate.when.timestamp(), candidate.stem  # ties: read, then sorted by id


def _by_time(directory: Path, listing: Listing, *, durable: bool) -> Iterable[Candidate]:
    """Every session, newest first, from the index by update time; without that index, from
    the directory, indexing it on the way (see :mod:`~._timeline`)."""
    if _timeline.built(directory):
        since, after = listing.updated_after, None
        if since is not None:  # in ns, as the files' times
            after = (since - SKEW - _EPOCH) // timedelta(microseconds=1) * 1000
        want = math.inf if listing.limit is None else listing.limit
        walk = _timeline.newest(directory, want=want, since=after)
        return (_candidate(stem, modified, ()) for modified, stem in walk)
    found = list(_every(directory, True))
    if found:  # an empty or absent directory: nothing to index (and none is made)
        try:
            _timeline.build(directory, ((c.stem, c.modified) for c in found), durable=durable)
        except OSError as exc:  # read only, say: listed from the directory again next time
            # Not a warning: a read-only store would log one at every listing.
            logger.debug("aniki: the index by update time was not made: %s", exc)
    return sorted(found, key=_newest_first)


@contextmanager
def held(path: Path, *, exclusive: bool, timeout: float, store: str) -> Iterator[int | None]:
    """The session file ``path``, open and locked (``None``: there is none); opened again
    when another file was put at the path meanwhile (an undo, a fork, an import)."""
    flags = (os.O_RDWR if exclusive else os.O_RDONLY) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(_REOPENS):
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            yield None
            return
        try:
            lock(fd, exclusive=exclusive, timeout=timeout, store=store)
            try:
                if same_file(fd, path):
                    yield fd
                    return
            finally:
                unlock(fd)
        finally:
            os.close(fd)
    raise StoreUnavailableError(
        f"the session file was replaced {_REOPENS} times in a row while it was read; retry",
        store=store,
    )


def named(fd: int, stem: str, store: str) -> tuple[str, tuple[int, int], bytes] | None:
    """The id and header (generation, length) of the session file ``fd`` named
    ``<stem>.jsonl``, and its first bytes as read (``None``: it has no header yet).
    :class:`~aniki.CorruptStoreError` when it is not an aniki session file or is named for
    another session than its header's."""
    begins = os.pread(fd, HEADER_READ, 0)
    found = any_header(begins, store=store)
    if found is None:
        return None
    ident, generation, length = found
    if stem != file_stem(ident):
        raise CorruptStoreError(
            f"the file belongs to session {ident!r} but is not named for it (copied or "
            f"renamed?); move it out of the directory, or rename it to "
            f"{file_stem(ident) + DATA_SUFFIX}",
            store=store,
        )
    return ident, (generation, length), begins


def looked(fd: int, directory: Path, stem: str, store: str) -> Look | None:
    """The session file ``fd`` (locked) named ``<stem>.jsonl``, read (``None``: it has no
    header yet); refused as :func:`named` refuses it."""
    found = named(fd, stem, store)
    if found is None:
        return None
    ident, head, begins = found
    return look(fd, ident, head, directory / (stem + META_SUFFIX), store, begins)


def report(error: StoreError, problems: list[StoreError] | None) -> None:
    """Say that a session file was left out: in ``problems``, or logged."""
    if problems is None:
        logger.warning("aniki: a session file was left out of the list: %s", error)
    else:
        problems.append(error)


def list_sessions(
    directory: Path,
    listing: Listing,
    *,
    timeout: float,
    problems: list[StoreError] | None,
    durable: bool = False,
) -> list[SessionInfo]:
    """The page ``listing`` asks for (see the module docstring); ``durable``: an index by
    update time made on the way is on disk before it is used."""
    whole = listing.limit is None and listing.cursor is None and listing.updated_after is None
    plain = whole and listing.owner is None and listing.tag is None  # every info is listed
    found: Iterable[Candidate]
    if listing.owner is None and listing.tag is None and not whole:
        found = _by_time(directory, listing, durable=durable)
    else:
        found = sorted(
            candidates(directory, listing.owner, listing.tag, timed=not whole), key=_newest_first
        )
    if listing.updated_after is not None:  # select() applies it to the times reported
        found = (c for c in found if c.when > listing.updated_after - SKEW)
    if listing.cursor is not None:  # what is newer than the cursor came on a page before
        found = (c for c in found if c.when <= listing.cursor[0])
    every = replace(listing, limit=None)
    page: list[SessionInfo] = []
    last: datetime | None = None  # the time of the candidate that filled the page
    for candidate in found:
        if last is not None and candidate.when < last - SKEW:
            break  # the page is full, and no candidate left may be reported as new as its last
        info = _read(directory, candidate, listing, timeout, problems)
        if info is not None and (plain or select([info], every)):
            page.append(info)
            if listing.limit is not None and len(page) >= listing.limit and last is None:
                last = candidate.when
    return select(page, listing)


def _read(
    directory: Path,
    candidate: Candidate,
    listing: Listing,
    timeout: float,
    problems: list[StoreError] | None,
) -> SessionInfo | None:
    """The info of one candidate (``None``: not listed), its stale markers removed."""
    path = candidate.path(directory)
    store = f"file://{path}"
    try:
        with held(path, exclusive=False, timeout=timeout, store=store) as fd:
            if fd is None:  # removed since it was found
                for marker in candidate.markers:
                    _index.drop(marker, path)
                return None
            seen = looked(fd, directory, candidate.stem, store)
            info = None if seen is None or not seen.written else seen.info()
            _index.remove(
                marker for marker in candidate.markers if not _still(marker, info, listing)
            )
            return info
    except StoreError as error:
        report(error, problems)
    except OSError as exc:
        report(
            StoreUnavailableError(f"cannot read the session file ({exc})", store=store),
            problems,
        )
    return None


def _still(marker: Path, info: SessionInfo | None, listing: Listing) -> bool:
    """Whether the session ``info`` still has the owner or tag ``marker`` is for."""
    if info is None:
        return False
    if marker.parent.parent.name == "owner":
        return info.owner == listing.owner
    return listing.tag in info.tags
