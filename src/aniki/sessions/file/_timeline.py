"""The index of a file store's sessions by update time, which serves a newest-first page of
every session: one empty marker per session, in a folder per tenth of a second::

    chats/.index/updated/<tick // 10**6>/<tick // 10**3>/<tick>/<the session's name>

where ``tick`` is the session file's modification time (its ``updated_at``) in tenths of a
second since the epoch. A listing reads the newest folders and ``stat``-s the sessions
marked there, not every session file (:func:`newest`).

**What holds.** A session holding a record or info is marked at the tick of its file's
time or later: a marker may be late (the listing then meets the session early and places
it by its real time), never early. Every write that moves the file's time keeps it so,
under the session file's exclusive lock:

* an append, ``set_info``, an undo's cut (:func:`before`, then :func:`after`): before the
  write, the session is marked at the tick of now, unless it is marked for its last write
  and that was in this tick already (so appends in a row make no marker, and cost two
  reads of the clock); after it, a write stamped in a later tick (the clock passed to the
  next one meanwhile) is marked there, and the markers below are removed;
* a new file put in place (a fork, an import, an undo inside a batch): its time is known
  before the rename and marked then (:func:`mark`), the old file's removed after;
* a ``clear()`` and a prune remove the marker: the session is listed no more.

A marker only moves up: the one above is made before the one below is removed. So a
listing that reads the folders from the lowest up meets a session that moves meanwhile
at its old marker or at its new one (see :func:`_scan`).

A crash between making a marker and removing another leaves one marker too many: a listing
that meets it moves a marker too early up and removes one whose session is gone. The one
marker missing that a crash can leave is that of a write stamped in a later tick than the
one marked before it, between the write and :func:`after`; the listing reads :data:`GRACE`
further down for it, so that takes a write held up longer than that after reading the
clock, and the process dying in the instant after it. A file's time set by hand
(``touch``) is not marked: a listing that meets its old marker moves it.

**A store without it** (written by an aniki before this index): the first listing that
would use it reads every session file's time, as listings did, marks each, then stamps the
index whole (``.built``); until then each such listing reads the directory. A process of an
older aniki writing to the store afterwards does not mark what it writes: a newest-first
page may then miss its sessions until this aniki writes them again.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import suppress
from pathlib import Path

from ._format import DATA_SUFFIX
from ._index import INDEX
from ._io import fsync_directory

__all__ = [
    "GRACE",
    "TICK",
    "after",
    "before",
    "build",
    "built",
    "mark",
    "marker",
    "moving",
    "newest",
    "unmark",
]

logger = logging.getLogger("aniki")

TICK = 100_000_000
"""Nanoseconds per folder of markers: a tenth of a second."""

GRACE = TICK
"""How far past its marked tick a listing looks for a write whose process died before
:func:`after` (see the module docstring)."""

_BUILT = ".built"
_TRIES = 20
"""Times a marker is made again when its folder was removed meanwhile (see :func:`_empty`)."""


def _root(directory: Path) -> Path:
    return directory / INDEX / "updated"


def marker(directory: Path, stem: str, tick: int) -> Path:
    """The marker of the session whose file is ``<stem>.jsonl`` in folder ``tick``."""
    return _leaf(_root(directory), tick) / stem


def _make(path: Path, *, durable: bool) -> None:
    """Make the marker ``path`` (its folders too); with ``durable``, on disk on return."""
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    made = False
    for attempt in range(_TRIES):
        try:
            os.close(os.open(path, flags, 0o666))
            break
        except FileNotFoundError:
            if attempt == _TRIES - 1:
                raise
            with suppress(FileNotFoundError, FileExistsError):  # removed meanwhile: again
                path.parent.mkdir(parents=True, exist_ok=True)
            made = True
    if durable:  # its folder, and the folders made for it, up to the session directory
        for place in path.parents[: 6 if made else 1]:
            fsync_directory(place)


def _remove(path: Path) -> None:
    """Remove the marker ``path``, and its folders once empty (see :func:`_empty`)."""
    path.unlink(missing_ok=True)
    _empty(path.parent)


def _empty(leaf: Path) -> None:
    """Remove the folder of markers ``leaf``, and the folders above it, while empty (never
    the index's root). Not the folder of the tick now: writers are making markers in it, and
    each one that finds its folder removed after making it tries again; a listing that reads
    it empty later removes it."""
    if int(leaf.name) >= time.time_ns() // TICK:
        return
    for place in (leaf, *leaf.parents[:2]):
        try:
            place.rmdir()
        except OSError:
            break  # other markers are in it (or it is gone already)


def mark(directory: Path, stem: str, modified: int, *, durable: bool) -> None:
    """Mark a session whose file's time (ns) is ``modified``: a new file, before it is put
    in place."""
    _make(marker(directory, stem, modified // TICK), durable=durable)


def unmark(directory: Path, stem: str, modified: int, *, kept: int | None = None) -> None:
    """Remove a session's marker for the time ``modified`` (ns); with ``kept``, the time it
    is marked for now, only those below that one's tick (a marker only moves up)."""
    for tick in _marked_for(modified):
        if kept is None or tick < kept // TICK:
            _remove(marker(directory, stem, tick))


def _marked_for(modified: int) -> tuple[int, int]:
    """The ticks a session whose file's time is ``modified`` may be marked at: its own, or
    the next when the file system's clock stamped the write just before the tick marked
    (see :func:`after`)."""
    return modified // TICK, modified // TICK + 1


def before(directory: Path, stem: str, old: int, *, marked: bool, durable: bool) -> int | None:
    """Ready the index for a write made right after this (the file locked exclusively;
    ``old``: its time now, in ns; ``marked``: whether the session is marked for that time,
    as every session holding a record is). The tick marked now, or ``None``: the session's
    marker holds for a write in this tick already."""
    tick = time.time_ns() // TICK
    if marked and tick == old // TICK:
        return None
    _make(marker(directory, stem, tick), durable=durable)
    while (now := time.time_ns() // TICK) != tick:  # a tick passed while it was made
        _make(marker(directory, stem, now), durable=durable)
        _remove(marker(directory, stem, tick))  # after: a marker only ever moves up
        tick = now
    return tick


def after(
    directory: Path, stem: str, fd: int, old: int, tick: int | None, *, durable: bool
) -> None:
    """Settle the index after the write that :func:`before` readied (``tick``: what it
    returned): mark the tick the write was stamped with when later than the one marked, and
    remove the markers below. Never raises: the write is made, and an error here must not
    look as if it were not.

    A marker is never moved down (a listing reading upwards could miss it in between): when
    the file system's clock, coarser than Python's, stamped the write just before the tick
    marked, that marker stays, a little late.
    """
    if tick is None and time.time_ns() // TICK == old // TICK:
        return  # the common case: written in the tick the session is marked for
    held = old // TICK if tick is None else tick
    try:
        final = max(held, os.fstat(fd).st_mtime_ns // TICK)
        if final != held:
            _make(marker(directory, stem, final), durable=durable)
        for gone in {held, *_marked_for(old)}:
            if gone < final:  # after the one above it was made: see the module docstring
                _remove(marker(directory, stem, gone))
    except OSError as exc:
        logger.warning("aniki: the index by update time was not kept for %s: %s", stem, exc)


def moving(
    directory: Path,
    stem: str,
    fd: int,
    write: Callable[[], object],
    *,
    marked: bool,
    durable: bool,
) -> None:
    """``write()``, which moves the time of the session file ``fd`` (locked exclusively),
    between :func:`before` and :func:`after`."""
    old = os.fstat(fd).st_mtime_ns
    tick = before(directory, stem, old, marked=marked, durable=durable)
    write()
    after(directory, stem, fd, old, tick, durable=durable)


# --- the listing ---------------------------------------------------------------------------


def built(directory: Path) -> bool:
    """Whether every session of the store is marked (see the module docstring)."""
    return (_root(directory) / _BUILT).exists()


def build(directory: Path, found: Iterable[tuple[str, int]], *, durable: bool) -> None:
    """Mark each session of ``found`` (name, file time in ns) that is not marked for its
    time yet, then stamp the index whole."""
    marked = {(stem, tick) for tick, leaf in _leaves(_root(directory)) for stem in _names(leaf)}
    folders: set[Path] = set()
    for stem, modified in found:
        if not any((stem, tick) in marked for tick in _marked_for(modified)):
            path = marker(directory, stem, modified // TICK)
            _make(path, durable=False)
            folders.update(path.parents[:6])
    if durable:  # once each, rather than per marker
        for place in sorted(folders, key=lambda folder: -len(folder.parts)):
            fsync_directory(place)
    root = _root(directory)
    root.mkdir(parents=True, exist_ok=True)
    os.close(os.open(root / _BUILT, os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)))
    if durable:
        for place in (root, root.parent, directory):
            fsync_directory(place)


def newest(directory: Path, *, want: float, since: int | None = None) -> Iterator[tuple[int, str]]:
    """Every marked session, as (its file's time in ns, its name), newest first (ties by
    name), each once; ``want``: how many the caller expects to take (``math.inf``: all);
    ``since`` (ns): the walk ends where every session left is as old or older.

    It reads the newest folders holding some more markers than ``want`` (see :func:`_scan`),
    and gives the sessions no session in the folders left can be newer than: those were
    written before the end of their folder's tick plus :data:`GRACE`. When the caller takes
    more, it reads again, four times as far down.
    """
    root = _root(directory)
    known: dict[str, int | None] = {}  # each session's time, from its first stat here
    given: set[str] = set()
    target = want + _SLACK
    while True:
        low = _lowest(root, target, since)
        _scan(directory, root, low, known)
        # No session left below can be as new as this (1 us more: for rounding to datetimes).
        bound = -1 if low is None else low * TICK + GRACE + 1000
        final = low is None or (since is not None and bound <= since)
        ready = sorted(
            (-modified, stem)
            for stem, modified in known.items()
            if modified is not None and stem not in given and (final or modified >= bound)
        )
        for found, stem in ready:
            given.add(stem)
            yield -found, stem
        if final:
            return
        target *= 4


_SLACK = 8
"""Markers read beyond what the caller wants: some are of sessions not listed (cleared, or
left behind)."""


def _lowest(root: Path, target: float, since: int | None) -> int | None:
    """The lowest tick to read down to: the newest folders holding ``target`` markers, and
    those within :data:`GRACE` below them (``None``: every folder)."""
    count = 0
    for tick, leaf in _leaves(root):
        if since is not None and tick * TICK + GRACE + 1000 <= since:
            return tick  # nothing below is newer than since
        count += len(_names(leaf))
        if count >= target:
            return tick - (GRACE + 1000) // TICK - 1
    return None


def _scan(directory: Path, root: Path, low: int | None, known: dict[str, int | None]) -> None:
    """Read the folders from tick ``low`` up (every one when ``None``), lowest first, then any
    made above them meanwhile, adding each session met to ``known`` with its time.

    Lowest first, because writers move a session up: they mark its new tick before removing
    the old marker. So a session that moves while this reads is met at the old marker (read
    before it went) or at the new one (made before the old one went, above it: read after).
    """
    place = os.fspath(directory)  # paths as text: this loop runs once per marker
    ticks = [tick for tick, _ in _leaves(root, down_to=low)]
    top = ticks[0] if ticks else None
    while ticks:
        for tick in reversed(ticks):
            leaf = _leaf(root, tick)
            names = _names(leaf)
            if not names:
                _empty(leaf)  # left by a removal in its tick
            for stem in names:
                if stem not in known:
                    known[stem] = _stat(place, stem)
                modified = known[stem]
                if modified is None or modified // TICK > tick:
                    _tidy(directory, stem, tick, modified)
        ticks = [tick for tick, _ in _leaves(root, down_to=top, above=True)]
        top = ticks[0] if ticks else top


def _stat(directory: str, stem: str) -> int | None:
    """The time (ns) of the session file ``<stem>.jsonl`` (``None``: gone; 0: unreadable,
    listed last as a scan of the directory lists it, and said when read)."""
    try:
        return os.stat(os.path.join(directory, stem + DATA_SUFFIX)).st_mtime_ns
    except FileNotFoundError:
        return None
    except OSError:
        return 0


def _tidy(directory: Path, stem: str, tick: int, modified: int | None) -> None:
    """Heal the marker of ``stem`` in folder ``tick``, its session's time being
    ``modified``: removed when its file is gone, moved up when it is too early."""
    here = marker(directory, stem, tick)
    if modified is None:
        _drop(here, directory / (stem + DATA_SUFFIX))
    elif modified // TICK > tick:  # written since, and not marked then: marked now
        try:
            _make(marker(directory, stem, modified // TICK), durable=False)
            _remove(here)
        except OSError:
            pass  # kept as it is; the session is still listed at its time


def _drop(here: Path, path: Path) -> None:
    """Remove the marker ``here`` of the session file ``path``, which is gone. A writer
    may make that session again at this moment (the file, then its marker): if the file is
    there after the marker was removed, the marker is made again."""
    try:
        here.unlink(missing_ok=True)
        if path.exists():
            _make(here, durable=False)
        else:
            _remove(here)
    except OSError:
        pass  # met again by the next listing


def _leaves(
    root: Path, *, down_to: int | None = None, above: bool = False
) -> Iterator[tuple[int, Path]]:
    """The folders of markers, newest tick first, down to tick ``down_to`` (included unless
    ``above``; every one when ``None``)."""
    for high in _numbers(root):
        if down_to is not None and high < down_to // 10**6:
            return
        for middle in _numbers(root / str(high)):
            if middle // 10**3 != high:
                continue  # not one this index makes
            if down_to is not None and middle < down_to // 10**3:
                return
            for tick in _numbers(root / str(high) / str(middle)):
                if down_to is not None and (tick < down_to or (above and tick == down_to)):
                    return
                if tick // 10**3 == middle:
                    yield tick, _leaf(root, tick)


def _leaf(root: Path, tick: int) -> Path:
    return root / str(tick // 10**6) / str(tick // 10**3) / str(tick)


def _numbers(folder: Path) -> list[int]:
    """The names in ``folder`` that are whole numbers, largest first."""
    found = []
    for name in _names(folder):
        try:
            found.append(int(name))
        except ValueError:
            continue  # .built, or not the index's
    return sorted(found, reverse=True)


def _names(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []
