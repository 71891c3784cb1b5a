"""Decoding a long history without the cyclic garbage collector walking over it.

Every decoded message is an object the collector tracks, and a read that decodes 100,000 of
them sets off about 140 young collections and, as the survivors pile up, older ones that walk
everything alive (measured, one SQLite read of 100,000 messages by a new session object:
355-518 ms with the collector running, 294-312 ms with it paused). Decoding makes no
reference cycles, so nothing is left for the collector to find afterwards: it is paused
while a read that may return many records fetches and decodes them (the rows fetched are
tracked objects too), and resumed when the read ends.

The collector is one per process. A pause seen by another thread only delays its
collections by the length of the read; a read does not resume a collector that was off
when it began (``gc.disable()`` of the application's own is kept).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["MANY", "paused"]

MANY = 2_000
"""Records a read may return before the collector is paused for it."""


@contextmanager
def paused(many: bool = True) -> Iterator[None]:
    """Pause the cyclic garbage collector for the block, when ``many`` records may be read
    in it and the collector is running."""
    if not many or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
