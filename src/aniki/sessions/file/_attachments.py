"""Attachments in a file store, stored apart from the records that name them, once per
content (see :mod:`aniki.sessions._blobs`)::

    chats/.blobs/<sha256 hex>                  the bytes
    chats/.blobs/<sha256 hex>.by/<session>     one empty marker per session naming them
    chats/.blobs/.lock                         taken to make or remove a blob

A record line that names a blob holds a reference (``{"media_type", "blob", "size",
"name"?}``) instead of the bytes; a line without inline bytes is written as before.

**Writes.** Under the session file's exclusive lock, before the line that names a blob is
written: the blob is written if the store lacks it (a temporary file, then a rename; with
``durability="full"`` synced, and its folder), and the session's marker made, all under a
shared lock of ``.lock``. So the bytes are on disk before any record names them, and ten
sends of one image keep one file.

**Removals** (undo, clear, an import, prune, delete): once the records are gone (the
edit's commit), for each hash they named that the session's remaining records do not, the
session's marker is removed and, if it was the last, the blob with it, under the exclusive
lock of ``.lock`` (a writer holding the shared one is between finding a blob and marking
it). A crash between the commit and the removal, or a write that fails after marking, leaves
a blob no record names: space, never a missing blob.

**Reads.** Only lines that name a blob (found by a byte search, no JSON parse) read their
blobs, under the session file's shared lock: a blob named by a session's records keeps that
session's marker, which only that session's locked edits remove.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from ..._stamps import parse_time
from ...errors import CorruptStoreError, StoreUnavailableError, ValidationError
from ...messages import Message
from .._blobs import MARK, digest, join_all, split_batch
from .._codec import decode_messages
from ._format import record_line
from ._io import fsync_directory, lock, read_whole, replace_file, unlock

__all__ = [
    "BLOBS",
    "NAMES_BLOB",
    "Blobs",
    "count",
    "decode",
    "encode",
    "first_time",
    "keep",
    "named",
    "named_in",
    "read",
    "release",
]

BLOBS = ".blobs"
"""The blob folder in the session directory."""

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""How a record read back as JSON is written again for :mod:`aniki.sessions._blobs`, which
finds references by their text (no space after the colon)."""

NAMES_BLOB = MARK.encode()
"""Bytes every record line that names a blob holds, and no other."""

Blobs = Mapping[str, bytes]
"""Attachment bytes by their hash (see :func:`~aniki.sessions._blobs.digest`)."""

_LOCK_TIMEOUT = 30.0
"""Seconds a write waits for a removal of blobs elsewhere in the store (each is short)."""


def encode(messages: Sequence[Message]) -> tuple[bytes, dict[str, bytes]]:
    """The record line (with its ``\\n``) of ``messages`` and the blobs it names, by hash:
    ``{}`` (and the line as :func:`~._format.record_line` writes it) without inline bytes."""
    for message in messages:  # a loop, not any(): this is every append's path
        if message.attachments:
            break
    else:
        return record_line(messages), {}
    if not any(part.data is not None for message in messages for part in message.attachments):
        return record_line(messages), {}
    records, blobs = split_batch(messages)
    text = records[0] if len(records) == 1 else "[" + ",".join(records) + "]"
    return (text + "\n").encode("utf-8"), blobs


