"""The Lua scripts of ``fork`` and ``undo`` on the Redis sessions (see ``_edits``): each
atomic and one round trip, over the prelude and conventions of ``_scripts``."""

from __future__ import annotations

from ._scripts import Script

__all__ = ["FORK", "FORK_SOURCE", "FORK_TARGET", "UNDO"]


# Helpers of the scripts that look into records: `find_last` scans a list from its end, a page
# at a time, decoding only the records whose text holds `needle` (a record with that field
# holds it verbatim, as aniki writes JSON) to compare their `field`; it returns the position
# found, or false, or nil and the position of a record holding the needle that is not JSON.
_RECORDS = """
local function find_last(i, needle, field, value)
  local high = redis.call('LLEN', KEYS[i]) - 1
  while high >= 0 do
    local low = math.max(0, high - 255)
    local records = redis.call('LRANGE', KEYS[i], low, high)
    for j = #records, 1, -1 do
      if string.find(records[j], needle, 1, true) then
        local ok, data = pcall(cjson.decode, records[j])
        if not ok then return nil, low + j - 1 end
        if type(data) == 'table' and data[field] == value then return low + j - 1 end
      end
    end
    high = low - 1
  end
  return false
end
local function push(key, list)
  for from = 1, #list, 1000 do
    redis.call('RPUSH', key, unpack(list, from, math.min(from + 999, #list)))
  end
end
"""

# A fork's two halves. ARGV: version, token (the new session's gen, unique to this call), now
# (seconds), ttl ms, then, for the source: the id to copy through ('' for all), that id as JSON
# text (the needle), and the meta keys not copied. `snapshot` reads the source at KEYS[s..s+3]:
# its records and meta pairs, or nil and a refusal ({-4}: no message has the id). `vacant` says
# whether the target at KEYS[t..t+3] may be written: nil, or {1} when this very fork was applied
# before (a resend: its token is the gen), or {-5} when the target holds messages. `fill` writes
# the fork there; the target's meta is replaced, its batch tokens kept (they guard its resends).
_FORK_HALVES = """
local function snapshot(s)
  local last = redis.call('LLEN', KEYS[s]) - 1
  if ARGV[5] ~= '' then
    local found, bad = find_last(s, ARGV[6], 'id', ARGV[5])
    if bad then return nil, {-3, KEYS[s], bad} end
    if not found then return nil, {-4} end
    last = found
  end
  local records = {}
  if last >= 0 then records = redis.call('LRANGE', KEYS[s], 0, last) end
  local skipped = {}
  for j = 7, #ARGV do skipped[ARGV[j]] = true end
  local stored, meta = redis.call('HGETALL', KEYS[s + 2]), {}
  for j = 1, #stored, 2 do
    if not skipped[stored[j]] then
      meta[#meta + 1] = stored[j]
      meta[#meta + 1] = stored[j + 1]
    end
  end
  return records, meta
end
local function vacant(t)
  if redis.call('HGET', KEYS[t + 1], 'gen') == ARGV[2] then return {1} end
  if redis.call('LLEN', KEYS[t]) > 0 then return {-5} end
  return nil
end
local function fill(t, records, meta)
  redis.call('DEL', KEYS[t + 2])
  if #records == 0 and #meta == 0 then return end
  push(KEYS[t], records)
  for from = 1, #meta, 1000 do
    redis.call('HSET', KEYS[t + 2], unpack(meta, from, math.min(from + 999, #meta)))
  end
  redis.call('HSET', KEYS[t + 1], 'v', ARGV[1], 'gen', ARGV[2], 'updated', ARGV[3])
  refresh(tonumber(ARGV[4]), t)
end
"""

# KEYS: the source's four, then the target's four (another id, so, on a Redis Cluster, most
# often another slot: there FORK_SOURCE and FORK_TARGET do the same in two steps). Copies the
# source (through the message ARGV[5] names) into the empty target, in one step. Returns {0,
# the source's gen, how many records were copied}, {1} for a resend, or a refusal.
FORK = Script.of(
    """
local records, meta = snapshot(1)
if not records then return meta end
fill(5, records, meta)
return {0, redis.call('HGET', KEYS[2], 'gen') or '', #records}
""",
    helpers=_RECORDS + _FORK_HALVES,
    refuse="check_all() or vacant(5)",
)

# KEYS: the source's four. ARGV: as FORK's. The first step of a fork across slots: {0, the
# source's gen, its records through ARGV[5], its meta pairs but the skipped}, or a refusal.
FORK_SOURCE = Script.of(
    """
local records, meta = snapshot(1)
if not records then return meta end
return {0, redis.call('HGET', KEYS[2], 'gen') or '', records, meta}
""",
    helpers=_RECORDS + _FORK_HALVES,
    refuse="check_all()",
)

# KEYS: the target's four. ARGV: version, token, now, ttl ms, the number of meta texts (pairs
# times two), the meta texts, then the records. The second step: {0}, {1} for a resend, or a
# refusal ({-5}: the target holds messages by now).
FORK_TARGET = Script.of(
    """
local split = 6 + tonumber(ARGV[5])
local meta, records = {}, {}
for j = 6, split - 1 do meta[#meta + 1] = ARGV[j] end
for j = split, #ARGV do records[#records + 1] = ARGV[j] end
fill(1, records, meta)
return {0}
""",
    helpers=_RECORDS + _FORK_HALVES,
    refuse="check_all() or vacant(1)",
)

# ARGV: version, token (unique to this call), now (whole milliseconds), ttl ms. Removes the
# records from the last user message on and returns {0, them, the gen before, the length
# before, the gen after}; the gen becomes the token, so every instance's cache starts over.
# The token joins the batch tokens: a resend of an undo applied before returns {1} instead of
# removing another turn. With no user message, nothing changes: {0, {}, gen, length, gen}.
UNDO = Script.of(
    """
if redis.call('ZSCORE', KEYS[4], ARGV[2]) then return {1} end
local gen = redis.call('HGET', KEYS[2], 'gen') or ''
local count = redis.call('LLEN', KEYS[1])
local start, bad = find_last(1, '"user"', 'role', 'user')
if bad then return {-3, KEYS[1], bad} end
if not start then return {0, {}, gen, count, gen} end
local removed = redis.call('LRANGE', KEYS[1], start, -1)
for j = 2, #removed do
  if not pcall(cjson.decode, removed[j]) then return {-3, KEYS[1], start + j - 1} end
end
if start == 0 then
  redis.call('DEL', KEYS[1])
else
  redis.call('LTRIM', KEYS[1], 0, start - 1)
end
redis.call('HSET', KEYS[2], 'v', ARGV[1], 'gen', ARGV[2])
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[2])
redis.call('ZREMRANGEBYRANK', KEYS[4], 0, -33)
refresh(tonumber(ARGV[4]))
return {0, removed, gen, count, ARGV[2]}
""",
    helpers=_RECORDS,
    refuse="check_all()",
)
