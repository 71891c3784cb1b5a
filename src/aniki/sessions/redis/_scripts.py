"""The Lua scripts of the Redis sessions: one per operation, each atomic and one round trip.

Every script runs over a session's four keys (``KEYS``: msgs, info, meta, batches; see
``_core``; a fork's over two sessions' eight) with the schema version as ``ARGV[1]``, and
starts from the same prelude of helpers. A script is sent once and then run by its SHA-1
digest.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

__all__ = [
    "APPEND",
    "APPEND_READ",
    "CLEAR",
    "FORK",
    "FORK_SOURCE",
    "FORK_TARGET",
    "GET_META",
    "READ",
    "REPLACE",
    "SET_META",
    "SWAP_META",
    "TAIL",
    "UNDO",
    "Script",
]


@dataclass(frozen=True, slots=True)
class Script:
    """A Lua script, run by its SHA-1 digest once the server has it."""

    source: str
    """The Lua text."""
    sha: str
    """Its SHA-1 digest, as EVALSHA wants it."""

    @classmethod
    def of(cls, body: str) -> Script:
        source = _PRELUDE + body
        return cls(source, hashlib.sha1(source.encode()).hexdigest())


# KEYS: msgs, info, meta, batches (a fork declares the target session's four after the
# source's). ARGV[1]: the schema version. A refused call returns {-2, key, type} when a key holds
# another type, {-1, version, info key} when the data is newer and {-3, key, position} when a
# record an undo or a fork must read is not JSON, always before its first write (a script that
# fails halfway keeps what it wrote). The hot scripts (append and read) check a key by the first
# command that touches it, run with pcall; the rest check every key up front with TYPE.
_PRELUDE = """
local kinds = {'list', 'hash', 'hash', 'zset'}
local function failed(reply)
  return type(reply) == 'table' and reply.err ~= nil
end
local function refuse(i, reply)
  if string.find(reply.err, 'WRONGTYPE', 1, true) then
    return {-2, KEYS[i], redis.call('TYPE', KEYS[i]).ok}
  end
  return reply
end
local function newer(stored, i)
  if not stored then return nil end
  local version = tonumber(stored)
  if not version then return {-2, KEYS[i or 2], 'hash'} end
  if version > tonumber(ARGV[1]) then return {-1, stored, KEYS[i or 2]} end
  return nil
end
local function check_all()
  for i = 1, #KEYS do
    local kind = redis.call('TYPE', KEYS[i]).ok
    if kind ~= 'none' and kind ~= kinds[(i - 1) % 4 + 1] then return {-2, KEYS[i], kind} end
  end
  for i = 2, #KEYS, 4 do
    local refused = newer(redis.call('HGET', KEYS[i], 'v'), i)
    if refused then return refused end
  end
  return nil
end
local function refresh(ttl, first)
  first = first or 1
  if ttl > 0 then
    for i = first, first + 3 do redis.call('PEXPIRE', KEYS[i], ttl) end
  end