def _items(line: bytes, store: str) -> list[Any]:
    """The records of a line naming a blob, parsed."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        decode_messages(line, store=store)  # the codec words the error
        raise
    return data if isinstance(data, list) else [data]


def _hashes(items: Iterable[Any]) -> set[str]:
    """The hashes parsed records name (see :func:`aniki.sessions._blobs.refs`)."""
    found: set[str] = set()
    for item in items:
        parts = item.get("attachments") if isinstance(item, dict) else None
        for part in parts if isinstance(parts, list) else ():
            key = part.get("blob") if isinstance(part, dict) else None
            if isinstance(key, str):
                found.add(key)
    return found


def decode(
    line: bytes, directory: Path, store: str, held: dict[str, bytes] | None = None
) -> list[Message]:
    """The messages of one record line, any blob it names read from ``directory``'s blob
    folder (or found in ``held``, the blobs this read has read already, to which it adds:
    one image named by ten messages is read once, and held once);
    :class:`~aniki.CorruptStoreError` when a blob is missing or damaged."""
    if NAMES_BLOB not in line:
        return decode_messages(line, store=store)
    items = _items(line, store)
    blobs = {} if held is None else held
    blobs.update(read(directory, _hashes(items) - blobs.keys(), store))
    return join_all([_ENCODER.encode(item) for item in items], blobs, store=store)


def count(line: bytes, store: str) -> int:
    """How many messages a record line holds (a line naming blobs is not joined)."""
    if NAMES_BLOB not in line:
        return len(decode_messages(line, store=store))
    return len(_items(line, store))


def first_time(line: bytes, store: str) -> datetime | None:
    """The ``created_at`` of the first message of a record line (blobs are not read)."""
    if NAMES_BLOB not in line:
        messages = decode_messages(line, store=store)
        return messages[0].created_at if messages else None
    item = _items(line, store)[0]
    first = item.get("created_at") if isinstance(item, dict) else None
    try:
        return None if first is None else parse_time(first)
    except (ValidationError, TypeError) as exc:
        raise CorruptStoreError(f"a stored message is damaged ({exc})", store=store) from exc


def named(lines: Iterable[bytes]) -> set[str]:
    """The hashes the record lines (or a run of them, newlines between) name."""
    found: set[str] = set()
    for chunk in lines:
        if NAMES_BLOB not in chunk:
            continue
        for line in chunk.split(b"\n"):
            if NAMES_BLOB not in line:
                continue
            try:
                data = json.loads(line)
            except (ValueError, RecursionError):
                continue  # a damaged line: reading it says so
            found |= _hashes(data if isinstance(data, list) else [data])
    return found


def named_in(fd: int, start: int, end: int) -> set[str]:
    """The hashes the record lines from ``start`` to ``end`` of the file ``fd`` name."""
    return named([os.pread(fd, end - start, start)]) if end > start else set()


def read(directory: Path, hashes: Iterable[str], store: str) -> dict[str, bytes]:
    """The blobs ``hashes`` name that the store holds (a missing one is left out: joining
    says so)."""
    found = {}
    for key in hashes:
        if len(key) != 64 or not all(c in "0123456789abcdef" for c in key):
            continue  # not a hash aniki writes: never a path
        try:
            found[key] = read_whole(directory / BLOBS / key)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StoreUnavailableError(
                f"an attachment of a stored message cannot be read ({exc.strerror}); check "
                "the permissions of the .blobs folder",
                store=store,
            ) from exc
    return found


_MAKE = os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)


@contextmanager
def _locked(directory: Path, *, exclusive: bool) -> Iterator[None]:
    folder = directory / BLOBS
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        lock(fd, exclusive=exclusive, timeout=_LOCK_TIMEOUT, store=f"file://{folder}")
        try:
            yield
        finally:
            unlock(fd)
    finally:
        os.close(fd)


def keep(
    directory: Path,
    stem: str,
    blobs: Mapping[str, bytes],
    *,
    names: Iterable[str] = (),
    durable: bool,
) -> None:
    """Make sure the store holds ``blobs`` and that session ``stem`` is marked as naming
    them and the hashes ``names`` (blobs it holds already: a fork's); before the records
    that name them are written (see the module docstring)."""
    wanted = {*blobs, *names}
    if not wanted:
        return
    folder = directory / BLOBS
    with _locked(directory, exclusive=False):
        for key in wanted:
            data = blobs.get(key)
            path = folder / key
            if data is not None and not path.exists():
                assert digest(data) == key
                replace_file(path, data, durable=durable)
            by = folder / f"{key}.by"
            by.mkdir(exist_ok=True)
            os.close(
                os.open(by / stem, os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
            )
            if durable:
                fsync_directory(by)
        if durable:
            fsync_directory(folder)


def release(directory: Path, stem: str, hashes: Iterable[str]) -> None:
    """Session ``stem`` names ``hashes`` no more (its records are gone): its markers
    removed, and each blob no session names any more with them."""
    wanted = set(hashes)
    if not wanted:
        return
    folder = directory / BLOBS
    with _locked(directory, exclusive=True):
        for key in wanted:
            by = folder / f"{key}.by"
            (by / stem).unlink(missing_ok=True)
            try:
                by.rmdir()  # only when no marker is left: the last one named it
            except FileNotFoundError:
                pass
            except OSError:
                continue  # another session names it still
            (folder / key).unlink(missing_ok=True)
