"""A page of a Redis session (:func:`page`): one script reads the list's length and the
range asked for, so the two agree whatever other clients append meanwhile.

The script checks the key types and the schema version as the read scripts do, and writes
nothing; records decode as ``get_messages()`` decodes them (with the blobs they name, read
in one more round trip), or, for a page that names its attachments (see
:func:`~aniki.sessions._pages.read_named_page`), without reading any blob.
"""

from __future__ import annotations

from ...messages import Message
from .._blobs import described
from .._codec import SCHEMA_VERSION, decode_message
from .._pages import Page, named_page, naming, span
from ._attachments import decoded, fetch, names_blobs
from ._core import Eval, Flow, RedisCore
from ._scripts import Script

__all__ = ["PAGE", "page"]

# ARGV: version, low, high (start and start + limit as _pages.span gives them: from the end
# of the list when low is negative). Returns {0, length, first, records}, or a refusal.
PAGE = Script.of("""
local stored = redis.pcall('HGET', KEYS[2], 'v')
if failed(stored) then return refuse(2, stored) end
local refused = newer(stored)
if refused then return refused end
local count = redis.pcall('LLEN', KEYS[1])
if failed(count) then return refuse(1, count) end
local low, high = tonumber(ARGV[2]), tonumber(ARGV[3])
local base = 0
if low < 0 then base = count end
local first = math.min(math.max(base + low, 0), count)
local stop = math.min(math.max(base + high, 0), count)
local records = {}
if stop > first then records = redis.call('LRANGE', KEYS[1], first, stop - 1) end
return {0, count, first, records}
""")


def page(core: RedisCore, start: int, limit: int) -> Flow[Page]:
    """Messages ``start`` to ``start + limit`` (see :func:`~aniki.sessions._pages.read_page`)."""
    low, high = span(start, limit)
    reply = yield Eval(PAGE, core.keys, (SCHEMA_VERSION, low, high))
    core.check(reply)
    records = reply[3]
    if naming():
        found = [described(record, store=core.store) for record in records]
        return named_page(int(reply[1]), int(reply[2]), found)
    messages: tuple[Message, ...]
    if any(map(names_blobs, records)):
        blobs = yield from fetch(core.prefix, records)
        messages = tuple(decoded(records, blobs, store=core.store))
    else:
        messages = tuple(decode_message(record, store=core.store) for record in records)
    return Page(int(reply[1]), int(reply[2]), messages)
