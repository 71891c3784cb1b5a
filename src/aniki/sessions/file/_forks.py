"""``fork`` of :class:`~aniki.sessions.FileSession`: the new session's file written whole
under a temporary name while the source is locked (shared), then renamed into place with the
target locked (exclusive); see :mod:`~._edits` for why each step is safe across a crash."""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path

from ...errors import StoreError
from .._edits import FORK_SKIPPED_META, forked_count, taken
from . import _index, _meta
from ._attachments import encode, keep, named_in, release
from ._edits import Adoption, discard, holds_a_line, line_of, new_file, replace_marked
from ._file import SessionFile
from ._format import fresh_generation, header
from ._io import Replaced, copy_range, load_meta, same_file, write_at
from ._record import Info, Kept, kept, seconds, write

__all__ = ["fork"]


def fork(source: SessionFile, target: SessionFile, upto: str | None) -> None:
    """Copy ``source`` into ``target``, a new session (see ``FileSession.fork``)."""
    generation = fresh_generation()
    with source.lock, source.errors():
        temp, adoption, held, names = source.using(
            lambda fd: _copy(source, fd, target, generation, upto),
            create=False,
            exclusive=False,
        )
    new, _, copied, written = adoption
    held = Kept(held.values, held.info, (len(copied), written))
    with target.lock, target.errors():
        try:
            target.using(
                lambda fd: _install(target, fd, temp, new, generation, held),
                create=True,
                exclusive=True,
            )
        except BaseException:
            discard(temp, new)
            _unmark(target, names)
            raise
        target.adopt(*adoption)


def _unmark(target: SessionFile, names: set[str]) -> None:
    """A fork that failed: the markers it made for ``target`` go, but for the blobs the
    target's own records name."""
    if not names:
        return

    def unmark(fd: int | None) -> None:
        named_now = set() if fd is None else named_in(fd, 0, os.fstat(fd).st_size)
        release(target.directory, target.stem, names - named_now)

    with suppress(StoreError, OSError):  # the fork's own error is the one to raise
        target.using(unmark, create=False, exclusive=True)


def _copy(
    source: SessionFile, fd: int | None, target: SessionFile, generation: int, upto: str | None
) -> tuple[Path, Adoption, Kept, set[str]]:
    """Write the fork's file under a temporary name (``source`` locked, shared); the meta
    values and the info it takes along, and the blobs it names, marked for ``target`` while
    the source still names them (see ``_attachments``)."""
    if fd is not None:
        source.refresh(fd)
    present = fd is not None and source.cache.generation is not None
    messages = source.cache.view() if present else ()
    count = forked_count(messages, upto, source.id)  # no such message: refused here
    held = _meta.kept(source, fd)
    values = {key: value for key, value in held.values.items() if key not in FORK_SKIPPED_META}
    target.directory.mkdir(parents=True, exist_ok=True)
    head = header(target.id, generation)
    temp, new = new_file(target.path)
    try:
        write_at(new, head, 0)
        written = len(head)
        if count:
            assert fd is not None
            written = _copy_records(source, fd, new, written, count)
        names = named_in(new, len(head), written)
        keep(target.directory, target.stem, {}, names=names, durable=target.durability == "full")
    except BaseException:
        discard(temp, new)
        raise
    adoption = (new, (generation, len(head)), messages[:count], written)
    return temp, adoption, Kept(values, held.info), names


def _copy_records(source: SessionFile, fd: int, new: int, at: int, count: int) -> int:
    """Copy the records holding ``source``'s first ``count`` messages (all read into its
    cache) into ``new`` at ``at``; where they end there."""
    start, end = source.start, source.cache.position
    cut = b""  # the line holding the last one, cut after it, when it goes on past it
    if count < len(source.cache):
        line_start, end, first, items = line_of(source, fd, start, end, count - 1)
        if count - first < len(items):
            end, cut = line_start, encode(items[: count - first])[0]
    copy_range(fd, start, end - start, new, at)
    at += end - start
    write_at(new, cut, at)
    return at + len(cut)


def _install(
    target: SessionFile,
    fd: int | None,
    temp: Path,
    new: int,
    generation: int,
    held: Kept,
) -> None:
    """Put the fork's file in place of the target's, which must hold no line (locked), with
    its meta file: ``held`` (the source's values and info, the copy's count), created now."""
    assert fd is not None
    if not same_file(fd, target.path):
        raise Replaced
    head = target.head(fd)  # not an aniki file, or another session's: refused
    mark_at = None
    if head is not None:
        mark_at = os.fstat(fd).st_size
        if holds_a_line(fd, head[1], mark_at):
            raise taken(target.id)
    document = load_meta(target.meta_path, store=target.label)  # damaged: refused, as clear()
    old = None if head is None else kept(document, head[0], store=target.label).info
    source = held.info or Info(None, None, (), 0.0)
    info = Info(source.title, source.owner, source.tags, seconds(os.fstat(new).st_mtime_ns))
    before = _index.markers(target.directory, target.stem, old)
    after = _index.markers(target.directory, target.stem, info)
    full = target.durability == "full"
    _index.add(after - before, durable=full)  # before the meta file: see _index
    write(target.meta_path, generation, Kept(held.values, info, held.count), durable=full)
    replace_marked(target, temp, new, replacing=fd, mark_at=mark_at)  # it has info: listed
    _index.remove(before - after)
