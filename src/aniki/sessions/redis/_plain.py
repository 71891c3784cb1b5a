"""The append of records that name no attachment, with no ``after``: the common case (every
turn of a run), run by a script of its own, and the same append followed by a read (a run's
every write: :data:`PLAIN_APPEND_READ`).

Its effect is the general append's (``_scripts``) for such a batch: the same keys, checks,
refusals, resend guard, info, catalog, expiry and ledger upkeep. It differs in what the server
runs on each call. The general script's prelude defines some thirty Lua helpers, one closure each,
on every call, and the turn guard's check (``_guarded``) reads ``gen`` with a command of its own.
This script defines only the few helpers its usual path needs and reads ``gen`` with the info
it reads anyway; the helpers of the rare paths (the first append to an empty list, which
releases what an expired session's ledger still names; a session of the previous layout, whose
``created_at`` is read from its first record; a ttl to refresh) are defined inside those paths,
so only a call that takes one pays for them. That is about a quarter of the server's time per
append (some 15 us against 20 us on a small machine); with the read after it, 13.2-13.9 us
against the general append-and-read's 16.9-18.3 us (2,000 calls each, ``INFO commandstats``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from .._codec import SCHEMA_VERSION
from .._guard import expected_mark
from ._blob_lua import BLOB_HELPERS
from ._guarded import MOVED
from ._index_lua import INDEX_HELPERS
from ._scripts import _REFUSALS, READ_AFTER_APPEND, Script

__all__ = ["PLAIN_APPEND", "PLAIN_APPEND_READ", "plain_args"]

# KEYS: msgs, info, meta, batches, and the catalog's set of all sessions when it is kept.
# ARGV: version, token, now (whole microseconds), ttl ms, the gen a turn guard expects ('' for
# none), then the records. Returns a refusal (see ``_scripts``), {MOVED} when the guard's gen
# is not the session's (nothing written), or {0, count, gen} as the general APPEND does.
_PLAIN_APPEND = (
    _REFUSALS
    + f"""
local token, now, ttl, expect, from = ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5], 6
local seen = redis.pcall('ZSCORE', KEYS[4], token)
if failed(seen) then return refuse(4, seen) end
local info = redis.pcall('HMGET', KEYS[2], 'v', 'gen', 'created_at', 'owner', 'tags')
if failed(info) then return refuse(2, info) end
if expect ~= '' and info[2] ~= expect then return {{{MOVED}}} end
local refused = newer(info[1])
if refused then return refused end
if seen then
  local count = redis.pcall('LLEN', KEYS[1])
  if failed(count) then return refuse(1, count) end
  return {{0, count, info[2]}}
end
local cat, sets, id = false, {{}}, false
if #KEYS == 5 and string.sub(KEYS[5], -11) == 'catalog:all' then
  cat = string.sub(KEYS[5], 1, -4)
  id = string.sub(KEYS[1], #cat - 6, -7)
  sets[1] = KEYS[5]
  if info[4] then sets[2] = cat .. 'owner:' .. info[4] end
  if info[5] then
    local ok, list = pcall(cjson.decode, info[5])
    if ok and type(list) == 'table' then
      for _, tag in ipairs(list) do sets[#sets + 1] = cat .. 'tag:' .. tostring(tag) end
    end
  end
  for _, key in ipairs(sets) do
    local kind = redis.call('TYPE', key).ok
    if kind ~= 'none' and kind ~= 'zset' then return {{-2, key, kind}} end
  end
end
local count = redis.pcall('RPUSH', KEYS[1], unpack(ARGV, from, math.min(from + 999, #ARGV)))
if failed(count) then return refuse(1, count) end
for next_from = from + 1000, #ARGV, 1000 do
  count = redis.call('RPUSH', KEYS[1], unpack(ARGV, next_from, math.min(next_from + 999, #ARGV)))
end
redis.call('ZADD', KEYS[4], string.sub(now, 1, -4), token)
redis.call('ZREMRANGEBYRANK', KEYS[4], 0, -33)
local gen = info[2] or token
local before = count - (#ARGV - from + 1)
local made, upkeep = info[3], false
if not made or ttl > 0 or (cat and before == 0) then
"""
    + INDEX_HELPERS
    + BLOB_HELPERS
    + """
  if blob_base and before == 0 then release(id_at(1)) end
  made = created(made, KEYS[1], before, now)
  upkeep = refresh
end
redis.call('HSET', KEYS[2], 'v', ARGV[1], 'updated_at', now, 'gen', gen, 'count', count,
  'created_at', made)
for _, key in ipairs(sets) do redis.call('ZADD', key, now, id) end
-- The expiry is set once the info hash exists (a PEXPIRE of no key sets nothing).
if upkeep then upkeep(ttl) end
return {0, count, gen}
"""
)

PLAIN_APPEND = Script.bare(_PLAIN_APPEND)
"""The plain append (see the module's docstring)."""


def _then_read(source: str) -> str:
    """The plain append's ``source`` made the plain append-and-read: its ARGV gains the cached
    gen, the cached count and the tail size (0: none) before the records, a resent batch
    returns start -1 (where it sits is unknown: the caller reads apart), and the append's
    reply becomes what the general one returns (``_scripts.READ_AFTER_APPEND``)."""
    for old, new in (
        ("ARGV[5], 6\n", "ARGV[5], 9\n"),
        ("return {0, count, info[2]}\n", "return {0, count, info[2], -1, {}}\n"),
        ("return {0, count, gen}\n", READ_AFTER_APPEND.lstrip("\n")),
    ):
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    return source


PLAIN_APPEND_READ = Script.bare(_then_read(_PLAIN_APPEND))
"""The plain append, then what the general ``APPEND_READ`` returns; KEYS as the plain
append's, ARGV as its with the cached gen, cached count and tail size before the records."""

_VERSION = str(SCHEMA_VERSION)
"""ARGV[1] as text, which the client sends as it is (an int it formats on every call)."""


def plain_args(
    store: object,
    ttl_ms: int,
    token: str,
    records: Sequence[str | int | bytes],
    between: tuple[str | int, ...] = (),
) -> tuple[str | int | bytes, ...]:
    """The ARGV of :data:`PLAIN_APPEND` for ``records``, written by ``store`` (whose turn
    guard, if one is in force, names the gen the session must still have); with ``between``
    (cached gen, cached count, tail size), of :data:`PLAIN_APPEND_READ`."""
    expected = expected_mark(store)
    now = str(time.time_ns() // 1000)
    mark = "" if expected is None else str(expected)
    return (_VERSION, token, now, ttl_ms, mark, *between, *records)
