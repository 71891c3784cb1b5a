"""Reading what an MCP server sends in bounded memory: a JSON message whose strings are cut
while it is read, so that it stays valid JSON and costs what the cap keeps (pure, no I/O).

A message's strings may keep ``limit`` bytes in all; a string that would pass it is cut at a
character boundary, with :data:`CUT_MARK` and a note after the kept part. Strings of up to
:data:`SMALL` bytes are never cut (object keys, ``"type": "text"``), so the message keeps its
shape. What is kept beyond ``limit`` (the JSON around the strings, small strings) may grow to
:data:`SLACK` bytes; past that the message is dropped (:class:`Overflow`).

The standard library only: the stdio watchdog (``_watchdog.py``) loads this file by path.
"""

from __future__ import annotations

import re

__all__ = ["CUT_MARK", "SLACK", "SMALL", "Clip", "Overflow", "cut_note"]

SMALL = 256
"""Bytes a string keeps whatever the limit."""

SLACK = 1024 * 1024
"""Bytes a message may keep beyond the limit (the JSON around its strings, small strings)."""

CUT_MARK = "[cut: "
"""How the note on a cut string starts."""

_SPECIAL = re.compile(rb'["\\]')
_BLANK_LINE = re.compile(rb"\r?\n\r?\n")


class Overflow(Exception):
    """A message kept more than its limit and :data:`SLACK` outside long strings."""


def cut_note(limit: int) -> str:
    """The note put after the kept part of a cut string."""
    return (
        f"\n{CUT_MARK}the rest was not read: the result is over the {limit:,}-byte limit "
        "(max_result_bytes=)]"
    )


class Clip:
    """Cuts the strings of one JSON message, or of each event of a server-sent event stream
    (``events=True``: the budget starts again after each blank line), as it is fed bytes."""

    def __init__(self, limit: int, *, events: bool = False) -> None:
        self.limit = limit
        self.cut = False
        """Whether any string was cut."""
        self._events = events
        self._note = cut_note(limit).replace("\n", "\\n").encode()
        self._in_string = False
        self._escape = 0  # bytes of an escape sequence still to come (-1: the one after "\")
        self._dropping = False
        self._start()

    def _start(self) -> None:
        self._budget = self.limit
        self._kept = 0
        self._string = 0  # bytes kept of the current string

    def feed(self, data: bytes) -> bytes:
        """What to pass on of ``data``, the next bytes of the message."""
        out: list[bytes] = []
        i, n = 0, len(data)
        while i < n:
            if not self._in_string:
                j = data.find(b'"', i)
                end = n if j < 0 else j + 1
                self._outside(out, data[i:end])
                self._in_string = j >= 0
                self._string = 0
                i = end
            elif self._escape:
                i = self._escaped(out, data, i)
            else:
                found = _SPECIAL.search(data, i)
                j = n if found is None else found.start()
                if j > i:
                    self._text(out, data[i:j])
                if found is None:
                    break
                i = j + self._special(out, data[j])
        return b"".join(out)

    def _outside(self, out: list[bytes], part: bytes) -> None:
        if self._events and _BLANK_LINE.search(part):
            self._start()  # a new event: a new message
        self._keep(out, part)

    def _keep(self, out: list[bytes], part: bytes) -> None:
        self._kept += len(part)
        if self._kept > self.limit + SLACK:
            raise Overflow(f"a message kept over {self.limit + SLACK:,} bytes")
        out.append(part)

    def _text(self, out: list[bytes], part: bytes) -> None:
        if self._dropping:
            return
        room = max(self._budget, SMALL - self._string)
        if len(part) <= room:
            self._take(out, part)
            return
        cut = room
        while cut > 0 and part[cut] & 0xC0 == 0x80:  # not inside a UTF-8 character
            cut -= 1
        self._take(out, part[:cut])
        self._dropping = self.cut = True

    def _take(self, out: list[bytes], part: bytes) -> None:
        self._budget = max(0, self._budget - len(part))
        self._string += len(part)
        self._keep(out, part)

    def _special(self, out: list[bytes], byte: int) -> int:
        """Handle a quote or a backslash in a string; how far it moved on."""
        if byte == 0x22:  # the string ends
            if self._dropping:
                self._keep(out, self._note)
                self._dropping = False
            self._keep(out, b'"')
            self._in_string = False
            return 1
        self._escape = -1
        if not self._dropping and max(self._budget, SMALL - self._string) < 6:
            self._dropping = self.cut = True  # "\uXXXX" is kept whole or not at all
        if not self._dropping:
            self._take(out, b"\\")
        return 1

    def _escaped(self, out: list[bytes], data: bytes, i: int) -> int:
        if self._escape == -1:
            self._escape = 4 if data[i] == 0x75 else 0  # "\u" and four hex digits
            take = data[i : i + 1]
        else:
            take = data[i : i + self._escape]
            self._escape -= len(take)
        if not self._dropping:
            self._take(out, take)
        return i + len(take)
