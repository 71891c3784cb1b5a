"""A page of a :class:`~aniki.sessions.FileSession` (:func:`read_page`), found through an index
of the file's lines.

A session keeps a :class:`LineIndex` of its file: where each complete record line starts and
how many messages come before it. It is built by one pass over the lines (a line holding one
message is counted by its first byte, without decoding it; a batch line, an array, is parsed
as JSON to count its messages), then extended past what it covers on each read, and built
again when the file is another one (replaced by an undo, a fork or an import), has another
generation (cleared or undone in place) or is shorter than what it covers. A page then costs
the decoding of its own lines: all of a batch line that it touches, one line otherwise.
"""

from __future__ import annotations

import json
import os
from array import array
from bisect import bisect_right
from itertools import accumulate
from typing import TYPE_CHECKING, cast

from ...errors import CorruptStoreError
from ...messages import Message
from .._codec import decode_messages
from .._pages import Page, window
from ._io import Replaced, same_file

if TYPE_CHECKING:
    from .session import FileSession

__all__ = ["LineIndex", "read_page"]

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

    def extend(self, fd: int, size: int, session: FileSession) -> None:
        """Cover every complete line up to ``size``."""
        chunk = _CHUNK
        while self.end < size:
            wanted = min(chunk, size - self.end)
            data = os.pread(fd, wanted, self.end)
            cut = data.rfind(b"\n") + 1
            if cut:
                self._add(fd, data[:cut], session)
                chunk = _CHUNK
            elif len(data) < wanted or self.end + len(data) >= size:
                return  # a torn last line: not a record
            else:
                chunk *= 2  # a line longer than a chunk: read it whole

    def _add(self, fd: int, data: bytes, session: FileSession) -> None:
        lines = data.split(b"\n")
        lines.pop()  # what follows the last newline: nothing
        counts = [1 if line[:1] not in _COUNTED else _count(line) for line in lines]
        if None in counts:
            bad = counts.index(None)
            offset = self.end + sum(len(line) + 1 for line in lines[:bad])
            try:
                decode_messages(lines[bad], store=session._label)  # the error a read gives
            except CorruptStoreError as exc:
                raise _damaged(session, fd, len(self.starts) + bad, offset, exc) from exc
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


def read_page(session: FileSession, fd: int | None, start: int, limit: int) -> Page:
    """Messages ``start`` to ``start + limit`` of the session file ``fd`` (``None``: no file),
    held under a shared lock by the caller, so that no write lands meanwhile."""
    if fd is None:
        return Page(0, 0, ())
    if not same_file(fd, session._path):
        raise Replaced
    head = session._head(fd)
    if head is None:  # empty, or its creation was cut short
        return Page(0, 0, ())
    generation, header_end = head
    status = os.fstat(fd)
    identity = (status.st_dev, status.st_ino)
    index = session._lines
    if (
        index is None
        or index.identity != identity
        or index.generation != generation
        or index.end > status.st_size
        or index.end < header_end
    ):
        index = session._lines = LineIndex(identity, generation, header_end)
    index.extend(fd, status.st_size, session)
    first, stop = window(start, limit, index.total)
    if first == stop:
        return Page(index.total, first, ())
    return Page(index.total, first, _messages(session, fd, index, first, stop))


def _messages(
    session: FileSession, fd: int, index: LineIndex, first: int, stop: int
) -> tuple[Message, ...]:
    """Messages ``first`` to ``stop`` (within the index), decoding only the lines holding them."""
    low = bisect_right(index.firsts, first) - 1
    high = bisect_right(index.firsts, stop - 1)  # the line after the last one needed
    end = index.starts[high] if high < len(index.starts) else index.end
    data = os.pread(fd, end - index.starts[low], index.starts[low])
    decoded: list[Message] = []
    for number, line in enumerate(data.split(b"\n")[:-1], start=low):
        try:
            decoded.extend(decode_messages(line, store=session._label))
        except CorruptStoreError as exc:
            raise _damaged(session, fd, number, index.starts[number], exc) from exc
    skip = first - index.firsts[low]
    return tuple(decoded[skip : skip + stop - first])


def _damaged(
    session: FileSession, fd: int, number: int, offset: int, exc: CorruptStoreError
) -> CorruptStoreError:
    """The error a full read gives for record line ``number`` (from 0; the header is line 1),
    the file remembered as damaged as a full read remembers it."""
    return session._damaged(fd, f"line {number + 2} (at byte {offset})", exc)
