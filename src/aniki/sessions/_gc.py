"""Decoding a long history without the cyclic garbage collector walking over it.

Every decoded message is an object the collector tracks, and a read that decodes 100,000 of
them sets off about 140 young collections and, as the survivors pile up, older ones that walk
everything alive (measured, one SQLite read of 100,000 messages by a new session object:
355-518 ms with the collector running, 294-312 ms with it paused). Decoding makes no
reference cycles, so nothing is left for the collector to find afterwards: it is paused
while a read that may return many records fetches and decodes them (the rows fetched are
tracked objects too), and resumed when the read ends.

Resuming it would make the next allocation start a young collection of everything the read
made, only to find it all alive (40 ms after a read of 100,000 messages, measured). So a
read that left :data:`MANY` or more young objects ends by moving what is tracked into the
oldest generation as it is, without a collection: ``gc.freeze()`` then ``gc.unfreeze()``,
two list splices, which also reset the young generation's count. Any young garbage cycle of
the application's is then found by the next full collection instead of an earlier young
one. A short read (a first read of a short history, as a server making a session object per
request does on every request) resumes the collector as it found it, so that young
collections keep running. An application that keeps objects frozen itself
(``gc.get_freeze_count()`` above 0) is left as it is too.

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
        if gc.get_count()[0] >= MANY and gc.get_freeze_count() == 0:
            gc.freeze()  # every tracked object to the permanent generation, counts reset
            gc.unfreeze()  # and from there to the oldest generation: no collection ran
        gc.enable()