end
"""

# ARGV (from `first` on): records... Before them: version, token (unique to this call), now
# (seconds), now (whole milliseconds), ttl ms. The token becomes the gen of a new session, and is
# remembered among the last 32 batches: redis-py resends a command after a timeout or a dropped
# connection, and a batch the server already applied must not be appended twice. The batch's
# score is an integer, which Redis parses several times faster than a fraction. Returns a
# refusal, or nil, the new length, the gen and whether the batch was applied now.
_APPEND_BATCH = """
local function append(first)
  local seen = redis.pcall('ZSCORE', KEYS[4], ARGV[2])
  if failed(seen) then return refuse(4, seen) end
  local info = redis.pcall('HMGET', KEYS[2], 'v', 'gen')
  if failed(info) then return refuse(2, info) end
  local refused = newer(info[1])
  if refused then return refused end
  local count
  if seen then
    count = redis.pcall('LLEN', KEYS[1])
    if failed(count) then return refuse(1, count) end
    return nil, count, info[2], false
  end
  count = redis.pcall('RPUSH', KEYS[1], unpack(ARGV, first, math.min(first + 999, #ARGV)))
  if failed(count) then return refuse(1, count) end
  for from = first + 1000, #ARGV, 1000 do
    count = redis.call('RPUSH', KEYS[1], unpack(ARGV, from, math.min(from + 999, #ARGV)))
  end
  redis.call('ZADD', KEYS[4], ARGV[4], ARGV[2])
  redis.call('ZREMRANGEBYRANK', KEYS[4], 0, -33)
  local gen = info[2] or ARGV[2]
  redis.call('HSET', KEYS[2], 'v', ARGV[1], 'updated', ARGV[3], 'gen', gen)
  refresh(tonumber(ARGV[5]))
  return nil, count, gen, true
end
"""

APPEND = Script.of(
    _APPEND_BATCH
    + """
local refused, count, gen = append(6)
if refused then return refused end
return {0, count, gen}
"""
)

# ARGV: as APPEND's, then cached gen, cached count, tail size (0: none), records... Appends,
# then returns what a read returns: with a tail size, the last that many messages; otherwise
# the messages between the cached count (0 when the gen differs) and this batch, which the
# caller holds already. Start -1: the batch had been applied before (a resend), read apart.
APPEND_READ = Script.of(
    _APPEND_BATCH
    + """
local refused, count, gen, applied = append(9)
if refused then return refused end
if not applied then return {0, count, gen, -1, {}} end
local tail = tonumber(ARGV[8])
if tail > 0 then return {0, count, gen, 0, redis.call('LRANGE', KEYS[1], -tail, -1)} end
local before = count - (#ARGV - 8)
local start = 0
if gen == ARGV[6] and tonumber(ARGV[7]) <= before then start = tonumber(ARGV[7]) end
local records = {}
if start < before then records = redis.call('LRANGE', KEYS[1], start, before - 1) end
return {0, count, gen, start, records}
"""
)

# ARGV: version, cached gen, cached count. Only the messages past the cached count when the
# gen still matches (nothing was cleared since); otherwise all of them.
READ = Script.of("""
local info = redis.pcall('HMGET', KEYS[2], 'v', 'gen')
if failed(info) then return refuse(2, info) end
local refused = newer(info[1])
if refused then return refused end
local count = redis.pcall('LLEN', KEYS[1])
if failed(count) then return refuse(1, count) end
local gen = info[2] or ''
local start = 0
if gen ~= '' and gen == ARGV[2] and tonumber(ARGV[3]) <= count then start = tonumber(ARGV[3]) end
return {0, gen, start, redis.call('LRANGE', KEYS[1], start, -1)}
""")

# ARGV: version, n. The last n messages only: what a reader with nothing cached needs.
TAIL = Script.of("""
local stored = redis.pcall('HGET', KEYS[2], 'v')
if failed(stored) then return refuse(2, stored) end
local refused = newer(stored)
if refused then return refused end
local records = redis.pcall('LRANGE', KEYS[1], -tonumber(ARGV[2]), -1)
if failed(records) then return refuse(1, records) end
return {0, records}
""")

CLEAR = Script.of("""
local refused = check_all()
if refused then return refused end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return {0}
""")

# ARGV: as APPEND's. Deletes the session, then appends the records (at least one) as a new
# session: whole or not at all, like every script.
REPLACE = Script.of(
    _APPEND_BATCH
    + """
local refused = check_all()
if refused then return refused end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
local failed_append, count, gen = append(6)
if failed_append then return failed_append end
return {0, count, gen}
"""
)

# ARGV: version, key. JSON text is never empty, so '' means "absent".
GET_META = Script.of("""
local refused = check_all()
if refused then return refused end
return {0, redis.call('HGET', KEYS[3], ARGV[2]) or ''}
""")

# ARGV: version, ttl ms, key, value ('' deletes).
SET_META = Script.of("""
local refused = check_all()
if refused then return refused end
if ARGV[4] == '' then
  redis.call('HDEL', KEYS[3], ARGV[3])
else
  redis.call('HSET', KEYS[2], 'v', ARGV[1])
  redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
end
refresh(tonumber(ARGV[2]))
return {0}
""")

# ARGV: version, ttl ms, key, expected text ('' means absent), value ('' deletes). Sets the
# value only if the stored text is exactly the expected one: {0, 1}; else {0, 0, stored text}.
SWAP_META = Script.of("""
local refused = check_all()
if refused then return refused end
local stored = redis.call('HGET', KEYS[3], ARGV[3]) or ''
if stored ~= ARGV[4] then return {0, 0, stored} end
if ARGV[5] == '' then
  redis.call('HDEL', KEYS[3], ARGV[3])
else
  redis.call('HSET', KEYS[2], 'v', ARGV[1])
  redis.call('HSET', KEYS[3], ARGV[3], ARGV[5])
end
refresh(tonumber(ARGV[2]))
return {0, 1}
""")

# --- fork and undo ---------------------------------------------------------------------------

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
    _RECORDS
    + _FORK_HALVES
    + """
local refused = check_all() or vacant(5)
if refused then return refused end
local records, meta = snapshot(1)
if not records then return meta end
fill(5, records, meta)
return {0, redis.call('HGET', KEYS[2], 'gen') or '', #records}
"""
)

# KEYS: the source's four. ARGV: as FORK's. The first step of a fork across slots: {0, the
# source's gen, its records through ARGV[5], its meta pairs but the skipped}, or a refusal.
FORK_SOURCE = Script.of(
    _RECORDS
    + _FORK_HALVES
    + """
local refused = check_all()
if refused then return refused end
local records, meta = snapshot(1)
if not records then return meta end
return {0, redis.call('HGET', KEYS[2], 'gen') or '', records, meta}
"""
)

# KEYS: the target's four. ARGV: version, token, now, ttl ms, the number of meta texts (pairs
# times two), the meta texts, then the records. The second step: {0}, {1} for a resend, or a
# refusal ({-5}: the target holds messages by now).
FORK_TARGET = Script.of(
    _RECORDS
    + _FORK_HALVES
    + """
local refused = check_all() or vacant(1)
if refused then return refused end
local split = 6 + tonumber(ARGV[5])
local meta, records = {}, {}
for j = 6, split - 1 do meta[#meta + 1] = ARGV[j] end
for j = split, #ARGV do records[#records + 1] = ARGV[j] end
fill(1, records, meta)
return {0}
"""
)

# ARGV: version, token (unique to this call), now (whole milliseconds), ttl ms. Removes the
# records from the last user message on and returns {0, them, the gen before, the length
# before, the gen after}; the gen becomes the token, so every instance's cache starts over.
# The token joins the batch tokens: a resend of an undo applied before returns {1} instead of
# removing another turn. With no user message, nothing changes: {0, {}, gen, length, gen}.
UNDO = Script.of(
    _RECORDS
    + """
local refused = check_all()
if refused then return refused end
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
"""
)
