"""A page of a :class:`~aniki.sessions.FileSession` (:func:`read_page`), found through an index
of the file's lines.

A session keeps a :class:`LineIndex` of its file (each read takes it and hands it back):
where each complete record line starts and how many messages come before it. It is built by
one pass over the lines (a line holding one message is counted by its first byte, without
decoding it; a batch line, an array, is parsed as JSON to count its messages), then extended
past what it covers on each read, and built again when the file is another one (replaced by
an undo, a fork or an import), has another generation (cleared or undone in place) or is
shorter than what it covers. A page then costs the decoding of its own lines: all of a batch
line that it touches, one line otherwise; and the blobs they name, unless the page names its
attachments instead (see :func:`~aniki.sessions._pages.read_named_page`).
"""

from __future__ import annotations

import json
import os
from array import array
from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import TypeVar, cast

from ...errors import CorruptStoreError
from ...messages import Message
from .._blobs import Described, described_data, described_message
from .._codec import decode_messages
from .._local_file import identity
from .._pages import Page, named_page, naming, window
from ._attachments import NAMES_BLOB
from ._file import SessionFile
from ._io import Replaced, same_file

__all__ = ["LineIndex", "read_page"]

T = TypeVar("T")

_CHUNK = 1 << 22
"""Bytes read at a time while the index is built (a longer line is read whole)."""

_COUNTED = frozenset(bytes((byte,)) for byte in b"[ \t\n\r\x0b\x0c")
"""First bytes of a line that may hold something else than one message: a batch (an array),
or leading space before one (``bytes.lstrip`` strips these)."""


class LineIndex:
    """Where the record lines of one session file start, and the messages before each."""

    __slots__ = ("end", "firsts", "generation", "identity", "starts", "total")

    def __init__(self, identity: tuple[int, int], generation: int, start: int) -> None:
        self.identity = identity
        """The file's (device, inode)."""
        self.generation = generation
        """The header's generation when the index was begun."""
        self.starts = array("q")
        """The byte offset of each complete record line."""
        self.firsts = array("q")
        """The index (in the history) of each line's first message."""
        self.end = start
        """The end of the last line covered: where the next one starts."""
        self.total = 0
        """The messages in the lines covered."""

    def extend(self, fd: int, size: int, file: SessionFile) -> None:
        """Cover every complete line up to ``size``."""
        chunk = _CHUNK
        while self.end < size:
            wanted = min(chunk, size - self.end)
            data = os.pread(fd, wanted, self.end)
            cut = data.rfind(b"\n") + 1
            if cut:
                self._add(fd, data[:cut], file)
                chunk = _CHUNK
            elif len(data) < wanted or self.end + len(data) >= size:
                return  # a torn last line: not a record
            else:
                chunk *= 2  # a line longer than a chunk: read it whole

    def _add(self, fd: int, data: bytes, file: SessionFile) -> None:
        lines = data.split(b"\n")
        lines.pop()  # what follows the last newline: nothing
        counts = [1 if line[:1] not in _COUNTED else _count(line) for line in lines]
        if None in counts:
            bad = counts.index(None)
            offset = self.end + sum(len(line) + 1 for line in lines[:bad])
            try:
                decode_messages(lines[bad], store=file.label)  # the error a read gives
            except CorruptStoreError as exc:
                raise _damaged(file, fd, len(self.starts) + bad, offset, exc) from exc
            raise AssertionError("a line that JSON rejects was decoded")  # pragma: no cover
        starts = list(accumulate((len(line) + 1 for line in lines), initial=self.end))
        firsts = list(accumulate(cast("list[int]", counts), initial=self.total))
        self.end, self.total = starts.pop(), firsts.pop()
        self.starts.extend(starts)
        self.firsts.extend(firsts)


def _count(line: bytes) -> int | None:
    """The messages of a line that may be a batch; ``None`` when it cannot be counted."""
    if line.lstrip()[:1] != b"[":
        return 1
    try:
        items = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return len(items) if isinstance(items, list) else None


def read_page(
    file: SessionFile, fd: int | None, index: LineIndex | None, start: int, limit: int
) -> tuple[Page, LineIndex | None]:
    """Messages ``start`` to ``start + limit`` of the session file ``fd`` (``None``: no file),
    held under a shared lock by the caller, so that no write lands meanwhile; and the index
    of its lines, ``index`` extended (or built again: see the module docstring)."""
    if fd is None:
        return Page(0, 0, ()), index
    if not same_file(fd, file.path):
        raise Replaced
    head = file.head(fd)
    if head is None:  # empty, or its creation was cut short
        return Page(0, 0, ()), index
    generation, header_end = head
    size = os.fstat(fd).st_size
    key = identity(fd)
    if (
        index is None
        or index.identity != key
        or index.generation != generation
        or index.end > size
        or index.end < header_end
    ):
        index = LineIndex(key, generation, header_end)
    index.extend(fd, size, file)
    first, stop = window(start, limit, index.total)
    label = file.label
    if naming():
        found = _slice(file, fd, index, first, stop, lambda line: _described(line, label))
        return named_page(index.total, first, found), index
    held: dict[str, bytes] = {}  # the blobs read: each once (see _attachments)

    def decode(line: bytes) -> list[Message]:
        if NAMES_BLOB not in line:
            return decode_messages(line, store=label)
        return file.decode(line, held)

    return Page(index.total, first, tuple(_slice(file, fd, index, first, stop, decode))), index


def _slice(
    file: SessionFile,
    fd: int,
    index: LineIndex,
    first: int,
    stop: int,
    decode: Callable[[bytes], Sequence[T]],
) -> list[T]:
    """Messages ``first`` to ``stop`` (within the index) as ``decode`` makes them of each
    line, decoding only the lines holding them."""
    if first == stop:
        return []
    low = bisect_right(index.firsts, first) - 1
    high = bisect_right(index.firsts, stop - 1)  # the line after the last one needed
    end = index.starts[high] if high < len(index.starts) else index.end
    data = os.pread(fd, end - index.starts[low], index.starts[low])
    decoded: list[T] = []
    for number, line in enumerate(data.split(b"\n")[:-1], start=low):
        try:
            decoded.extend(decode(line))
        except CorruptStoreError as exc:
            raise _damaged(file, fd, number, index.starts[number], exc) from exc
    skip = first - index.firsts[low]
    return decoded[skip : skip + stop - first]


def _described(line: bytes, store: str) -> list[Described]:
    """The messages of a record line without their attachments, each with what names them;
    no blob is read."""
    if NAMES_BLOB not in line:
        return [described_message(message) for message in decode_messages(line, store=store)]
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        decode_messages(line, store=store)  # the codec words the error
        raise
    items = data if isinstance(data, list) else [data]
    return [described_data(item, store=store) for item in items]


def _damaged(
    file: SessionFile, fd: int, number: int, offset: int, exc: CorruptStoreError
) -> CorruptStoreError:
    """The error a full read gives for record line ``number`` (from 0; the header is line 1),
    the file remembered as damaged as a full read remembers it."""
    return file.damaged(fd, f"line {number + 2} (at byte {offset})", exc)
