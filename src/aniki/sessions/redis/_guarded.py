"""Appends under a run's turn guard (see :mod:`aniki.sessions._guard`), without I/O.

A guarded append runs its usual script with a check in front, in the same script (so in the
same atomic step): the expected ``gen`` rides as the last argument, is taken off before the
append reads its arguments, and when the session's ``gen`` differs (an undo or a clear made
a new one, or none is left) the script returns :data:`MOVED` having written nothing. One
``HGET`` more, no extra round trip. (The plain append, ``_plain``, takes the expected ``gen``
among its arguments and compares it with the one its info read returns: no command more.)
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from .._guard import HistoryMoved, admit, expected_mark
from ._scripts import _PRELUDE, Script

__all__ = ["MOVED", "guarded", "settled"]

MOVED = 3
"""A guarded script's status when the session's ``gen`` is not the expected one."""

_CHECK = f"""
local expect = table.remove(ARGV)
local current = redis.pcall('HGET', KEYS[2], 'gen')
if failed(current) then return refuse(2, current) end
if current ~= expect then return {{{MOVED}}} end
"""


@functools.cache
def _with_check(script: Script) -> Script:
    return Script.of(_CHECK + script.source[len(_PRELUDE) :])


def guarded(
    store: object, script: Script, args: tuple[bytes | str | int, ...]
) -> tuple[Script, tuple[bytes | str | int, ...]]:
    """``script`` and ``args``, checked against the guard's mark for ``store`` when it has one."""
    expected = expected_mark(store)
    if expected is None:
        return script, args
    return _with_check(script), (*args, str(expected))


def settled(store: object, reply: Sequence[Any]) -> None:
    """After an append script's reply has passed ``RedisCore.check``: :class:`HistoryMoved`
    when the guard refused it, else the ``gen`` it was written under goes to the guard."""
    status = int(reply[0])
    if status == MOVED:
        raise HistoryMoved
    if status == 0:
        gen = reply[2]
        admit(store, gen.decode("utf-8") if isinstance(gen, bytes) else str(gen))
