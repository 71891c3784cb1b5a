"""What a session's meta file (``<name>.meta.json``) keeps beside its session file, read and
written whole: the derived-state values (``set_meta``), the session's info (``set_info``)
and a kept count of its messages, all for one generation of the session file (see
:mod:`~aniki.sessions.file._meta`)::

    {"aniki": "meta", "generation": 7, "values": {"aniki.summary": {...}},
     "info": {"title": "Trip", "owner": "user-7", "tags": ["travel"], "created": 1767225600.25},
     "count": [42, 18211]}

* ``info`` is there once the session's info was set (a fork and an undo carry it over); it
  goes with the file on ``clear()``. ``created`` is seconds since the epoch (UTC).
* ``count`` is ``[messages, offset]``: the record lines from the header up to byte
  ``offset`` hold ``messages`` messages. It holds while those bytes stay as they are: every
  edit that changes them bumps the generation (``clear``, undo's cut), writes a new file
  with a new generation (a fork, an import) or writes a count at an offset the old and the
  new file share first (undo inside a batch). So a listing decodes only the lines past it.
  Appends do not write it: the appending instance writes it again once
  :data:`COUNT_EVERY` bytes were appended past the last one (one meta write per that many
  bytes), so the lines past it are few.

A session file older than this module has no ``info`` and no ``count``: its count is taken
from its lines, its ``created_at`` from its first message, and an aniki older than this
module drops both when it writes the meta file (nothing else changes for it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import CorruptStoreError
from ._io import load_meta, replace_file

__all__ = ["COUNT_EVERY", "Info", "Kept", "keep_count", "kept", "load", "seconds", "write"]

COUNT_EVERY = 1 << 18
"""Bytes appended past the kept count before the appending instance keeps it again: the
most a listing decodes per session. Measured (ext4): keeping the count (a meta file
replaced) costs ~200 us, once per ~1,700 appends of a 150-byte message, ~0.1 us each on an
append of ~8 us; decoding 256 KiB costs ~3 ms. At 64 KiB the appends paid ~0.5 us each."""

_HINT = (
    "no write is made to it. Move it aside or delete it: it holds only derived state and the "
    "session's info (title, owner, tags), which are then lost"
)


@dataclass(frozen=True, slots=True)
class Info:
    """A session's info as its meta file keeps it."""

    title: str | None
    """Its title (``None``: none)."""
    owner: str | None
    """Its owner (``None``: none)."""
    tags: tuple[str, ...]
    """Its tags, sorted, each once."""
    created: float
    """When it was first written: seconds since the epoch (UTC)."""


@dataclass(frozen=True, slots=True)
class Kept:
    """What the meta file keeps for one generation of the session file."""

    values: dict[str, Any] = field(default_factory=dict)
    """The derived-state values, by key."""
    info: Info | None = None
    """The session's info, once set."""
    count: tuple[int, int] | None = None
    """``(messages, offset)``: how many messages the record lines before ``offset`` hold."""

    @property
    def empty(self) -> bool:
        """Whether it keeps nothing (no meta file is needed)."""
        return not self.values and self.info is None and self.count is None


def seconds(nanoseconds: int) -> float:
    """A file time (``st_mtime_ns``) as the seconds every time of the file store is kept in."""
    return nanoseconds / 1e9


def kept(document: dict[str, Any] | None, generation: int, *, store: str) -> Kept:
    """What a meta ``document`` (see :func:`~._io.load_meta`) keeps if it holds for the
    session file's ``generation`` (the one it was written for, or the one before an undo
    that wrote it); nothing otherwise."""
    if document is None or generation not in (document.get("generation"), document.get("previous")):
        return Kept()
    return Kept(dict(document["values"]), _info(document, store), _count(document, store))


def load(path: Path, generation: int, *, store: str) -> Kept:
    """What the meta file ``path`` keeps for ``generation``; damaged: refused."""
    return kept(load_meta(path, store=store), generation, store=store)


def _info(document: dict[str, Any], store: str) -> Info | None:
    found = document.get("info")
    if found is None:
        return None
    if not isinstance(found, dict):
        raise CorruptStoreError(f"the meta file's info is damaged; {_HINT}", store=store)
    title, owner, tags, created = (found.get(key) for key in ("title", "owner", "tags", "created"))
    if (
        not isinstance(title, (str, type(None)))
        or not isinstance(owner, (str, type(None)))
        or not isinstance(tags, list)
        or not all(isinstance(tag, str) for tag in tags)
        or not isinstance(created, (int, float))
        or isinstance(created, bool)
    ):
        raise CorruptStoreError(f"the meta file's info is damaged; {_HINT}", store=store)
    return Info(title, owner, tuple(tags), float(created))


def _count(document: dict[str, Any], store: str) -> tuple[int, int] | None:
    found = document.get("count")
    if found is None:
        return None
    if (
        not isinstance(found, list)
        or len(found) != 2
        or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in found)
    ):
        raise CorruptStoreError(f"the meta file's count is damaged; {_HINT}", store=store)
    return found[0], found[1]


def write(
    path: Path, generation: int, what: Kept, *, durable: bool, previous: int | None = None
) -> None:
    """Replace the meta file ``path`` with ``what``, for ``generation`` (and ``previous``:
    an undo writes it for the generation it leaves and the one it makes, before it bumps
    the header, so that it holds whether or not it got that far)."""
    document: dict[str, Any] = {"aniki": "meta", "generation": generation, "values": what.values}
    if previous is not None:
        document["previous"] = previous
    if what.info is not None:
        info = what.info
        document["info"] = {
            "title": info.title,
            "owner": info.owner,
            "tags": list(info.tags),
            "created": info.created,
        }
    if what.count is not None:
        document["count"] = list(what.count)
    data = json.dumps(document, ensure_ascii=False).encode("utf-8")
    replace_file(path, data, durable=durable)


def keep_count(
    path: Path, generation: int, count: int, offset: int, *, durable: bool, store: str
) -> int:
    """Keep ``count`` messages up to ``offset`` in the meta file ``path`` (the session file
    locked exclusively, at ``generation``), unless the one kept is at most
    :data:`COUNT_EVERY` bytes behind; the offset now kept. Called after an append has
    committed, so it never raises: a damaged or unwritable meta file is left as it is (its
    own calls report it)."""
    try:
        document = load_meta(path, store=store)
        held = kept(document, generation, store=store)
        if held.count is not None and 0 <= offset - held.count[1] <= COUNT_EVERY:
            return held.count[1]
        write(
            path,
            generation,
            Kept(held.values, held.info, (count, offset)),
            durable=durable,
        )
    except (CorruptStoreError, OSError):
        pass  # the count is only kept to spare listings work: nothing is lost without it
    return offset
